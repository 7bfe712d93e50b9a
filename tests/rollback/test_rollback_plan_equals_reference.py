"""The shortcuts rollback takes at scale compute exactly what the plain way computes.

`tree_edit.tree_with` skips changes the base tree already holds; the reference
`_tree_with` applies every change. Both must give the same tree for any base and
any set of changes, including a file taking a directory's place and back.
`dirty_delta.derive` must give what `git diff-tree` against HEAD gives, whenever it
answers at all.
"""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pygit2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitguard.api import Guard
from gitguard.calls import timeline
from gitguard.fileops import FileState
from gitguard.git import objects, tree_diff, tree_edit
from gitguard.git.objects import EMPTY_TREE, EXECUTABLE, LINK, REGULAR
from gitguard.models import Attribution, ToolLedgerEntry
from gitguard.rollback.rollback_files import rollback_files
from gitguard.snapshot import checkpoints, dirty_delta
from gitguard.storage import durable
from tests.helpers.commands import git

NAMES = ["a", "b", "a/b", "a/c", "a/b/x", "b/a", "c/d/e", "caf\udce9"]
BLOBS = [b"", b"one\n", b"two\n"]

state = st.one_of(st.none(), st.tuples(st.sampled_from(BLOBS),
                                       st.sampled_from([REGULAR, EXECUTABLE, LINK])))
changes = st.dictionaries(st.sampled_from(NAMES), state, max_size=6)


def _states(repo: pygit2.Repository, raw: dict[str, tuple[bytes, int] | None]
            ) -> dict[str, FileState | None]:
    return {path: FileState(str(repo.create_blob(value[0])), value[1]) if value else None
            for path, value in raw.items()}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(base_steps=st.lists(changes, max_size=3), edit=changes)
def test_tree_with_skipping_held_changes_equals_applying_all(
        tmp_path: Path, base_steps: list[dict[str, tuple[bytes, int] | None]],
        edit: dict[str, tuple[bytes, int] | None]) -> None:
    repo_dir = tmp_path / "objects.git"
    repo = (pygit2.Repository(str(repo_dir)) if repo_dir.exists()
            else pygit2.init_repository(str(repo_dir), bare=True))
    base = EMPTY_TREE
    repo.odb.write(pygit2.enums.ObjectType.TREE, b"")
    for raw in base_steps:   # bases of every shape: files, directories, files under files' names
        base = tree_edit._tree_with(repo, objects.as_tree(repo, base), _states(repo, raw))
    wanted = _states(repo, edit)
    slow = tree_edit._tree_with(repo, objects.as_tree(repo, base), wanted)
    assert tree_edit.tree_with(repo, base, wanted) == slow


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(base_steps=st.lists(changes, max_size=3), edit=changes)
def test_changes_at_written_paths_equal_the_tree_diff(
        tmp_path: Path, base_steps: list[dict[str, tuple[bytes, int] | None]],
        edit: dict[str, tuple[bytes, int] | None]) -> None:
    """The rollback patch's change list from lookups equals tree_diff's wherever it answers."""
    repo_dir = tmp_path / "objects.git"
    repo = (pygit2.Repository(str(repo_dir)) if repo_dir.exists()
            else pygit2.init_repository(str(repo_dir), bare=True))
    base = EMPTY_TREE
    repo.odb.write(pygit2.enums.ObjectType.TREE, b"")
    for raw in base_steps:
        base = tree_edit._tree_with(repo, objects.as_tree(repo, base), _states(repo, raw))
    wanted = _states(repo, edit)
    new = tree_edit.tree_with(repo, base, wanted)
    fast = dirty_delta.changes(repo, base, new, wanted)
    if fast is not None:
        assert fast == tree_diff.diff_trees(repo, base, new)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(base_steps=st.lists(changes, max_size=3), edit=changes)
def test_planned_changes_without_the_new_tree_equal_the_tree_diff(
        tmp_path: Path, base_steps: list[dict[str, tuple[bytes, int] | None]],
        edit: dict[str, tuple[bytes, int] | None]) -> None:
    """The rollback patch's change list made before the post tree exists (the targets as
    the new side) equals tree_diff's of the tree built from them, wherever it answers; it
    answers wherever the lookups in both trees do."""
    repo_dir = tmp_path / "objects.git"
    repo = (pygit2.Repository(str(repo_dir)) if repo_dir.exists()
            else pygit2.init_repository(str(repo_dir), bare=True))
    base = EMPTY_TREE
    repo.odb.write(pygit2.enums.ObjectType.TREE, b"")
    for raw in base_steps:
        base = tree_edit._tree_with(repo, objects.as_tree(repo, base), _states(repo, raw))
    wanted = _states(repo, edit)
    planned = dirty_delta.planned_changes(repo, base, wanted)
    new = tree_edit.tree_with(repo, base, wanted)
    if planned is not None:
        assert planned == tree_diff.diff_trees(repo, base, new)
    if dirty_delta.changes(repo, base, new, wanted) is not None:
        assert planned is not None


def test_changes_at_written_paths_answer_for_plain_files(tmp_path: Path) -> None:
    repo = pygit2.init_repository(str(tmp_path / "objects.git"), bare=True)
    base = tree_edit._tree_with(repo, objects.as_tree(repo, EMPTY_TREE), _states(repo, {
        "a/b": (b"one\n", REGULAR), "a/c": (b"two\n", REGULAR), "l": (b"a/b", LINK)}))
    wanted = _states(repo, {"a/b": (b"two\n", EXECUTABLE), "a/c": None, "l": (b"x\n", REGULAR),
                            "n/new": (b"", REGULAR), "gone": None})
    new = tree_edit.tree_with(repo, base, wanted)
    fast = dirty_delta.changes(repo, base, new, wanted)
    assert fast is not None and [c.status for c in fast] == ["M", "D", "T", "A"]
    assert fast == tree_diff.diff_trees(repo, base, new)
    assert dirty_delta.planned_changes(repo, base, wanted) == fast


def _walk_dirty(guard: Guard, limit_files: int, seed: int, rounds: int) -> int:
    """Random edits to a checkpoint's tree; each derived summary must equal git's."""
    rng = random.Random(seed)
    snap, repo = guard.snap, guard.snap.repo
    base = guard.checkpoint(kind="manual", step_id="base")
    names = ["README.md", "src/app.py", "src/new.py", "n/deep/x", "n/deep", "src", "z",
             *(f"many/f{i:03d}" for i in range(0, limit_files, 37))]
    blobs = [FileState(str(repo.create_blob(b"same\n")), REGULAR),
             FileState(str(repo.create_blob(b"# project\n")), REGULAR),
             FileState(str(repo.create_blob(b"def main():\n    return 1\n")), REGULAR),
             FileState(str(repo.create_blob(b"def main():\n    return 1\n")), EXECUTABLE),
             FileState(str(repo.create_blob(b"README.md")), LINK), None]
    exact = 0
    for step in range(rounds):
        changed = {rng.choice(names): rng.choice(blobs) for _ in range(rng.randint(1, 4))}
        tree = tree_edit.tree_with(repo, snap.tree_of(base.snapshot_commit), changed)
        derived = dirty_delta.derive(snap, base, tree, changed)
        truth = snap.dirty_against_head(tree)
        if derived is not None:
            assert derived == truth, (step, changed)
            exact += 1
        commit = snap.commit(tree, base.session_id, {"step": step})
        base = base.model_copy(update={"snapshot_commit": commit, "dirty": tuple(truth[0]),
                                       "dirty_count": truth[1]})
    return exact


def test_derived_dirty_summary_equals_git_diff_tree(repo: Path) -> None:
    guard = Guard.init(repo)
    try:
        assert _walk_dirty(guard, 0, seed=1, rounds=40) >= 10   # the rest: HEAD-tree swaps
    finally:
        guard.close()


def test_derived_dirty_summary_past_the_list_limit_equals_git(repo: Path) -> None:
    many = repo / "many"
    many.mkdir()
    for i in range(dirty_delta.LIMIT + 40):       # untracked: dirty against HEAD
        (many / f"f{i:03d}").write_text(f"{i}\n")
    guard = Guard.init(repo)
    try:
        assert _walk_dirty(guard, dirty_delta.LIMIT + 40, seed=2, rounds=40) > 10
    finally:
        guard.close()


def test_derived_dirty_summary_gives_up_when_head_moved(repo: Path) -> None:
    guard = Guard.init(repo)
    try:
        base = guard.checkpoint(kind="manual", step_id="base")
        (repo / "README.md").write_text("# moved\n")
        git(repo, "commit", "-qam", "move HEAD")
        tree = guard.snap.tree_of(base.snapshot_commit)
        assert dirty_delta.derive(guard.snap, base, tree, []) is None
    finally:
        guard.close()


def test_rollback_patch_without_pathspec_equals_the_one_limited_to_written_paths(
        repo: Path) -> None:
    """The safety and post trees differ only where the rollback wrote, so the patch between
    them is the same with or without the written paths as pathspecs."""
    guard = Guard.init(repo)
    try:
        target = guard.checkpoint(kind="manual", step_id="s0").checkpoint_id
        with guard.tool_call("write", {}):
            (repo / "src" / "app.py").write_text("def main():\n    return 2\n")
            (repo / "src" / "deep").mkdir()
            (repo / "src" / "deep" / "new.bin").write_bytes(b"\x00\xff")
            (repo / "README.md").unlink()
        (repo / "user.txt").write_text("the user's, not rolled back\n")
        result = rollback_files(guard, target)
        assert result.applied is not None and len(result.applied.done) == 3
        entry = result.applied.entry
        rows = checkpoints.read_index(guard.store)
        pre = guard.snap.tree_of(rows.find(entry.pre_checkpoint_id or "").snapshot_commit)
        post = guard.snap.tree_of(rows.find(entry.post_checkpoint_id or "").snapshot_commit)
        limited = guard.snap.patch(pre, post, [s.path for s in result.applied.done])
        stored = guard.store.read_artifact(entry.file_patches[0].patch_ref)
        # Made in-process (patch_text): the same files and headers as git's own; binary
        # literals may differ in zlib level only, so git itself checks that it reverses.
        def headers(patch: bytes) -> list[bytes]:
            return [ln for ln in patch.splitlines() if ln.startswith((b"diff --git", b"index "))]
        assert headers(stored) == headers(limited)
        assert b"src/deep/new.bin" in stored and b"README.md" in stored
        subprocess.run(["git", "apply", "-R", "--check"], cwd=repo, input=stored, check=True)
    finally:
        guard.close()


def test_attribution_records_read_for_the_candidates_decide_as_all_of_them(repo: Path) -> None:
    """Filtered on read and grouped by path, the watcher's records give each path the
    verdict a pass over every record gives."""
    guard = Guard.open(repo)
    guard.store.root.mkdir(parents=True, exist_ok=True)
    stamps = [f"2026-01-01T00:00:0{i}.000Z" for i in range(6)]
    rows = [Attribution.model_validate({"path": path, "owner": owner, "confidence": confidence,
                                        "at": at}).to_json()
            for path, owner, confidence, at in [
                ("a.txt", "call_1", "exact", stamps[1]), ("b.txt", "user", "window", stamps[2]),
                ("a.txt", "call_2", "unknown", stamps[3]), ("c.txt", "user", "window", stamps[0]),
                ("c.txt", "call_3", "ambiguous", stamps[4]),
                ("d.txt", "call_4", "exact", stamps[5])]]
    durable.append_jsonl(guard.store.root / timeline.ATTRIBUTION_FILE, rows)
    everything = timeline.read_attributions(guard.store)
    wanted = {"a.txt", "c.txt", "d.txt", "e.txt"}
    chosen = timeline.read_attributions(guard.store, wanted)
    assert chosen == [r for r in everything if r.path in wanted]
    grouped = timeline.by_path(chosen)
    change = timeline.Change(None, FileState("1" * 40, REGULAR), "call_1", "exact", None, 1)
    for path in sorted(wanted):
        item = timeline.PathHistory(path, None, change.after, (change,))
        for since in (stamps[0], stamps[2], stamps[5]):
            assert (timeline.foreign_touch(item, since, grouped.get(path, ()))
                    == timeline.foreign_touch(item, since, everything))


def test_rollback_checkpoints_reuse_dirty_summaries_equal_to_git_diff_tree(repo: Path) -> None:
    """A rollback that ends on its target's tree takes the target's dirty summary for its
    post checkpoint, and the safety checkpoint takes the latest's: each equals what
    `git diff-tree` against HEAD gives, with a user edit kept (post tree not the target's)
    and without."""
    guard = Guard.init(repo)
    try:
        (repo / "dirty-before.txt").write_text("the user's, before the checkpoint\n")
        for user_edit in (False, True):
            target = guard.checkpoint(kind="manual", step_id=f"s{user_edit}")
            with guard.tool_call("write", {"user": user_edit}):
                (repo / "src" / "app.py").write_text(f"def main():\n    return {user_edit}\n")
                (repo / "agent-new.txt").write_text("new\n")
            if user_edit:
                (repo / "user.txt").write_text("the user's, after the checkpoint\n")
                guard.checkpoint(kind="manual", step_id="user")
            result = rollback_files(guard, target.checkpoint_id)
            assert result.applied is not None and len(result.applied.done) == 2
            rows = checkpoints.read_index(guard.store)
            entry = result.applied.entry
            for checkpoint_id in (entry.pre_checkpoint_id, entry.post_checkpoint_id):
                saved = checkpoints.load(guard.store, rows.find(checkpoint_id or ""))
                tree = guard.snap.tree_of(saved.snapshot_commit)
                assert (list(saved.dirty), saved.dirty_count) == \
                    guard.snap.dirty_against_head(tree)
            post = rows.find(entry.post_checkpoint_id or "")
            ends_on_target = (guard.snap.tree_of(post.snapshot_commit)
                              == guard.snap.tree_of(target.snapshot_commit))
            assert ends_on_target is not user_edit
    finally:
        guard.close()


def test_timeline_without_the_calls_that_ended_before_the_target_reads_the_same(
        repo: Path) -> None:
    """timeline.build leaves out the calls that ended at or before the target checkpoint:
    every path's history and the agent windows equal those read with every call kept."""
    from gitguard import fileops
    from gitguard.ledger import journal
    from gitguard.rollback import workspace_writer

    guard = Guard.init(repo)
    try:
        guard.checkpoint(kind="manual", step_id="s0")
        paths = ["src/app.py", "README.md", "notes.txt", "new/deep.txt", "user.txt"]
        with guard.tool_call("write", {"n": 1}):
            (repo / "src" / "app.py").write_text("one\n")
        guard.checkpoint(kind="manual", step_id="s1")
        with guard.tool_call("write", {"n": 2}):
            (repo / "src" / "app.py").write_text("two\n")
            (repo / "notes.txt").write_text("agent\n")
        (repo / "user.txt").write_text("the user's\n")
        middle = guard.checkpoint(kind="manual", step_id="s2").checkpoint_id
        with guard.tool_call("write", {"n": 3}):
            (repo / "new").mkdir()
            (repo / "new" / "deep.txt").write_text("deep\n")
            (repo / "README.md").unlink()
        rollback_files(guard, middle)
        with guard.tool_call("write", {"n": 4}):
            (repo / "notes.txt").write_text("agent again\n")
        guard.begin_call("write", {"n": 5})          # left open: its window reaches now
        (repo / "src" / "app.py").write_text("open\n")
        rows = checkpoints.read_index(guard.store).rows
        entries = journal.read(guard.store).in_order()

        def planned(entry: ToolLedgerEntry) -> dict[str, FileState | None] | None:
            return workspace_writer.planned_targets(guard, entry)

        def lookup(tree: str, path: str) -> FileState | None:
            return tree_edit.lookup(guard.snap.repo, objects.as_tree(guard.snap.repo, tree),
                                    path)

        everything = timeline.build(rows, guard.snap.tree_of, rows[0].checkpoint_id, entries,
                                    planned)
        now = {p: fileops.observe(guard.snap.repo, repo, p, False).state for p in paths}
        for row in rows:
            line = timeline.build(rows, guard.snap.tree_of, row.checkpoint_id, entries,
                                  planned)
            slow = timeline.Timeline(line.target, line.points, list(everything.windows),
                                     line.stamps)
            assert len(line.windows) <= len(slow.windows)
            assert line.agent_windows() == slow.agent_windows()
            for path in paths:
                assert (timeline.history(line, path, lookup, now[path])
                        == timeline.history(slow, path, lookup, now[path]))
        last = timeline.build(rows, guard.snap.tree_of, rows[-1].checkpoint_id, entries, planned)
        assert len(last.windows) < len(everything.windows)
    finally:
        guard.close()
