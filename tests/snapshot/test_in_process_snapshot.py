"""No-daemon snapshots built in-process (`stat_tree`): the tree is the last one plus the
changed paths, the stat index lags behind it, and a declared-only call's end snapshot
looks at its declared paths only. Each fast tree must equal what the slow way gives
(a throwaway index, `git add -A`, `git write-tree`), and what the end snapshot leaves
out must come back as the user's."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from gitguard.api import Guard
from gitguard.rollback.rollback_files import rollback_files
from gitguard.snapshot import stat_tree
from tests.snapshot.test_scan_equals_full_scan import reference_tree


def _user_index(repo: Path) -> tuple[bytes, int]:
    index = repo / ".git" / "index"
    return index.read_bytes(), index.stat().st_mtime_ns


def _owners(guard: Guard) -> dict[str, str]:
    return {d.path: d.owner for d in guard.status().dirty}


def test_a_user_edit_during_a_declared_call_stays_the_users(repo: Path) -> None:
    before = _user_index(repo)
    guard = Guard.init(repo)
    ckpt = guard.checkpoint(kind="manual", step_id="s0")
    entry = guard.begin_call("Write", {"file_path": "notes.txt", "content": "agent\n"},
                             writes=["notes.txt"])
    (repo / "notes.txt").write_text("agent\n")
    (repo / "src" / "app.py").write_text("the user's edit, while the call ran\n")
    done = guard.end_call(entry.call_id, "succeeded", "ok")
    assert [p.path for p in done.file_patches] == ["notes.txt"]
    assert _owners(guard) == {"notes.txt": entry.call_id, "src/app.py": "user"}
    result = rollback_files(guard, ckpt.checkpoint_id)
    assert not result.conflicts
    assert not (repo / "notes.txt").exists()
    assert (repo / "src" / "app.py").read_text() == "the user's edit, while the call ran\n"
    assert _user_index(repo) == before


def test_a_declared_tool_that_wrote_elsewhere_leaves_that_file_to_the_user(repo: Path
                                                                           ) -> None:
    before = _user_index(repo)
    guard = Guard.init(repo)
    ckpt = guard.checkpoint(kind="manual", step_id="s0")
    entry = guard.begin_call("Edit", {"file_path": "src/app.py", "old_string": "1",
                                      "new_string": "2"}, writes=["src/app.py"])
    (repo / "src" / "app.py").write_text("def main():\n    return 2\n")
    (repo / "secret.txt").write_text("written by the tool, never declared\n")
    done = guard.end_call(entry.call_id, "succeeded", "ok")
    assert [p.path for p in done.file_patches] == ["src/app.py"]
    assert _owners(guard) == {"src/app.py": entry.call_id, "secret.txt": "user"}
    rollback_files(guard, ckpt.checkpoint_id)
    assert (repo / "src" / "app.py").read_text() == "def main():\n    return 1\n"
    assert (repo / "secret.txt").exists()      # the safe direction: never reverted
    assert _user_index(repo) == before


def test_a_shell_call_still_ends_with_a_full_scan(repo: Path) -> None:
    guard = Guard.init(repo)
    guard.checkpoint(kind="manual", step_id="s0")
    entry = guard.begin_call("Bash", {"command": "make"}, writes=["out.txt"])
    (repo / "out.txt").write_text("declared\n")
    (repo / "other.txt").write_text("not declared, a shell writes anything\n")
    done = guard.end_call(entry.call_id, "succeeded", "ok")
    assert sorted(p.path for p in done.file_patches) == ["other.txt", "out.txt"]


def test_a_lagging_path_that_went_back_is_still_seen(repo: Path, tmp_path: Path) -> None:
    """git no longer reports a file edited and then put back (it matches the stat index
    again), but the last tree holds the edit: the lag brings it back."""
    guard = Guard.init(repo)
    first = guard.snap.write_tree()
    original = (repo / "src" / "app.py").read_bytes()
    (repo / "src" / "app.py").write_text("edited\n")
    edited = guard.snap.write_tree()
    assert edited.changed == ("src/app.py",) and edited.base == first.tree
    (repo / "src" / "app.py").write_bytes(original)
    back = guard.snap.write_tree()
    assert back.tree == first.tree == reference_tree(repo, tmp_path, back.skipped)
    assert back.changed == ("src/app.py",)


def test_a_state_for_another_index_is_not_trusted(repo: Path, tmp_path: Path) -> None:
    guard = Guard.init(repo)
    guard.snap.write_tree()
    (repo / "src" / "app.py").write_text("edited\n")
    guard.snap.write_tree()
    # The stat index rewritten behind our back (another version, a crash mid-flush): its
    # checksum no longer matches, so the git way runs and flushes.
    stat_index = guard.store.stat_index
    stat_index.write_bytes(stat_index.read_bytes()[:-20] + b"\x01" * 20)
    assert stat_tree.load(guard.store.root, stat_index) is None
    (repo / "README.md").write_text("changed\n")
    result = guard.snap.write_tree()
    assert result.tree == reference_tree(repo, tmp_path, result.skipped)


def _random_change(rng: random.Random, repo: Path, originals: dict[str, bytes]) -> str:
    files = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*")
                   if ".git" not in p.parts and (p.is_file() or p.is_symlink())
                   and "build" not in p.parts and p.name != ".env")
    kind = rng.choice(["edit", "edit", "new", "delete", "chmod", "revert", "link", "dir",
                       "big", "dep"])
    target = rng.choice(files)
    path = repo / target
    if kind == "edit" and not path.is_symlink():
        path.write_bytes(path.read_bytes() + b"x%d\n" % rng.randrange(1000))
    elif kind == "new":
        new = repo / rng.choice(["", "src/", "d1/", "d1/d2/"]) / f"n{rng.randrange(50)}.txt"
        new.parent.mkdir(parents=True, exist_ok=True)
        new.write_text(f"{rng.random()}\n")
    elif kind == "delete" and target != ".gitignore":
        path.unlink()
    elif kind == "chmod" and not path.is_symlink():
        os.chmod(path, path.stat().st_mode ^ 0o100)
    elif kind == "revert" and target in originals:
        path.unlink()
        path.write_bytes(originals[target])
        os.chmod(path, 0o644)
    elif kind == "link":
        link = repo / f"l{rng.randrange(5)}"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    elif kind == "dir":
        fresh = repo / f"fresh{rng.randrange(3)}" / "deep"
        fresh.mkdir(parents=True, exist_ok=True)
        (fresh / f"f{rng.randrange(9)}.py").write_text("1\n")
    elif kind == "big":
        (repo / f"big{rng.randrange(3)}.dat").write_bytes(b"b" * rng.choice([100, 5000]))
    elif kind == "dep":
        dep = repo / "d1" / "node_modules" / "pkg"
        dep.mkdir(parents=True, exist_ok=True)
        (dep / "index.js").write_text(f"{rng.random()}\n")
    return target


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_incremental_trees_equal_full_scans_after_random_edits(
        repo: Path, tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Scans and declared-only ends in a random order, the lag flushed now and then: every
    tree equals the throwaway index's, and the user's index never changes."""
    (repo / ".gitguard.toml").write_text("untracked_size_cap = 1000\n")
    for i in range(6):
        sub = repo / ("d1/d2" if i % 2 else "d1")
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"t{i}.txt").write_text(f"t{i}\n")
    before = _user_index(repo)
    rng = random.Random(seed)
    monkeypatch.setattr(stat_tree, "LAG_MAX", 12)     # flushes happen within the test
    guard = Guard.init(repo)
    guard.snap.write_tree()
    originals = {p.relative_to(repo).as_posix(): p.read_bytes() for p in repo.rglob("*")
                 if ".git" not in p.parts and p.is_file()}
    lagged = 0
    for _ in range(30):
        touched = [_random_change(rng, repo, originals) for _ in range(rng.randrange(1, 4))]
        if rng.random() < 0.4:
            # Only what was declared: the other changes wait for the next scan.
            guard.snap.write_declared(touched)
            continue
        result = guard.snap.write_tree()
        assert result.tree == reference_tree(repo, tmp_path, result.skipped)
        state = stat_tree.load(guard.store.root, guard.store.stat_index)
        lagged = max(lagged, len(state.lag) if state else 0)
    assert lagged > 0
    final = guard.snap.write_tree()
    assert final.tree == reference_tree(repo, tmp_path, final.skipped)
    assert _user_index(repo) == before


def test_a_lagging_path_that_did_not_change_is_not_reported_changed(repo: Path) -> None:
    # git status reports a lag path (the stat index is behind there) even when the file
    # is as the last tree has it: the snapshot must not count it as a change again.
    guard = Guard.init(repo)
    guard.checkpoint(kind="manual", step_id="s0")
    entry = guard.begin_call("Write", {"file_path": "notes.txt"}, writes=["notes.txt"])
    (repo / "notes.txt").write_text("agent\n")
    guard.end_call(entry.call_id, "succeeded", "ok")
    state = stat_tree.load(guard.store.root, guard.store.stat_index)
    assert state is not None and b"notes.txt" in state.lag

    again = guard.snap.write_tree()
    assert again.changed == () and again.tree == state.tree
    (repo / "src" / "app.py").write_text("the user's edit\n")
    assert guard.snap.write_tree().changed == ("src/app.py",)
