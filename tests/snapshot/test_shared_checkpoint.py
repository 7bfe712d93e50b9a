"""One checkpoint as call N's post and call N+1's pre (gitguard.snapshot.shared_checkpoint): when it
is shared, when it is not, and that rollback, resume, restore-session, explain, verify and gc
all take the shared checkpoint as they take a fresh one."""

from __future__ import annotations

import json
from pathlib import Path

from gitguard.api import Guard
from gitguard.rollback.rollback_files import rollback_files
from tests.helpers.commands import gg, git
from tests.helpers.gitstate import GitState
from tests.helpers.rollback import tree_state

GC_ENV = {"GITGUARD_GC_KEEP_DAYS": "0", "GITGUARD_GC_KEEP_LAST": "1",
          "GITGUARD_GC_KEEP_FIRST": "0"}


def edit(guard: Guard, path: str, text: str) -> str:
    entry = guard.begin_call("Edit", {"file_path": path, "text": text}, writes=[path])
    (guard.ws.root / path).write_text(text)
    return guard.end_call(entry.call_id, "succeeded").call_id


def entries(repo: Path) -> dict[str, object]:
    return {e.call_id: e for e in Guard.open(repo).ledger()}


def test_back_to_back_calls_share_and_anything_in_between_does_not(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    edit(guard, "src/a.txt", "a1\n")
    edit(guard, "src/b.txt", "b1\n")                       # shares call_1's post
    (repo / "notes.txt").write_text("the user's\n")        # a user change in between
    edit(guard, "src/a.txt", "a2\n")                       # call_3: fresh pre
    guard.checkpoint("manual", "saved")                    # a checkpoint in between
    edit(guard, "src/b.txt", "b2\n")                       # call_4: fresh pre
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the user's commit")          # HEAD moved in between
    edit(guard, "src/a.txt", "a3\n")                       # call_5: fresh pre
    failed = guard.begin_call("Bash", {"command": "false"})
    guard.end_call(failed.call_id, "failed", "exit 1")      # call_6 shares call_5's post
    guard.start_session("s2")
    edit(guard, "src/b.txt", "b3\n")                       # another session: fresh pre
    calls = entries(repo)
    pre = {c: e.pre_checkpoint_id for c, e in calls.items()}         # type: ignore[attr-defined]
    post = {c: e.post_checkpoint_id for c, e in calls.items()}       # type: ignore[attr-defined]
    assert pre["call_2"] == post["call_1"]
    assert pre["call_6"] == post["call_5"]
    for fresh in ("call_3", "call_4", "call_5", "call_7"):
        assert pre[fresh] not in post.values(), fresh
    kinds = [(r.checkpoint_id, r.kind) for r in guard.checkpoints()]
    assert len(kinds) == len(set(kinds)) == 2 * len(calls) - 2 + 1
    # Each call's patch is its own change only, as with a fresh pre checkpoint.
    assert [p.path for p in calls["call_2"].file_patches] == ["src/b.txt"]  # type: ignore[attr-defined]
    assert [p.path for p in calls["call_3"].file_patches] == ["src/a.txt"]  # type: ignore[attr-defined]
    gg(repo, "verify")


def test_a_post_checkpoint_no_finished_record_names_is_not_shared(repo: Path) -> None:
    """A kill between call N's post checkpoint and its finished record leaves a post
    checkpoint nobody names: the next call writes its own pre."""
    guard = Guard.open(repo)
    guard.start_session("s1")
    edit(guard, "src/a.txt", "a1\n")
    second = guard.begin_call("Edit", {"file_path": "src/b.txt"}, writes=["src/b.txt"])
    (repo / "src" / "b.txt").write_text("b1\n")
    # What the kill leaves: call_2's post checkpoint written, its finished record not.
    from gitguard.ledger import journal
    from gitguard.snapshot import checkpoints
    with guard.store.writing():
        state = journal.read(guard.store)
        orphan = checkpoints.write(guard.store, guard.snap, checkpoints.read_index(guard.store),
                                   session_id="s1", kind="post", tree=guard.snap.write_tree(),
                                   ledger_seq=state.last_seq, step_id=second.step_id,
                                   call_id=second.call_id)
    third = guard.begin_call("Edit", {"file_path": "src/c.txt"}, writes=["src/c.txt"])
    assert third.pre_checkpoint_id not in (orphan.checkpoint_id, None)
    guard.end_call(third.call_id, "succeeded")
    gg(repo, "verify")


def shared_session(repo: Path) -> tuple[Guard, str, str]:
    """call_1 edits a.txt and b.txt, call_2 (sharing call_1's post) edits b.txt again and
    adds c.txt. Returns the guard, call_1's pre and the shared checkpoint."""
    guard = Guard.open(repo)
    guard.start_session("s1")
    first = guard.begin_call("Write", {"n": 1}, writes=["src/a.txt", "src/b.txt"])
    (repo / "src" / "a.txt").write_text("a1\n")
    (repo / "src" / "b.txt").write_text("b1\n")
    ended = guard.end_call(first.call_id, "succeeded")
    second = guard.begin_call("Write", {"n": 2}, writes=["src/b.txt", "src/c.txt"])
    assert second.pre_checkpoint_id == ended.post_checkpoint_id
    (repo / "src" / "b.txt").write_text("b2\n")
    (repo / "src" / "c.txt").write_text("c2\n")
    guard.end_call(second.call_id, "succeeded")
    assert first.pre_checkpoint_id and ended.post_checkpoint_id
    return guard, first.pre_checkpoint_id, ended.post_checkpoint_id


def test_rollback_to_the_shared_checkpoint_undoes_only_the_later_call(
        repo: Path, state_of: GitState) -> None:
    guard, _, shared = shared_session(repo)
    result = rollback_files(guard, shared)
    assert not result.conflicts
    after = tree_state(repo)
    assert after["src/a.txt"][1] == b"a1\n" and after["src/b.txt"][1] == b"b1\n"
    assert "src/c.txt" not in after
    state_of.assert_unchanged(repo)
    gg(repo, "verify")


def test_rollback_to_before_both_calls_crosses_the_shared_checkpoint(repo: Path) -> None:
    guard, first_pre, _ = shared_session(repo)
    (repo / "notes.txt").write_text("the user's own\n")
    result = rollback_files(guard, first_pre)
    assert not result.conflicts
    after = tree_state(repo)
    assert not {"src/a.txt", "src/b.txt", "src/c.txt"} & set(after)
    assert after["notes.txt"][1] == b"the user's own\n"


def test_resume_from_the_shared_checkpoint(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    edit(guard, "src/a.txt", "a1\n")
    crashed = guard.begin_call("send_email", {"to": "ops@example.com"})
    guard.close()
    explained = json.loads(gg(repo, "explain", "--json").stdout)
    assert explained["checkpoint"]["checkpointId"] == crashed.pre_checkpoint_id
    result = json.loads(gg(repo, "resume", "--json").stdout)
    assert result["checkpointId"] == crashed.pre_checkpoint_id
    assert result["uncertain"] == [crashed.call_id]
    assert result["workspace"]["changed"] == []
    gg(repo, "verify")


def test_restore_session_to_the_shared_checkpoint_lists_the_later_calls(repo: Path) -> None:
    _, first_pre, shared = shared_session(repo)
    out = json.loads(gg(repo, "restore-session", "--to", shared, "--json").stdout)
    assert [c["callId"] for c in out["callsAfter"]] == ["call_2"]
    out = json.loads(gg(repo, "restore-session", "--to", first_pre, "--json").stdout)
    assert [c["callId"] for c in out["callsAfter"]] == ["call_1", "call_2"]


def test_gc_keeps_the_shared_checkpoint_while_the_later_call_is_open(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    edit(guard, "src/a.txt", "a1\n")
    edit(guard, "src/a.txt", "a2\n")
    open_call = guard.begin_call("Edit", {"file_path": "src/b.txt"}, writes=["src/b.txt"])
    shared = open_call.pre_checkpoint_id
    assert shared == entries(repo)["call_2"].post_checkpoint_id  # type: ignore[attr-defined]
    for step in range(2):       # so that the shared checkpoint is not the session's last
        (repo / "notes.txt").write_text(f"user note {step}\n")
        guard.checkpoint("manual", f"later_{step}")
    done = json.loads(gg(repo, "gc", "--json", env=GC_ENV).stdout)
    assert done["kept"][shared] == ["call in flight"] and done["pruned"]
    gg(repo, "verify")
    (repo / "src" / "b.txt").write_text("b1\n")
    ended = Guard.open(repo).end_call(open_call.call_id, "succeeded")
    assert "src/b.txt" in [p.path for p in ended.file_patches]
    # Once both calls have ended it is an ordinary checkpoint to gc.
    guard.checkpoint("manual", "last")
    done = json.loads(gg(repo, "gc", "--json", env=GC_ENV).stdout)
    assert shared in done["pruned"]
    gg(repo, "verify")
