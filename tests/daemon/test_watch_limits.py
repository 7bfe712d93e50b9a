"""The daemon under the inotify watch limit (issues 21, 28): a directory made after the
daemon started that the kernel refuses a watch for is said in the log, `daemon status`
and `status`, and scanned at every call boundary, so an agent's change there is still the
call's. A tree that does not fit under the limit at start cannot be scheduled at all
(watchdog's public API schedules the tree whole): the daemon then does not serve, says
why, and the hooks guard in-process.

The limit is lowered in a user namespace of the test's own (`unshare --user`): the
kernel counts and limits watches per user namespace (`/proc/sys/user/max_inotify_watches`,
which `fs.inotify.max_user_watches` is for the initial namespace), so the daemon started
in it hits ENOSPC exactly as under a low `fs.inotify.max_user_watches`, while every
other process on the machine keeps its limit. `test_the_global_limit_lowered_as_root`
lowers the machine-wide setting itself (root only; restored in a finally).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gitguard.ipc import client
from tests.helpers.commands import gg
from tests.helpers.daemons import alive, store_of, wait_for

DIRS = 40
LIMIT = 12          # far fewer than the repository's directories
NEW_DIRS = 60       # made while the daemon runs, with room for about a dozen


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c",
                            "echo 5 > /proc/sys/user/max_inotify_watches"],
                           capture_output=True)
    return probe.returncode == 0


def _seed(repo: Path) -> None:
    for i in range(DIRS):
        (repo / f"d{i:02}").mkdir()
        (repo / f"d{i:02}" / "keep.txt").write_text(f"{i}\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "dirs"], cwd=repo, check=True)
    gg(repo, "init")


@contextmanager
def _daemon(repo: Path, prefix: list[str]) -> Iterator[int]:
    subprocess.run([*prefix, sys.executable, "-m", "gitguard", "daemon", "start"], cwd=repo,
                   check=True, capture_output=True)
    pid = client.pid_of(str(store_of(repo)))
    assert pid is not None and alive(pid)
    try:
        yield pid
    finally:
        gg(repo, "daemon", "stop")
        wait_for("the daemon process to end", lambda: not alive(pid), timeout=30)


def _shows_the_limit_and_owns_the_change(repo: Path) -> None:
    found = json.loads(gg(repo, "daemon", "status", "--json").stdout)
    unwatched = found["unwatched"]
    assert unwatched, found
    assert "not watched" in gg(repo, "daemon", "status").stdout
    log = (store_of(repo) / "daemon.log").read_text()
    assert "not watched" in log and "max_user_watches" in log
    assert "not watched" in gg(repo, "status").stdout
    assert json.loads(gg(repo, "status", "--json").stdout)["daemon"]["unwatched"]["count"] == (
        len(unwatched))

    # A declared Write and a shell command, each in a directory with no watch.
    target = f"{unwatched[0]}/agent.txt"
    begin = gg(repo, "call", "begin", "--tool", "Write", "--writes", target, "--json",
               "--input", json.dumps({"file_path": target, "content": "agent\n"}))
    call_id = json.loads(begin.stdout)["callId"]
    (repo / target).write_text("agent\n")
    end = gg(repo, "call", "end", call_id, "--status", "succeeded")
    assert "1 file(s) changed" in end.stdout, end.stdout
    shell_target = f"{unwatched[-1]}/keep.txt"
    begin = gg(repo, "call", "begin", "--tool", "Bash", "--json",
               "--input", json.dumps({"command": f"echo shell > {shell_target}"}))
    shell_id = json.loads(begin.stdout)["callId"]
    (repo / shell_target).write_text("shell\n")
    gg(repo, "call", "end", shell_id, "--status", "succeeded")

    ledger = {e["callId"]: e for e in json.loads(gg(repo, "ledger", "--json").stdout)}
    assert [p["path"] for p in ledger[call_id]["filePatches"]] == [target]
    assert [p["path"] for p in ledger[shell_id]["filePatches"]] == [shell_target]
    dirty = {d["path"]: d for d in json.loads(gg(repo, "status", "--json").stdout)["dirty"]}
    assert (dirty[target]["owner"], dirty[target]["confidence"]) == (call_id, "exact")
    assert (dirty[shell_target]["owner"], dirty[shell_target]["confidence"]) == (
        shell_id, "window")
    first = json.loads(gg(repo, "checkpoints", "--json").stdout)[0]["checkpointId"]
    plan = json.loads(gg(repo, "rollback-files", "--to", first, "--dry-run", "--json").stdout)
    assert plan["deleted"] == [target] and plan["restored"] == [shell_target]
    assert plan["conflicts"] == []


def _directories(repo: Path) -> int:
    return sum(len(dirs) for _, dirs, _ in os.walk(repo)) + 1


def _room_for_a_dozen(repo: Path) -> int:
    """A limit that fits the tree the daemon will watch at start (`.git` included, with
    its 256 object fan-outs made now rather than by the daemon) and a dozen directories
    more: the rest of the NEW_DIRS made later find none."""
    for i in range(256):
        (repo / ".git" / "objects" / f"{i:02x}").mkdir(exist_ok=True)
    (store_of(repo) / "barrier").mkdir(exist_ok=True)
    return _directories(repo) + 12


def _make_new_dirs(repo: Path) -> None:
    """NEW_DIRS directories, each with a committed file (the user's work, done)."""
    for i in range(DIRS, DIRS + NEW_DIRS):
        (repo / f"d{i:02}").mkdir()
        (repo / f"d{i:02}" / "keep.txt").write_text(f"{i}\n")
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "more dirs"], cwd=repo, check=True)


def _in_namespace(limit: int) -> list[str]:
    return ["unshare", "--user", "--map-root-user", "sh", "-c",
            f'echo {limit} > /proc/sys/user/max_inotify_watches && exec "$@"', "sh"]


@pytest.mark.skipif(not _unshare_works(),
                    reason="needs `unshare --user` (user namespaces) to lower the limit")
def test_a_change_in_a_directory_made_over_the_limit_is_still_the_calls(repo: Path) -> None:
    _seed(repo)
    with _daemon(repo, _in_namespace(_room_for_a_dozen(repo))):
        _make_new_dirs(repo)
        _shows_the_limit_and_owns_the_change(repo)


@pytest.mark.skipif(not _unshare_works(),
                    reason="needs `unshare --user` (user namespaces) to lower the limit")
def test_a_tree_over_the_limit_at_start_is_refused_and_guarded_in_process(repo: Path) -> None:
    _seed(repo)
    started = subprocess.run([*_in_namespace(LIMIT), sys.executable, "-m", "gitguard",
                              "daemon", "start"], cwd=repo, capture_output=True, text=True)
    assert started.returncode == 1, started
    assert "the inotify watch limit is reached" in started.stderr, started.stderr
    assert "Traceback" not in started.stderr
    assert client.pid_of(str(store_of(repo))) is None
    shown = json.loads(gg(repo, "daemon", "status", "--json", check=False).stdout)
    assert "the inotify watch limit is reached" in shown["unusable"]["why"]
    assert "could not serve" in gg(repo, "status").stdout
    begin = gg(repo, "call", "begin", "--tool", "Write", "--writes", "d03/agent.txt",
               "--json", "--input", json.dumps({"file_path": "d03/agent.txt",
                                                 "content": "agent\n"}))
    call_id = json.loads(begin.stdout)["callId"]
    (repo / "d03" / "agent.txt").write_text("agent\n")
    gg(repo, "call", "end", call_id, "--status", "succeeded")
    dirty = {d["path"]: d for d in json.loads(gg(repo, "status", "--json").stdout)["dirty"]}
    assert (dirty["d03/agent.txt"]["owner"], dirty["d03/agent.txt"]["confidence"]) == (
        call_id, "exact")


GLOBAL = Path("/proc/sys/fs/inotify/max_user_watches")


def _watches_in_use(uid: int) -> int:
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            for fd in os.listdir(f"/proc/{pid}/fdinfo"):
                total += Path(f"/proc/{pid}/fdinfo/{fd}").read_text().count("inotify wd:")
        except OSError:
            continue
    return total


@pytest.mark.serial
@pytest.mark.skipif(os.geteuid() != 0, reason="lowering fs.inotify.max_user_watches needs root")
def test_the_global_limit_lowered_as_root(repo: Path) -> None:
    _seed(repo)
    old = GLOBAL.read_text()
    try:
        # Just above what root's processes hold now and the tree the daemon watches at
        # start. Other processes keep theirs; the limit is back within the test.
        GLOBAL.write_text(f"{_watches_in_use(0) + _room_for_a_dozen(repo)}\n")
        with _daemon(repo, []):
            _make_new_dirs(repo)
            GLOBAL.write_text(old)          # the daemon has met the limit: others need not
            _shows_the_limit_and_owns_the_change(repo)
    finally:
        GLOBAL.write_text(old)


def test_a_new_dependency_directory_is_not_the_calls(repo: Path) -> None:
    """`npm install` into a node_modules/ git does not ignore: its files are in no call's
    patch (no snapshot holds them), and status lists it."""
    _seed(repo)
    with _daemon(repo, []):
        begin = gg(repo, "call", "begin", "--tool", "Bash", "--json",
                   "--input", json.dumps({"command": "npm install"}))
        call_id = json.loads(begin.stdout)["callId"]
        for i in range(100):
            (repo / "node_modules" / f"pkg{i}" / "lib").mkdir(parents=True)
            (repo / "node_modules" / f"pkg{i}" / "lib" / "index.js").write_text(f"{i}\n")
        (repo / "package-lock.json").write_text("{}\n")
        end = gg(repo, "call", "end", call_id, "--status", "succeeded")
        found = json.loads(gg(repo, "daemon", "status", "--json").stdout)
        ledger = {e["callId"]: e for e in json.loads(gg(repo, "ledger", "--json").stdout)}
        status = gg(repo, "status").stdout
    assert "1 file(s) changed" in end.stdout, end.stdout
    assert [p["path"] for p in ledger[call_id]["filePatches"]] == ["package-lock.json"]
    assert found["unwatched"] == []
    assert "node_modules/" in status, status


def test_a_directory_no_longer_ignored_is_watched_again(repo: Path) -> None:
    _seed(repo)
    (repo / ".gitignore").write_text((repo / ".gitignore").read_text() + "vendor/\n")
    (repo / "vendor" / "lib").mkdir(parents=True)
    (repo / "vendor" / "lib" / "dep.js").write_text("old\n")
    with _daemon(repo, []):
        (repo / ".gitignore").write_text("build/\n*.log\n.env\n")    # vendor/ is ours now
        begin = gg(repo, "call", "begin", "--tool", "Bash", "--json",
                   "--input", json.dumps({"command": "npm run vendor"}))
        call_id = json.loads(begin.stdout)["callId"]
        (repo / "vendor" / "lib" / "dep.js").write_text("patched by the agent\n")
        end = gg(repo, "call", "end", call_id, "--status", "succeeded")
        ledger = {e["callId"]: e for e in json.loads(gg(repo, "ledger", "--json").stdout)}
    assert "1 file(s) changed" in end.stdout, end.stdout
    assert [p["path"] for p in ledger[call_id]["filePatches"]] == ["vendor/lib/dep.js"]
