"""A rollback's patch is made from the trees its writes will produce, before they end.

It is rendered while the writes run and appended to the artifact journal beside the
post checkpoint's index row, not read back after them. The slow way is the old one:
the diff of the pre_rollback and post checkpoints' trees, rendered after the writes with
every blob read back from the object store. Both must give the same bytes, whether every
write happened or one path changed under the rollback and was left. With enough writes
the post checkpoint itself is written beside them; it must hold the tree written.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pygit2

from gitguard import fileops, verify
from gitguard.api import Guard
from gitguard.fileops import FileState
from gitguard.git import patch_text, tree_diff, tree_edit
from gitguard.git.objects import REGULAR
from gitguard.ledger import journal
from gitguard.models import ToolLedgerEntry
from gitguard.rollback.rollback_files import rollback_files
from gitguard.rollback.workspace_writer import Step, apply
from gitguard.snapshot import checkpoints


def _slow_patch(guard: Guard, entry: ToolLedgerEntry) -> bytes:
    rows = checkpoints.read_index(guard.store)
    pre = guard.snap.tree_of(rows.find(entry.pre_checkpoint_id or "").snapshot_commit)
    post = guard.snap.tree_of(rows.find(entry.post_checkpoint_id or "").snapshot_commit)
    return patch_text.render(guard.snap.repo, tree_diff.diff_trees(guard.snap.repo, pre, post))


def test_patch_made_before_the_writes_equals_the_diff_of_the_checkpoints(repo: Path) -> None:
    guard = Guard.init(repo)
    try:
        target = guard.checkpoint(kind="manual", step_id="s0").checkpoint_id
        with guard.tool_call("write", {}):
            (repo / "src" / "app.py").write_text("def main():\n    return 2\n")
            (repo / "src" / "deep").mkdir()
            (repo / "src" / "deep" / "new.bin").write_bytes(b"\x00\xff\x00")
            (repo / "caf\udce9.txt").write_bytes(b"caf\xe9 latin-1\n")
            (repo / "link").symlink_to("README.md")
            (repo / "README.md").unlink()
        (repo / "user.txt").write_text("the user's, not rolled back\n")
        result = rollback_files(guard, target)
        assert result.applied is not None and len(result.applied.done) == 5
        entry = result.applied.entry
        refs = {p.patch_ref for p in entry.file_patches}
        assert len(refs) == 1
        stored = guard.store.read_artifact(refs.pop())
        assert stored == _slow_patch(guard, entry)
        # Journaled with the input, not files of their own; the input still reads.
        names = {p.name for p in guard.store.artifacts_dir.iterdir()}
        assert not any(n.startswith(("patch_rollback", "input_rollback")) for n in names)
        assert b'"targets"' in guard.store.read_artifact(entry.input_ref or "")
        # The file patch rows, built without validation, read back (validated) the same.
        assert journal.read(guard.store).entries[entry.call_id].file_patches == \
            entry.file_patches
        # The state the rollback left is the target's; its patch undoes it.
        subprocess.run(["git", "apply", "-R", "--check"], cwd=repo, input=stored, check=True)
    finally:
        guard.close()


def test_a_path_left_by_a_race_is_not_in_the_patch(repo: Path) -> None:
    """One step writes, the other finds the user got there first: the patch stored is
    that of the write made, as the diff of the checkpoints gives it."""
    guard = Guard.init(repo)
    try:
        guard.checkpoint(kind="manual", step_id="s0")
        (repo / "src" / "app.py").write_bytes(b"the user got here first\n")
        planned = FileState(str(pygit2.hash(b"def main():\n    return 1\n")), REGULAR)
        readme = FileState(str(pygit2.hash((repo / "README.md").read_bytes())), REGULAR)
        target = FileState(str(guard.snap.repo.create_blob(b"agent\n")), REGULAR)
        with guard.store.writing():
            done = apply(guard, journal.read(guard.store), session_id="s",
                         tool_name="gitguard.test", id_prefix="test", summary="", tool_input={},
                         steps=[Step("src/app.py", planned, target),
                                Step("README.md", readme, target)],
                         now={"src/app.py": planned, "README.md": readme})
        assert [s.path for s in done.done] == ["README.md"]
        assert [s.path for s, _ in done.raced] == ["src/app.py"]
        assert (repo / "src" / "app.py").read_bytes() == b"the user got here first\n"
        stored = guard.store.read_artifact(done.entry.file_patches[0].patch_ref)
        assert stored == _slow_patch(guard, done.entry)
        assert b"README.md" in stored and b"src/app.py" not in stored
    finally:
        guard.close()


def _post_checks(guard: Guard, entry: ToolLedgerEntry, tree: str | None = None) -> None:
    """The post checkpoint (written beside the writes when there are enough of them) holds
    `tree` (default: what a full scan of the working tree finds), with git's dirty summary;
    it loads (its sha256 is the index row's) and verify finds nothing wrong."""
    rows = checkpoints.read_index(guard.store)
    post_row = rows.find(entry.post_checkpoint_id or "")
    checkpoints.forget()
    post = checkpoints.load(guard.store, post_row)
    tree = tree or guard.snap.write_tree().tree
    assert guard.snap.tree_of(post.snapshot_commit) == tree
    assert (list(post.dirty), post.dirty_count) == guard.snap.dirty_against_head(tree)
    assert [r.checkpoint_id for r in rows.rows].count(post.checkpoint_id) == 1
    assert verify.problems(guard.store, guard.snap) == []


def test_post_checkpoint_beside_the_writes_is_the_scanned_tree(repo: Path) -> None:
    guard = Guard.init(repo)
    try:
        target = guard.checkpoint(kind="manual", step_id="s0").checkpoint_id
        with guard.tool_call("write", {}):
            for n in range(12):
                (repo / "src" / f"f{n}.txt").write_text(f"agent {n}\n")
            (repo / "README.md").write_text("agent\n")
        result = rollback_files(guard, target)
        assert result.applied is not None and len(result.applied.done) == 13
        entry = result.applied.entry
        _post_checks(guard, entry)
        assert guard.store.read_artifact(entry.file_patches[0].patch_ref) == \
            _slow_patch(guard, entry)
    finally:
        guard.close()


def test_a_race_among_many_writes_rewrites_the_post_checkpoint(repo: Path) -> None:
    """With enough steps the post checkpoint of the planned tree is written while the
    writes run; one left by a race means it is written again, of what was written."""
    guard = Guard.init(repo)
    try:
        guard.checkpoint(kind="manual", step_id="s0")
        (repo / "src" / "app.py").write_bytes(b"the user got here first\n")
        planned = FileState(str(pygit2.hash(b"def main():\n    return 1\n")), REGULAR)
        target = FileState(str(guard.snap.repo.create_blob(b"agent\n")), REGULAR)
        others = [f"src/n{n}.txt" for n in range(fileops.PARALLEL_FROM + 1)]
        steps = [Step("src/app.py", planned, target)] + [Step(p, None, target) for p in others]
        with guard.store.writing():
            done = apply(guard, journal.read(guard.store), session_id="s",
                         tool_name="gitguard.test", id_prefix="test", summary="", tool_input={},
                         steps=steps, now={"src/app.py": planned, **{p: None for p in others}})
        assert sorted(s.path for s in done.done) == others
        assert [s.path for s, _ in done.raced] == ["src/app.py"]
        assert (repo / "src" / "app.py").read_bytes() == b"the user got here first\n"
        # The safety tree holds what the caller said src/app.py held (`now`); the post
        # tree is it with the writes made, built the slow way here.
        pre = checkpoints.read_index(guard.store).find(done.entry.pre_checkpoint_id or "")
        _post_checks(guard, done.entry, tree_edit.tree_with(
            guard.snap.repo, guard.snap.tree_of(pre.snapshot_commit),
            {p: target for p in others}))
        stored = guard.store.read_artifact(done.entry.file_patches[0].patch_ref)
        assert stored == _slow_patch(guard, done.entry)
        assert b"src/n0.txt" in stored and b"src/app.py" not in stored
    finally:
        guard.close()
