"""One read per rollback candidate: the plan's bytes serve the last check before the write
only while the file's lstat proves them current (fileops.Fence, git's racy-timestamp rule)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pygit2
import pytest

from gitguard import fileops
from gitguard.api import Guard
from gitguard.fileops import FileState
from gitguard.git.objects import REGULAR
from gitguard.ledger import journal
from gitguard.rollback import rollback_files as rollback
from gitguard.rollback.rollback_files import rollback_files
from gitguard.storage import durable


def _same_size_edit(full: Path, data: bytes) -> None:
    """A user edit that keeps the size and puts the old mtime back: only the ctime moves."""
    before = os.lstat(full)
    assert len(data) == before.st_size
    full.write_bytes(data)
    os.utime(full, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.lstat(full)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def test_a_file_stamped_before_the_fence_is_reused_until_its_stat_moves(tmp_path: Path) -> None:
    stamp = tmp_path / "stamp"
    stamp.write_bytes(b"")
    full = tmp_path / "f.txt"
    full.write_bytes(b"agent's\n")
    info = os.lstat(full)
    # The fence one tick after the file's stamp: the file is older, its bytes are reusable.
    seen = fileops.observe_many(pygit2.Repository(str(_repo(tmp_path))), tmp_path, ["f.txt"],
                                False, fileops.Fence(info.st_dev, info.st_ctime_ns + 1))
    held = seen["f.txt"].seen
    assert held is not None and held.data == b"agent's\n"
    found, data, _ = fileops.last_check(tmp_path, "f.txt", held)
    assert found == held.state and data == b"agent's\n"
    _same_size_edit(full, b"user's!\n")
    found, data, _ = fileops.last_check(tmp_path, "f.txt", held)
    assert data == b"user's!\n" and found == FileState(str(pygit2.hash(b"user's!\n")), REGULAR)


@pytest.mark.parametrize("offset", [0, -1])
def test_a_file_stamped_in_the_fences_tick_or_later_is_read_again(tmp_path: Path,
                                                                  offset: int) -> None:
    full = tmp_path / "f.txt"
    full.write_bytes(b"racy\n")
    info = os.lstat(full)
    # ctime == fence (the same clock tick) or after it: the stat proves nothing.
    fence = fileops.Fence(info.st_dev, info.st_ctime_ns + offset)
    seen = fileops.observe_many(pygit2.Repository(str(_repo(tmp_path))), tmp_path, ["f.txt"],
                                False, fence)
    assert seen["f.txt"].seen is None and seen["f.txt"].state is not None
    other_device = fileops.Fence(info.st_dev + 1, info.st_ctime_ns + 1)
    assert fileops.observe_many(pygit2.Repository(str(_repo(tmp_path))), tmp_path, ["f.txt"],
                                False, other_device)["f.txt"].seen is None


def test_the_fence_comes_from_the_file_systems_clock(tmp_path: Path) -> None:
    stamp = tmp_path / "stamp"
    stamp.write_bytes(b"")
    earlier = tmp_path / "earlier"
    earlier.write_bytes(b"x")
    fence = fileops.fence(stamp)
    assert fence is not None and fence.ns >= os.lstat(earlier).st_ctime_ns
    later = tmp_path / "later"
    later.write_bytes(b"y")
    assert os.lstat(later).st_ctime_ns >= fence.ns
    assert fileops.fence(tmp_path / "missing" / "stamp") is None


def test_a_same_size_user_edit_between_plan_and_write_is_never_overwritten(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    guard = Guard.init(repo)
    try:
        target = guard.checkpoint(kind="manual", step_id="before").checkpoint_id
        app_before = (repo / "src" / "app.py").read_bytes()
        with guard.tool_call("write_files", {"n": 2}):
            (repo / "README.md").write_bytes(b"agent a\n")
            (repo / "src" / "app.py").write_bytes(b"agent c\n")
        _until_the_clock_passes(tmp_path / "stamp", repo / "README.md")
        observe = fileops.observe_many
        reused: list[str] = []

        def then_the_user_edits(*args: Any, **kwargs: Any) -> dict[str, fileops.Observed]:
            seen = observe(*args, **kwargs)
            reused.extend(p for p, o in seen.items() if o.seen is not None)
            _same_size_edit(repo / "README.md", b"user a!\n")     # after the plan's read
            return seen

        monkeypatch.setattr(fileops, "observe_many", then_the_user_edits)
        result = rollback_files(guard, target)
    finally:
        guard.close()
    assert sorted(reused) == ["README.md", "src/app.py"]   # both would skip the second read
    assert (repo / "README.md").read_bytes() == b"user a!\n"
    assert [c.path for c in result.conflicts] == ["README.md"]
    assert result.restored == ["src/app.py"]
    assert (repo / "src" / "app.py").read_bytes() == app_before


def _until_the_clock_passes(stamp: Path, full: Path) -> None:
    """Poll (bounded) until the file system's clock has moved past the file's stamp, so the
    rollback's fence is later than the agent's write and its bytes count as reusable."""
    stamp.write_bytes(b"")
    changed = os.lstat(full).st_ctime_ns
    deadline = time.monotonic() + 10
    while (fence := fileops.fence(stamp)) is not None and fence.ns <= changed:
        assert time.monotonic() < deadline, "the file system clock did not move in 10 s"
        time.sleep(0.001)


def _repo(path: Path) -> Path:
    git_dir = path / "objects-repo"
    if not git_dir.exists():
        pygit2.init_repository(str(git_dir), bare=True)
    return git_dir


def test_observing_paths_whose_parents_were_checked_equals_walking_them(tmp_path: Path) -> None:
    """gather skips the parent walk for paths whose parents check_path found directories:
    the observations equal the full walk's, a file in a parent's place included."""
    root = tmp_path / "ws"
    for rel, data in {"a/b/c.txt": b"c", "a/d.txt": b"d", "top.txt": b"t",
                      "plain.txt": b"p"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    rels = ["a/b/c.txt", "a/d.txt", "top.txt", "plain.txt/below", "gone/x.txt", "a/b"]
    plain: dict[str, bool] = {}
    real: set[str] = set()
    for rel in rels:
        rollback._plain(root, rel, plain, real)
    walked = {p for p in rels if all(q in real for q in rollback._parents(p))}
    assert walked == {"a/b/c.txt", "a/d.txt", "top.txt", "a/b"}
    repo = pygit2.Repository(str(_repo(tmp_path)))
    assert (fileops.observe_many(repo, root, rels, False, walked=walked)
            == fileops.observe_many(repo, root, rels, False))


def test_the_finished_entry_and_the_action_are_one_append_read_back_alike(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rollback's finished entry and its RecoveryAction go into one durable append; a
    fresh read of the ledger holds both, in that order, as the in-memory state does."""
    guard = Guard.init(repo)
    try:
        target = guard.checkpoint(kind="manual", step_id="before").checkpoint_id
        with guard.tool_call("write_files", {"n": 1}):
            (repo / "README.md").write_bytes(b"agent\n")
        appends: list[int] = []
        append = durable.append_jsonl

        def counted(path: Path, records: list[dict[str, Any]]) -> None:
            if path == guard.store.ledger_path:
                appends.append(len(records))
            append(path, records)

        monkeypatch.setattr(durable, "append_jsonl", counted)
        result = rollback_files(guard, target)
        state = journal.read(guard.store)
    finally:
        guard.close()
    assert result.applied is not None and result.restored == ["README.md"]
    assert appends == [2, 2]       # planned + started; finished + the action
    action = state.actions[-1]
    assert action.action.type == "rollback_files" and action.seq == state.last_seq
    assert action.detail is not None and action.detail["entryId"] == result.applied.entry.call_id
    assert state.entries[result.applied.entry.call_id].status == "succeeded"
    assert state.first_seq[result.applied.entry.call_id] == action.seq - 3   # planned
