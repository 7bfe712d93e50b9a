"""Moves are one change of two paths (issue 31, item 4): a file an agent call moved goes
back as a move, a destination holding user lines is a conflict and never deleted, and
`--merge` writes the merged file back to the source. Real repositories, real `mv` and
`git mv` processes, with the daemon's attribution and with the checkpoint chain alone."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gitguard.api import Guard
from gitguard.rollback import conflicts
from gitguard.rollback.rollback_files import rollback_files
from tests.helpers.commands import gg, git
from tests.helpers.daemons import daemon_if
from tests.helpers.gitstate import capture
from tests.helpers.rollback import tree_state

BASE = b"".join(b"line %d\n" % i for i in range(1, 10))
MODES = pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])


def _committed(repo: Path, name: str = "doc.txt", data: bytes = BASE) -> None:
    (repo / name).write_bytes(data)
    git(repo, "add", name)
    git(repo, "commit", "-qm", f"add {name}")


def _start(repo: Path) -> str:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    return str(json.loads(gg(repo, "checkpoint", "--json").stdout)["checkpointId"])


def _shell(guard: Guard, repo: Path, command: str) -> None:
    """An agent's Bash call that runs `command` for real (the hook path: ledgered around it)."""
    with guard.tool_call("Bash", {"command": command}):
        subprocess.run(["sh", "-c", command], cwd=repo, check=True)


def _undo_is_exact(repo: Path, safety: str, before: dict[str, object]) -> None:
    gg(repo, "rollback-files", "--to", safety)
    assert tree_state(repo) == before, "undoing the rollback brings the tree back byte for byte"


@MODES
def test_a_moved_committed_file_goes_back_as_a_move(repo: Path,
                                                     daemon: bool) -> None:
    _committed(repo)
    first = _start(repo)
    with daemon_if(repo, daemon):
        guard = Guard.open(repo)
        _shell(guard, repo, "mv doc.txt moved.txt")
        before = tree_state(repo)
        planned = gg(repo, "rollback-files", "--to", first, "--dry-run").stdout
        assert "moved   doc.txt -> moved.txt by call_1: would move back" in planned, planned
        done = json.loads(gg(repo, "rollback-files", "--to", first, "--json").stdout)
        assert done["moves"] == [{"from": "doc.txt", "to": "moved.txt", "callId": "call_1",
                                  "outcome": "reverted"}]
        assert done["restored"] == ["doc.txt"] and done["deleted"] == ["moved.txt"]
        assert (repo / "doc.txt").read_bytes() == BASE and not (repo / "moved.txt").exists()
        _undo_is_exact(repo, done["safetyCheckpointId"], before)


@MODES
def test_a_moved_agent_created_file_is_gone_from_both_paths(repo: Path, daemon: bool) -> None:
    first = _start(repo)
    with daemon_if(repo, daemon):
        guard = Guard.open(repo)
        with guard.tool_call("Write", {"file_path": "new.txt", "content": "agent's\n"},
                             writes=["new.txt"]):
            (repo / "new.txt").write_bytes(b"agent's\n")
        _shell(guard, repo, "mv new.txt moved.txt")
        done = rollback_files(guard, first)
        assert not done.conflicts and done.deleted == ["moved.txt"]
        assert not (repo / "new.txt").exists() and not (repo / "moved.txt").exists()


@MODES
def test_an_agent_created_file_the_user_edited_before_the_move_is_a_conflict(
        repo: Path, daemon: bool) -> None:
    """The issue's case: the source was agent-created, absent at the checkpoint and absent
    now, so it was "unchanged", and the destination, with the user's lines, was deleted."""
    first = _start(repo)
    with daemon_if(repo, daemon):
        guard = Guard.open(repo)
        with guard.tool_call("Write", {"file_path": "new.txt", "content": "agent 1\n"},
                             writes=["new.txt"]):
            (repo / "new.txt").write_bytes(b"agent 1\nagent 2\n")
        (repo / "new.txt").write_bytes(b"agent 1\nthe user's line\nagent 2\n")
        _shell(guard, repo, "mv new.txt moved.txt")
        before = tree_state(repo)
        done = rollback_files(guard, first)
        assert [(c.path, c.moved_to) for c in done.conflicts] == [("new.txt", "moved.txt")]
        assert "the user changed it after call_1 wrote it" in (done.conflicts[0].reason or "")
        assert tree_state(repo) == before, "a conflict leaves both paths as they are"
        assert done.to_json()["moves"][0]["outcome"] == "conflict"
        shown = gg(repo, "conflicts", "show", "moved.txt").stdout
        assert "moved: the file is moved.txt now" in shown and "+the user's line" in shown
        # The agent made the whole file, so the user's line touches its hunk: a marked
        # region whose "ours" side is the user's file, written back to the source.
        resolved = conflicts.resolve(guard, "new.txt", "manual_merge")
        assert resolved.markers == 1
        merged = (repo / "new.txt").read_bytes()
        assert merged.startswith(b"<<<<<<< current (yours)\nagent 1\nthe user's line\n"
                                 b"agent 2\n||||||| agent call_1\n")
        assert not (repo / "moved.txt").exists()


@MODES
def test_a_user_edit_before_the_move_comes_back_at_the_source(repo: Path,
                                                              daemon: bool) -> None:
    _committed(repo)
    first = _start(repo)
    mine = BASE.replace(b"line 4\n", b"line 4 by the user\n")
    with daemon_if(repo, daemon):
        guard = Guard.open(repo)
        (repo / "doc.txt").write_bytes(mine)
        _shell(guard, repo, "mv doc.txt moved.txt")
        done = rollback_files(guard, first)
        assert not done.conflicts and done.restored == ["doc.txt"]
        assert (repo / "doc.txt").read_bytes() == mine, "the file as the agent found it"
        assert not (repo / "moved.txt").exists()


@MODES
def test_a_user_edit_at_the_destination_is_merged_back_into_the_source(
        repo: Path, daemon: bool) -> None:
    """With a committed source, the source became a conflict `--merge` refused (absent)
    and the destination a conflict of its own: now one conflict, merged at the source."""
    _committed(repo)
    first = _start(repo)
    git_state = capture(repo)
    with daemon_if(repo, daemon):
        guard = Guard.open(repo)
        _shell(guard, repo, "mv doc.txt moved.txt")
        user = BASE.replace(b"line 8\n", b"line 8 by the user\n")
        (repo / "moved.txt").write_bytes(user)
        before = tree_state(repo)
        proc = gg(repo, "rollback-files", "--to", first, "--json", check=False)
        assert proc.returncode == 5
        done = json.loads(proc.stdout)
        assert [(c["path"], c["movedTo"]) for c in done["conflicts"]] == [("doc.txt",
                                                                           "moved.txt")]
        assert done["moves"][0]["outcome"] == "conflict"
        assert tree_state(repo) == before, "never deleted: it holds the user's lines"
        merged = json.loads(gg(repo, "conflicts", "resolve", "moved.txt", "--merge",
                               "--json").stdout)
        assert merged["markers"] == 0
        assert (repo / "doc.txt").read_bytes() == user and not (repo / "moved.txt").exists()
        _undo_is_exact(repo, merged["safetyCheckpointId"], before)
    git_state.assert_unchanged(repo)


def test_an_agent_edit_then_a_user_edit_then_a_move_merges_out_only_the_agents(
        repo: Path) -> None:
    _committed(repo)
    first = _start(repo)
    guard = Guard.open(repo)
    agent = BASE.replace(b"line 2\n", b"line 2 by the agent\n")
    with guard.tool_call("Edit", {"file_path": "doc.txt"}, writes=["doc.txt"]):
        (repo / "doc.txt").write_bytes(agent)
    (repo / "doc.txt").write_bytes(agent.replace(b"line 8\n", b"line 8 by the user\n"))
    _shell(guard, repo, "mv doc.txt sub.txt")
    done = rollback_files(guard, first)
    assert [(c.path, c.moved_to) for c in done.conflicts] == [("doc.txt", "sub.txt")]
    conflicts.resolve(guard, "doc.txt", "manual_merge")
    assert (repo / "doc.txt").read_bytes() == BASE.replace(b"line 8\n", b"line 8 by the user\n")
    assert not (repo / "sub.txt").exists()


@MODES
def test_a_file_moved_twice_keeps_the_users_lines_carried_through_the_middle(
        repo: Path, daemon: bool) -> None:
    """The session fuzz's seeds 128 and 155: `mv a b`, the user edits b, `mv b c`. Judged
    from the first move, b was taken by it and c, alone, looked agent-made: deleted with
    the user's line. The newest move is judged first and keeps c."""
    _committed(repo)
    first = _start(repo)
    with daemon_if(repo, daemon):
        guard = Guard.open(repo)
        _shell(guard, repo, "mv doc.txt middle.txt")
        (repo / "middle.txt").write_bytes(BASE + b"the user's line\n")
        guard.checkpoint()
        _shell(guard, repo, "mv middle.txt last.txt")
        before = tree_state(repo)
        done = json.loads(gg(repo, "rollback-files", "--to", first, "--json",
                             check=False).stdout)
        assert (repo / "last.txt").read_bytes() == BASE + b"the user's line\n"
        assert (repo / "doc.txt").read_bytes() == BASE, "the first move's source is back"
        assert "last.txt" not in done["deleted"]
        assert [c["path"] for c in done["conflicts"]] == ["middle.txt"]
        # the conflict stays pending, so the undo exits 5 too; it brings every byte back
        gg(repo, "rollback-files", "--to", done["safetyCheckpointId"], check=False)
        assert tree_state(repo) == before


@MODES
def test_a_file_moved_twice_by_the_agent_alone_goes_back_whole(repo: Path,
                                                                daemon: bool) -> None:
    _committed(repo)
    first = _start(repo)
    with daemon_if(repo, daemon):
        guard = Guard.open(repo)
        _shell(guard, repo, "mv doc.txt middle.txt")
        _shell(guard, repo, "mv middle.txt last.txt")
        done = rollback_files(guard, first)
        assert not done.conflicts
        assert (repo / "doc.txt").read_bytes() == BASE
        assert not (repo / "middle.txt").exists() and not (repo / "last.txt").exists()


@MODES
def test_git_mv_into_a_directory_goes_back_as_a_move(repo: Path, daemon: bool) -> None:
    _committed(repo)
    first = _start(repo)
    (repo / "docs").mkdir()
    (repo / "docs" / "keep.txt").write_bytes(b"the user's\n")
    with daemon_if(repo, daemon):
        guard = Guard.open(repo)
        _shell(guard, repo, "git mv doc.txt docs/")
        before = tree_state(repo)
        done = json.loads(gg(repo, "rollback-files", "--to", first, "--json").stdout)
        assert done["moves"] == [{"from": "doc.txt", "to": "docs/doc.txt", "callId": "call_1",
                                  "outcome": "reverted"}]
        assert (repo / "doc.txt").read_bytes() == BASE
        assert not (repo / "docs" / "doc.txt").exists()
        assert (repo / "docs" / "keep.txt").read_bytes() == b"the user's\n"
        _undo_is_exact(repo, done["safetyCheckpointId"], before)
    git(repo, "reset", "-q")        # git mv staged the move: the user's index, not ours


def test_a_rename_no_words_name_is_found_by_its_bytes(repo: Path) -> None:
    """A script's os.rename, seen only in the call's patches: the deleted file's bytes are
    the new file's, and no other deleted file had them."""
    _committed(repo)
    first = _start(repo)
    guard = Guard.open(repo)
    script = "import os; os.rename('doc.txt', 'renamed.txt')"
    with guard.tool_call("Bash", {"command": f"python3 -c \"{script}\""}):
        subprocess.run(["python3", "-c", script], cwd=repo, check=True)
    (repo / "renamed.txt").write_bytes(BASE + b"the user's tail\n")
    done = rollback_files(guard, first)
    assert [(c.path, c.moved_to) for c in done.conflicts] == [("doc.txt", "renamed.txt")]
    conflicts.resolve(guard, "renamed.txt", "manual_merge")
    assert (repo / "doc.txt").read_bytes() == BASE + b"the user's tail\n"
    assert not (repo / "renamed.txt").exists()


def test_a_move_over_a_user_file_puts_the_users_file_back(repo: Path) -> None:
    _committed(repo)
    _committed(repo, "other.txt", b"the user's other file\n")
    first = _start(repo)
    guard = Guard.open(repo)
    _shell(guard, repo, "mv -f doc.txt other.txt")
    done = rollback_files(guard, first)
    assert not done.conflicts and done.restored == ["doc.txt", "other.txt"]
    assert (repo / "other.txt").read_bytes() == b"the user's other file\n"
    assert (repo / "doc.txt").read_bytes() == BASE


def test_take_checkpoint_on_a_moved_conflict_restores_the_source(repo: Path) -> None:
    _committed(repo)
    first = _start(repo)
    guard = Guard.open(repo)
    _shell(guard, repo, "mv doc.txt moved.txt")
    (repo / "moved.txt").write_bytes(BASE + b"mine\n")
    assert len(rollback_files(guard, first).conflicts) == 1
    done = conflicts.resolve(guard, "doc.txt", "apply_agent")
    assert (repo / "doc.txt").read_bytes() == BASE and not (repo / "moved.txt").exists()
    assert done.applied is not None
    gg(repo, "rollback-files", "--to", done.applied.safety.checkpoint_id)
    assert (repo / "moved.txt").read_bytes() == BASE + b"mine\n"
    assert not (repo / "doc.txt").exists()


def test_merge_refuses_when_the_source_is_there_again(repo: Path) -> None:
    _committed(repo)
    first = _start(repo)
    guard = Guard.open(repo)
    _shell(guard, repo, "mv doc.txt moved.txt")
    (repo / "moved.txt").write_bytes(BASE + b"mine\n")
    assert len(rollback_files(guard, first).conflicts) == 1
    (repo / "doc.txt").write_bytes(b"a new file of the user's\n")
    proc = gg(repo, "conflicts", "resolve", "doc.txt", "--merge", check=False)
    assert proc.returncode == 1 and "doc.txt is there again" in proc.stderr
    assert (repo / "doc.txt").read_bytes() == b"a new file of the user's\n"
    assert (repo / "moved.txt").read_bytes() == BASE + b"mine\n"


@MODES
def test_a_moved_directory_goes_back_file_by_file(repo: Path, daemon: bool) -> None:
    """`mv pkg lib` names two directories: the files below them are the call's, and each
    moved file is found by its bytes; the user's edit in the moved tree is a conflict."""
    (repo / "pkg").mkdir()
    (repo / "pkg" / "a.py").write_bytes(b"a = 1\n")
    (repo / "pkg" / "b.py").write_bytes(b"b = 2\n")
    git(repo, "add", "pkg")
    git(repo, "commit", "-qm", "pkg")
    first = _start(repo)
    with daemon_if(repo, daemon):
        guard = Guard.open(repo)
        _shell(guard, repo, "mv pkg lib")
        (repo / "lib" / "b.py").write_bytes(b"b = 2\nthe user's = 3\n")
        done = rollback_files(guard, first)
        assert {(m.source, m.dest) for m in done.plan.moves} == {("pkg/a.py", "lib/a.py"),
                                                                 ("pkg/b.py", "lib/b.py")}
        assert [(c.path, c.moved_to) for c in done.conflicts] == [("pkg/b.py", "lib/b.py")]
        assert (repo / "pkg" / "a.py").read_bytes() == b"a = 1\n"
        assert not (repo / "lib" / "a.py").exists()
        conflicts.resolve(guard, "lib/b.py", "manual_merge")
        assert (repo / "pkg" / "b.py").read_bytes() == b"b = 2\nthe user's = 3\n"
        assert not (repo / "lib").exists()
