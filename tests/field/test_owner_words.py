"""One path, one owner, the same words in `status`, `resume`, `explain` and `conflicts`,
after a real crash (an agent's shell command killed mid-write); a conflict's reason
follows `reconcile` instead of saying the call never finished."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gitguard.ledger import journal
from gitguard.storage.store import Store
from gitguard.workspace import discover
from tests.helpers.commands import gg
from tests.helpers.daemons import running_daemon, wait_for


def _killed_writer(repo: Path) -> str:
    """`gitguard run` of a command that writes b.txt and hangs, killed with its group."""
    store = Store(discover(repo))
    proc = subprocess.Popen([sys.executable, "-m", "gitguard", "run", "--", "sh", "-c",
                             "echo written >> b.txt; exec sleep 600"], cwd=repo,
                            start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        # Its whole line, not only the file's creation: the kill may land between the two.
        wait_for("the command to write", lambda: (repo / "b.txt").exists()
                 and (repo / "b.txt").read_text() == "written\n" and any(
                     e.status == "started" for e in journal.read(store).in_order()))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return next(e.call_id for e in journal.read(store).in_order() if e.status == "started")


def _lines(repo: Path, *args: str) -> str:
    done = gg(repo, *args, check=False)
    assert done.returncode in (0, 5), done.stdout + done.stderr
    return done.stdout


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
def test_status_resume_explain_and_conflicts_name_owners_alike(repo: Path,
                                                               daemon: bool) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    with contextlib.ExitStack() as stack:
        if daemon:
            stack.enter_context(running_daemon(repo))
        _owners_alike(repo)


def _owners_alike(repo: Path) -> None:
    target = json.loads(gg(repo, "checkpoint", "--json").stdout)["checkpointId"]
    gg(repo, "run", "--", "sed", "-i", "s/return 1/return 2/", "src/app.py")
    agent = journal.read(Store(discover(repo))).in_order()[-1].call_id
    killed = _killed_writer(repo)
    words = f"{killed} or the user (ambiguous)"
    ambiguous = f"b.txt by {words}"

    assert ambiguous in _lines(repo, "resume")
    (repo / "README.md").write_text("# project\nmine\n")
    status = _lines(repo, "status")
    assert f"A b.txt  by {words}" in status
    assert f"M src/app.py  by {agent} (window)" in status
    assert "M README.md  by the user" in status
    explain = _lines(repo, "explain")
    assert f"changed {ambiguous}" in explain
    assert f"changed src/app.py by {agent} (window)" in explain
    assert "changed README.md by the user" in explain

    rolled = json.loads(_lines(repo, "rollback-files", "--to", target, "--json"))
    assert [c["path"] for c in rolled["conflicts"]] == ["b.txt"]
    listed = _lines(repo, "conflicts")
    assert f"now by {words}" in listed
    assert "never finished" in listed

    gg(repo, "reconcile", killed, "--status", "succeeded")
    listed = _lines(repo, "conflicts")
    assert "never finished" not in listed
    assert f"{killed} was interrupted and reconciled as succeeded" in listed
    assert f"A b.txt  by {words}" in _lines(repo, "status")
    again = json.loads(_lines(repo, "rollback-files", "--to", target, "--json"))
    assert "reconciled as succeeded" in again["conflicts"][0]["reason"]
    assert (repo / "b.txt").read_text() == "written\n"
    assert (repo / "README.md").read_text() == "# project\nmine\n"
