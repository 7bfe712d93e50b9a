"""Content git converts (eol rules, core.autocrlf, clean/smudge filters): a file only the
agent changed rolls back as the agent's, in the working-tree form `git checkout` writes,
with and without the daemon; a user edit there is still a conflict, never overwritten."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import click
import pytest

from tests.helpers.commands import gg, git
from tests.helpers.daemons import daemon_if
from tests.helpers.gitstate import capture

# A real file (click's core.py crashes `call end` until the patch buffers are held: issue 20)
CORE = Path(click.__file__).with_name("globals.py").read_bytes()
ROT13 = "tr A-Za-z N-ZA-Mn-za-m"                                   # a filter that round-trips


def _setup(repo: Path, how: str) -> None:
    if how == "eol":
        (repo / ".gitattributes").write_text("*.txt text eol=crlf\n")
    elif how == "autocrlf":
        git(repo, "config", "core.autocrlf", "true")
    else:
        (repo / ".gitattributes").write_text("*.txt filter=rot\n")
        git(repo, "config", "filter.rot.clean", ROT13)
        git(repo, "config", "filter.rot.smudge", ROT13)
    (repo / "core.txt").write_bytes(CORE)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "conversions")
    # The working tree in the form git writes it (CRLF, smudged), as after a clone.
    (repo / "core.txt").unlink()
    git(repo, "checkout", "--", "core.txt")


def _status(repo: Path) -> bytes:
    """`git status` as git sees the tree, without refreshing the user's index."""
    return subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True,
                          check=True, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"}).stdout


def _checkpoint(repo: Path) -> str:
    return str(json.loads(gg(repo, "checkpoint", "--json").stdout)["checkpointId"])


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
@pytest.mark.parametrize("how", ["eol", "autocrlf", "filter"])
def test_agent_only_changes_roll_back_in_the_working_tree_form(repo: Path, how: str,
                                                               daemon: bool) -> None:
    _setup(repo, how)
    before = (repo / "core.txt").read_bytes()
    gg(repo, "init", "--no-hooks", "--no-daemon")
    state = capture(repo)
    with daemon_if(repo, daemon):
        target = _checkpoint(repo)
        gg(repo, "run", "--", "sed", "-i", "s/def push_context/def push_kontext/", "core.txt")
        gg(repo, "run", "--", "sh", "-c", "printf 'made\\r\\nby the agent\\r\\n' > new.txt")
        agent = (repo / "core.txt").read_bytes()
        assert agent != before
        done = gg(repo, "rollback-files", "--to", target, "--json", check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        out = json.loads(done.stdout)
        assert out["conflicts"] == []
        assert out["restored"] == ["core.txt"] and out["deleted"] == ["new.txt"]
        assert (repo / "core.txt").read_bytes() == before
        assert not (repo / "new.txt").exists()
        assert _status(repo) == b""
        # The rollback itself is undone to the byte, the agent's working-tree form too.
        undo = gg(repo, "rollback-files", "--to", out["safetyCheckpointId"], "--json")
        assert json.loads(undo.stdout)["conflicts"] == []
        assert (repo / "core.txt").read_bytes() == agent
        assert (repo / "new.txt").read_bytes() == b"made\r\nby the agent\r\n"
    state.assert_unchanged(repo)


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
@pytest.mark.parametrize("how", ["eol", "filter"])
def test_a_user_edit_of_a_converted_file_stays_a_conflict(repo: Path, how: str,
                                                          daemon: bool) -> None:
    _setup(repo, how)
    gg(repo, "init", "--no-hooks", "--no-daemon")
    with daemon_if(repo, daemon):
        target = _checkpoint(repo)
        gg(repo, "run", "--", "sed", "-i", "s/def push_context/def push_kontext/", "core.txt")
        with (repo / "core.txt").open("ab") as f:
            f.write(b"# the user's line\r\n")
        mine = (repo / "core.txt").read_bytes()
        done = gg(repo, "rollback-files", "--to", target, "--json", check=False)
        assert done.returncode == 5, done.stdout + done.stderr
        assert [c["path"] for c in json.loads(done.stdout)["conflicts"]] == ["core.txt"]
        assert (repo / "core.txt").read_bytes() == mine


def test_git_hashes_the_converted_form(repo: Path) -> None:
    """The premise: git stores another blob than the bytes on disk for these set-ups."""
    _setup(repo, "eol")
    on_disk = subprocess.run(["git", "hash-object", "--no-filters", "core.txt"], cwd=repo,
                             capture_output=True, check=True).stdout
    assert on_disk != subprocess.run(["git", "hash-object", "core.txt"], cwd=repo,
                                     capture_output=True, check=True).stdout


@pytest.mark.parametrize("how", ["eol", "filter"])
def test_resolving_with_the_checkpoint_writes_the_checkout_form(repo: Path, how: str) -> None:
    _setup(repo, how)
    before = (repo / "core.txt").read_bytes()
    gg(repo, "init", "--no-hooks", "--no-daemon")
    target = _checkpoint(repo)
    gg(repo, "run", "--", "sed", "-i", "s/def push_context/def push_kontext/", "core.txt")
    with (repo / "core.txt").open("ab") as f:
        f.write(b"# the user's line\r\n")
    assert gg(repo, "rollback-files", "--to", target, check=False).returncode == 5
    gg(repo, "conflicts", "resolve", "core.txt", "--apply-agent")
    assert (repo / "core.txt").read_bytes() == before
    assert _status(repo) == b""


@pytest.mark.parametrize("how", ["eol", "autocrlf", "filter"])
def test_resolving_with_a_merge_takes_out_the_agents_change_and_keeps_the_users(
        repo: Path, how: str) -> None:
    """The three-way view is in working-tree form: the checkpoint's and the agent's versions
    are converted as `git checkout` writes them, so `conflicts show` prints two small diffs
    and --merge merges a CRLF or smudged file line by line instead of conflicting on every
    line."""
    _setup(repo, how)
    before = (repo / "core.txt").read_bytes()
    gg(repo, "init", "--no-hooks", "--no-daemon")
    target = _checkpoint(repo)
    gg(repo, "run", "--", "sed", "-i", "s/def push_context/def push_kontext/", "core.txt")
    assert b"push_kontext" in (repo / "core.txt").read_bytes()
    with (repo / "core.txt").open("ab") as f:
        f.write(b"# the user's line\r\n")
    assert gg(repo, "rollback-files", "--to", target, check=False).returncode == 5
    shown = gg(repo, "conflicts", "show", "core.txt").stdout    # two small diffs, not the file
    assert len(shown.splitlines()) < 40, shown
    assert "+def push_kontext" in shown and "+# the user's line" in shown, shown
    done = gg(repo, "conflicts", "resolve", "core.txt", "--merge", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (repo / "core.txt").read_bytes() == before + b"# the user's line\r\n"
