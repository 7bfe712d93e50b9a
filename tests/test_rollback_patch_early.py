"""A rollback's patch is made before its writes, from the trees they will produce.

It goes into the artifact journal with the entry's input (one fsync) instead of a
file of its own after the writes. The slow way is the old one: the diff of the
pre_rollback and post checkpoints' trees, rendered after the writes with every blob
read back from the object store. Both must give the same bytes, whether every write
happened or one path changed under the rollback and was left.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pygit2

from gitguard import checkpoints, ledger, patchtext, treediff
from gitguard.api import Guard
from gitguard.fileops import REGULAR, FileState
from gitguard.guarded import Step, apply
from gitguard.models import ToolLedgerEntry
from gitguard.rollback import rollback_files


def _slow_patch(guard: Guard, entry: ToolLedgerEntry) -> bytes:
    rows = checkpoints.read_index(guard.store)
    pre = guard.snap.tree_of(rows.find(entry.pre_checkpoint_id or "").snapshot_commit)
    post = guard.snap.tree_of(rows.find(entry.post_checkpoint_id or "").snapshot_commit)
    return patchtext.render(guard.snap.repo, treediff.diff_trees(guard.snap.repo, pre, post))


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
        assert ledger.read(guard.store).entries[entry.call_id].file_patches == \
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
            done = apply(guard, ledger.read(guard.store), session_id="s",
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
