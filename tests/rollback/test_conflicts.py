"""Conflicts: the three-way view and each resolution, merges of text in any encoding, binary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitguard.api import Guard
from gitguard.errors import GitguardError, MergeRefused
from gitguard.git.merge import merge3
from gitguard.rollback import conflicts, merge_proof
from gitguard.rollback.rollback_files import rollback_files
from tests.helpers.commands import gg
from tests.helpers.gitstate import GitState
from tests.helpers.rollback import tree_state

BASE = b"".join(b"line %d\n" % i for i in range(1, 10))


def conflicted(repo: Path, agent: bytes, user: bytes, name: str = "doc.txt",
               base: bytes = BASE) -> tuple[Guard, str]:
    """A file at `base` in a checkpoint, changed by an agent call, then by the user."""
    (repo / name).write_bytes(base)
    guard = Guard.open(repo)
    ckpt = guard.checkpoint("manual").checkpoint_id
    with guard.tool_call("Edit", {"file_path": name}, writes=[name]):
        (repo / name).write_bytes(agent)
    (repo / name).write_bytes(user)
    result = rollback_files(guard, ckpt)
    assert [c.path for c in result.conflicts] == [name]
    assert (repo / name).read_bytes() == user, "a conflict leaves the file untouched"
    return guard, ckpt


def test_merge_drops_the_agents_hunk_and_keeps_the_users(repo: Path,
                                                         state_of: GitState) -> None:
    agent = BASE.replace(b"line 2\n", b"line 2 by the agent\n")
    user = agent.replace(b"line 8\n", b"line 8 by the user\n")
    conflicted(repo, agent, user)
    shown = gg(repo, "conflicts", "show", "doc.txt").stdout
    assert "=== base: before call_1" not in shown, "diffs by default, not whole files"
    assert "=== base: before call_1" in gg(repo, "conflicts", "show", "doc.txt",
                                           "--full").stdout
    assert "-line 2\n+line 2 by the agent" in shown
    assert "-line 8\n+line 8 by the user" in shown
    done = json.loads(gg(repo, "conflicts", "resolve", "doc.txt", "--merge", "--json").stdout)
    assert done["resolution"] == "manual_merge" and done["markers"] == 0
    assert (repo / "doc.txt").read_bytes() == BASE.replace(b"line 8\n", b"line 8 by the user\n")
    assert json.loads(gg(repo, "conflicts", "--json").stdout)[0]["resolution"] == "manual_merge"
    # the merge itself can be rolled back: the user's pre-merge file comes back
    gg(repo, "rollback-files", "--to", done["safetyCheckpointId"])
    assert (repo / "doc.txt").read_bytes() == user
    state_of.assert_unchanged(repo)


def test_overlapping_hunks_get_diff3_markers_with_the_agents_version(repo: Path) -> None:
    agent = BASE.replace(b"line 5\n", b"line 5 by the agent\n")
    user = BASE.replace(b"line 5\n", b"line 5 rewritten by the user\n")
    conflicted(repo, agent, user)
    proc = gg(repo, "conflicts", "resolve", "doc.txt", "--merge", check=False)
    assert proc.returncode == 5, proc.stderr
    merged = (repo / "doc.txt").read_bytes()
    assert (b"<<<<<<< current (yours)\nline 5 rewritten by the user\n"
            b"||||||| agent call_1\nline 5 by the agent\n=======\nline 5\n"
            b">>>>>>> before call_1\n") in merged
    assert merged.startswith(b"line 1\n") and merged.endswith(b"line 9\n")


def test_latin1_text_merges_byte_exact(repo: Path) -> None:
    base = "caf\xe9\nna\xefve\nse\xf1or\nd\xe9j\xe0\n".encode("latin-1")
    agent = base.replace("na\xefve".encode("latin-1"), "NA\xcfVE".encode("latin-1"))
    user = agent.replace("d\xe9j\xe0".encode("latin-1"), "d\xe9j\xe0 vu".encode("latin-1"))
    guard, _ = conflicted(repo, agent, user, name="latin1.txt", base=base)
    done = conflicts.resolve(guard, "latin1.txt", "manual_merge")
    assert done.markers == 0
    assert (repo / "latin1.txt").read_bytes() == base.replace(
        "d\xe9j\xe0".encode("latin-1"), "d\xe9j\xe0 vu".encode("latin-1"))


def test_binary_files_refuse_to_merge_with_a_hint(repo: Path) -> None:
    base = b"\x00\x01\x02binary base"
    conflicted(repo, base + b" agent", base + b" agent user", name="blob.bin", base=base)
    shown = gg(repo, "conflicts", "show", "blob.bin").stdout
    assert "binary" in shown and "--keep-user or --take-checkpoint" in shown
    proc = gg(repo, "conflicts", "resolve", "blob.bin", "--merge", check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: blob.bin is binary: it cannot be merged")
    assert "Hint: keep yours with --keep-user" in proc.stderr
    assert (repo / "blob.bin").read_bytes() == base + b" agent user"
    assert json.loads(gg(repo, "conflicts", "--json").stdout)[0]["resolution"] == "pending"


def test_keep_user_writes_nothing_and_apply_agent_writes_the_checkpoint(repo: Path) -> None:
    agent = BASE + b"agent\n"
    guard, _ = conflicted(repo, agent, agent + b"user\n")
    before = tree_state(repo)
    proc = gg(repo, "rollback-files", "--to", guard.checkpoints()[0].checkpoint_id,
              check=False)
    assert proc.returncode == 5, "still pending"
    kept = conflicts.resolve(guard, "doc.txt", "keep_user")
    assert kept.applied is None and tree_state(repo) == before
    with pytest.raises(GitguardError, match="already resolved"):
        conflicts.resolve(guard, "doc.txt", "apply_agent")

    other_guard, _ = conflicted(repo, b"agent\n", b"agent\nuser\n", name="other.txt",
                                base=b"x\n")
    done = conflicts.resolve(other_guard, "other.txt", "apply_agent")
    assert (repo / "other.txt").read_bytes() == b"x\n"
    assert done.applied is not None
    safety = done.applied.safety.checkpoint_id
    rollback_files(other_guard, safety)
    assert (repo / "other.txt").read_bytes() == b"agent\nuser\n", "the user's version is kept"


def test_merge3_is_exact_for_any_bytes(tmp_path: Path) -> None:
    ancestor = b"\xff\xfe one\r\ntwo\r\nthree\r\n"
    ours = ancestor.replace(b"one", b"ONE")
    theirs = ancestor.replace(b"three", b"THREE")
    merged = merge3(ours, ancestor, theirs, labels=("a", "b", "c"), git_dir=tmp_path,
                    scratch=tmp_path / "scratch")
    assert merged.conflicts == 0 and merged.data == b"\xff\xfe ONE\r\ntwo\r\nTHREE\r\n"
    assert list((tmp_path / "scratch").iterdir()) == [], "temporary files are removed"
    with pytest.raises(GitguardError, match="binary"):
        merge3(b"a\0", b"a", b"b", labels=("x", "y", "z"), git_dir=tmp_path, scratch=tmp_path)


def test_unknown_conflict_path(repo: Path) -> None:
    gg(repo, "init")
    proc = gg(repo, "conflicts", "show", "nope.txt", check=False)
    assert proc.returncode == 1 and proc.stderr.startswith("Error: no conflict for nope.txt")


def test_a_user_edit_before_the_agent_is_the_base_not_the_agents_hunk(repo: Path) -> None:
    """Issue 29 item 5: the user edits, then the agent, then the user again; the view names
    the first edit the user's and --merge keeps both of the user's."""
    (repo / "doc.txt").write_bytes(BASE)
    guard = Guard.open(repo)
    ckpt = guard.checkpoint("manual").checkpoint_id
    before = BASE.replace(b"line 2\n", b"line 2 by the user first\n")
    (repo / "doc.txt").write_bytes(before)
    with guard.tool_call("Edit", {"file_path": "doc.txt"}, writes=["doc.txt"]):
        (repo / "doc.txt").write_bytes(before.replace(b"line 5\n", b"line 5 by the agent\n"))
    user = (repo / "doc.txt").read_bytes().replace(b"line 8\n", b"line 8 by the user\n")
    (repo / "doc.txt").write_bytes(user)
    assert [c.path for c in rollback_files(guard, ckpt).conflicts] == ["doc.txt"]
    shown = gg(repo, "conflicts", "show", "doc.txt").stdout
    first, agent = shown.split("=== 1. your change\n")[1].split("=== 2. the agent's change")
    agent = agent.split("\n=== ")[0]
    assert "+line 2 by the user first" in first
    assert "+line 2 by the user first" not in agent and "-line 2\n" not in agent
    assert "+line 5 by the agent" in agent
    gg(repo, "conflicts", "resolve", "doc.txt", "--merge")
    assert (repo / "doc.txt").read_bytes() == before.replace(b"line 8\n",
                                                             b"line 8 by the user\n")


def test_a_write_over_a_user_edit_rolls_back_to_the_users_version(repo: Path) -> None:
    (repo / "doc.txt").write_bytes(BASE)
    guard = Guard.open(repo)
    ckpt = guard.checkpoint("manual").checkpoint_id
    (repo / "doc.txt").write_bytes(BASE + b"the user's line\n")
    with guard.tool_call("Write", {"file_path": "doc.txt"}, writes=["doc.txt"]):
        (repo / "doc.txt").write_bytes(b"the agent's whole new file\n")
    result = rollback_files(guard, ckpt)
    assert not result.conflicts and result.restored == ["doc.txt"]
    assert (repo / "doc.txt").read_bytes() == BASE + b"the user's line\n"


def test_a_change_no_single_call_made_is_kept_by_the_merge(repo: Path) -> None:
    """Two calls open at once both may have changed it (ambiguous): --merge keeps it and
    takes out only the change exactly one call made."""
    (repo / "doc.txt").write_bytes(BASE)
    guard = Guard.open(repo)
    ckpt = guard.checkpoint("manual").checkpoint_id
    one = guard.begin_call("Bash", {"command": "one"})
    two = guard.begin_call("Bash", {"command": "two"})
    (repo / "doc.txt").write_bytes(BASE.replace(b"line 2\n", b"line 2 by someone\n"))
    guard.end_call(one.call_id, "succeeded")
    guard.end_call(two.call_id, "succeeded")
    with guard.tool_call("Edit", {"file_path": "doc.txt"}, writes=["doc.txt"]):
        (repo / "doc.txt").write_bytes(
            (repo / "doc.txt").read_bytes().replace(b"line 5\n", b"line 5 by the agent\n"))
    user = (repo / "doc.txt").read_bytes().replace(b"line 8\n", b"line 8 by the user\n")
    (repo / "doc.txt").write_bytes(user)
    assert [c.path for c in rollback_files(guard, ckpt).conflicts] == ["doc.txt"]
    assert "ambiguous origin" in gg(repo, "conflicts", "show", "doc.txt").stdout
    done = conflicts.resolve(guard, "doc.txt", "manual_merge")
    assert done.markers == 0
    assert (repo / "doc.txt").read_bytes() == user.replace(b"line 5 by the agent\n",
                                                           b"line 5\n")


def test_a_merge_whose_regions_would_nest_refuses_and_writes_nothing(repo: Path) -> None:
    (repo / "doc.txt").write_bytes(BASE)
    guard = Guard.open(repo)
    ckpt = guard.checkpoint("manual").checkpoint_id

    def edit(old: bytes, new: bytes) -> None:
        (repo / "doc.txt").write_bytes((repo / "doc.txt").read_bytes().replace(old, new))

    with guard.tool_call("Edit", {"file_path": "doc.txt"}, writes=["doc.txt"]):
        edit(b"line 2\n", b"line 2 by the agent\n")
    edit(b"line 5\n", b"line 5 by the user\n")
    with guard.tool_call("Edit", {"file_path": "doc.txt"}, writes=["doc.txt"]):
        edit(b"line 8\n", b"line 8 by the agent\n")
    edit(b"line 8 by the agent\n", b"line 8 by the agent and the user\n")
    user = (repo / "doc.txt").read_bytes()
    rollback_files(guard, ckpt)
    proc = gg(repo, "conflicts", "resolve", "doc.txt", "--merge", check=False)
    assert proc.returncode == 5
    assert proc.stderr.startswith("Error: your edits overlap call_2's"), proc.stderr
    assert (repo / "doc.txt").read_bytes() == user, "a refused merge writes nothing"
    assert conflicts.find(guard, "doc.txt").resolution == "pending"


def test_the_proof_refuses_a_result_that_drops_or_brings_back_a_user_line() -> None:
    agent = BASE.replace(b"line 2\n", b"line 2 by the agent\n")
    user = agent.replace(b"line 8\n", b"line 8 by the user\n").replace(b"line 5\n", b"")
    labels = ("yours", "agent", "before")
    right = BASE.replace(b"line 8\n", b"line 8 by the user\n").replace(b"line 5\n", b"")
    merge_proof.prove(agent, user, BASE, right, labels, 0)
    wrong = {
        "drops a user line": right.replace(b"line 8 by the user\n", b"line 8\n"),
        "brings back a line the user deleted": right.replace(b"line 4\n", b"line 4\nline 5\n"),
        "keeps the agent's clean hunk": user,
        "changes an untouched line": right.replace(b"line 1\n", b"line one\n"),
        "truncates the file": right[:-7],
    }
    for why, result in wrong.items():
        with pytest.raises(MergeRefused):
            merge_proof.prove(agent, user, BASE, result, labels, 0)
            pytest.fail(why)
    with pytest.raises(MergeRefused, match="reported 1 conflict region"):
        merge_proof.prove(agent, user, BASE, right, labels, 1)
