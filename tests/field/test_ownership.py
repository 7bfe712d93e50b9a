"""Ownership by content: a file holding exactly what an agent call last wrote is that
call's, whatever moved it in between (`git stash` + `stash pop`, a checkout and a restore),
with and without the daemon; bytes that differ from the agent's stay the user's."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

from tests.helpers.commands import gg, git
from tests.helpers.daemons import daemon_if, request
from tests.helpers.gitstate import capture

SOURCE = Path(click.__file__).with_name("globals.py").read_bytes()    # a real file


def _prepared(repo: Path) -> str:
    (repo / "src" / "globals.py").write_bytes(SOURCE)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a real file")
    gg(repo, "init", "--no-hooks", "--no-daemon")
    return str(json.loads(gg(repo, "checkpoint", "--json").stdout)["checkpointId"])


def _agent_edits(repo: Path) -> bytes:
    gg(repo, "run", "--", "sed", "-i", "s/def push_context/def push_kontext/",
       "src/globals.py")
    agent = (repo / "src" / "globals.py").read_bytes()
    assert agent != SOURCE
    return agent


def _move_away_and_back(repo: Path, how: str, daemon: bool) -> None:
    """The user moves the agent's change away and back; an agent call runs meanwhile
    (its checkpoints see the file without the change)."""
    if how == "stash":
        git(repo, "stash", "-q")
    else:
        kept = (repo / "src" / "globals.py").read_bytes()
        git(repo, "checkout", "--", "src/globals.py")
    if daemon:
        request(repo, "flush")
    gg(repo, "run", "--", "ls")
    if how == "stash":
        git(repo, "stash", "pop", "-q")
    else:
        (repo / "src" / "globals.py").write_bytes(kept)
    if daemon:
        request(repo, "flush")


def _owner(repo: Path, path: str) -> str:
    dirty = json.loads(gg(repo, "status", "--json").stdout)["dirty"]
    return str(next(d["owner"] for d in dirty if d["path"] == path))


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
@pytest.mark.parametrize("how", ["stash", "checkout"])
def test_the_agents_bytes_moved_away_and_back_stay_the_agents(repo: Path, how: str,
                                                              daemon: bool) -> None:
    target = _prepared(repo)
    with daemon_if(repo, daemon):
        agent = _agent_edits(repo)
        _move_away_and_back(repo, how, daemon)
        assert (repo / "src" / "globals.py").read_bytes() == agent
        state = capture(repo)
        assert _owner(repo, "src/globals.py").startswith("call_")
        done = gg(repo, "rollback-files", "--to", target, "--json", check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["restored"] == ["src/globals.py"]
        assert (repo / "src" / "globals.py").read_bytes() == SOURCE
    state.assert_unchanged(repo)


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
def test_bytes_other_than_the_agents_after_a_stash_stay_the_users(repo: Path,
                                                                  daemon: bool) -> None:
    target = _prepared(repo)
    with daemon_if(repo, daemon):
        _agent_edits(repo)
        git(repo, "stash", "-q")
        git(repo, "stash", "pop", "-q")
        with (repo / "src" / "globals.py").open("ab") as f:
            f.write(b"# the user's line\n")
        mine = (repo / "src" / "globals.py").read_bytes()
        if daemon:
            request(repo, "flush")
        assert _owner(repo, "src/globals.py") == "user"
        done = gg(repo, "rollback-files", "--to", target, "--json", check=False)
        assert done.returncode == 5, done.stdout + done.stderr
        assert [c["path"] for c in json.loads(done.stdout)["conflicts"]] == ["src/globals.py"]
        assert (repo / "src" / "globals.py").read_bytes() == mine
