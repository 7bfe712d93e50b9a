"""The private stat index: made at the second scan as a copy of the user's index rewritten
as v4 (`StatScan._seed_as_v4`), with the first snapshot's lag state re-keyed to it; and the
lag paths that keep a directory untracked there put into it (`stat_tree.settle`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gitguard.api import Guard
from gitguard.snapshot import stat_tree
from gitguard.snapshot.snapshotter import Snapshotter
from tests.helpers.commands import git
from tests.snapshot.test_first_scan import _mixed_user_state, copy_add_all_tree
from tests.snapshot.test_scan_equals_full_scan import reference_tree

V4 = b"DIRC\0\0\0\x04"


def _tree_of_index_plus(repo: Path, index: Path, tmp: Path, paths: frozenset[bytes]) -> str:
    """The tree of a copy of `index` with `paths` brought up to date (the lag flushed)."""
    copy = tmp / "flush.index"
    shutil.copyfile(index, copy)
    env = {**os.environ, "GIT_INDEX_FILE": str(copy)}
    if paths:
        subprocess.run(["git", "update-index", "--add", "--remove", "-z", "--stdin"], cwd=repo,
                       env=env, input=b"\0".join(sorted(paths)) + b"\0", check=True)
    return subprocess.run(["git", "write-tree"], cwd=repo, env=env, capture_output=True,
                          check=True).stdout.decode().strip()


def test_the_second_scan_makes_a_v4_copy_the_first_state_still_holds_for(
        repo: Path, tmp_path: Path) -> None:
    _mixed_user_state(repo)
    user = repo / ".git" / "index"
    user_bytes = user.read_bytes()
    assert user_bytes[:8] != V4
    guard = Guard.init(repo)
    first = guard.snap.write_tree()
    first_state = stat_tree.load(guard.store.root, user)
    assert first_state is not None and first_state.lag

    (repo / "src" / "app.py").write_text("later\n")
    again = guard.snap.write_tree()
    stat_index = guard.store.stat_index
    assert stat_index.read_bytes()[:8] == V4
    assert user.read_bytes() == user_bytes
    # The fast way ran on the converted copy (the state was re-keyed, not dropped) ...
    assert again.base == first.tree and again.changed == ("src/app.py",)
    state = stat_tree.load(guard.store.root, stat_index)
    assert state is not None and state.tree == again.tree
    # (new/ was an untracked directory the first tree held: settled into the index.)
    assert state.lag == {p for p in first_state.lag if not p.startswith(b"new/")} \
        | {b"src/app.py"}
    # ... and what it holds is what the git way computes: the same tree, and the stat
    # index's tree with the lag flushed is that tree (stat_tree's invariant).
    assert again.tree == copy_add_all_tree(repo, tmp_path, again.skipped)
    assert _tree_of_index_plus(repo, stat_index, tmp_path, state.lag) == again.tree
    # The re-keyed state right after the conversion said the same of the same entries.
    assert not list(guard.store.root.glob(".stat.index.*"))


def test_a_v4_user_index_is_copied_as_it_is(repo: Path, tmp_path: Path) -> None:
    git(repo, "update-index", "--index-version", "4")
    user_bytes = (repo / ".git" / "index").read_bytes()
    guard = Guard.init(repo)
    first = guard.snap.write_tree()
    (repo / "src" / "app.py").write_text("later\n")
    again = guard.snap.write_tree()
    assert guard.store.stat_index.read_bytes()[:8] == V4
    assert again.base == first.tree and again.changed == ("src/app.py",)
    assert again.tree == copy_add_all_tree(repo, tmp_path, again.skipped)
    assert (repo / ".git" / "index").read_bytes() == user_bytes


SCRIPT = """
import sys
from gitguard.api import Guard
with Guard.open(sys.argv[1]) as guard, guard.store.writing():
    guard.snap.write_tree()
"""


@pytest.mark.parametrize("point", ["stat.after_copy", "stat.after_convert",
                                   "stat.after_rekey", "stat.after_settle"])
def test_a_kill_while_seeding_leaves_a_correct_next_snapshot(
        repo: Path, tmp_path: Path, point: str) -> None:
    _mixed_user_state(repo)
    user_bytes = (repo / ".git" / "index").read_bytes()
    guard = Guard.init(repo)
    guard.snap.write_tree()
    (repo / "src" / "app.py").write_text("later\n")
    env = {**os.environ, "GITGUARD_FAULT": point, "GITGUARD_NO_DAEMON": "1"}
    killed = subprocess.run([sys.executable, "-c", SCRIPT, str(repo)], env=env,
                            capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    # The copy never took its name; or (settled: new/ is an untracked directory the first
    # tree holds) the stat index was rewritten and the state still names the one before.
    assert guard.store.stat_index.exists() == (point == "stat.after_settle")
    (repo / "new" / "deep" / "f.txt").write_text("after the kill\n")
    with Guard.open(repo) as fresh:
        result = fresh.snap.write_tree()
        stat_index = fresh.store.stat_index
        assert stat_index.read_bytes()[:8] == V4
        assert result.tree == copy_add_all_tree(repo, tmp_path, result.skipped)
        state = stat_tree.load(fresh.store.root, stat_index)
        assert state is not None and state.tree == result.tree
        assert _tree_of_index_plus(repo, stat_index, tmp_path, state.lag) == result.tree
        assert not list(fresh.store.root.glob(".stat.index.*"))
    assert (repo / ".git" / "index").read_bytes() == user_bytes


def _statuses(monkeypatch: pytest.MonkeyPatch, guard: Guard) -> list[tuple[str, ...]]:
    seen: list[tuple[str, ...]] = []
    real = type(guard.snap)._status

    def counted(self: Snapshotter, *args: str) -> bytes:
        seen.append(args)
        return real(self, *args)

    monkeypatch.setattr(type(guard.snap), "_status", counted)
    return seen


def test_an_untracked_directory_the_tree_holds_goes_into_the_stat_index(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`.claude/` after `integrate`: in the snapshot tree, not in the user's index. Once
    settled, a scan runs one status, not a second one for the collapsed directory, and the
    trees stay the git way's."""
    user_bytes = (repo / ".git" / "index").read_bytes()
    (repo / ".claude" / "commands").mkdir(parents=True)
    (repo / ".claude" / "settings.json").write_text('{"hooks": {}}\n')
    (repo / ".claude" / "commands" / "x.md").write_text("x\n")
    os.symlink("settings.json", repo / ".claude" / "link")
    guard = Guard.init(repo)
    statuses = _statuses(monkeypatch, guard)
    trees = [guard.snap.write_tree()]                   # the first: the user's index
    for step in range(4):
        (repo / "src" / "app.py").write_text(f"step {step}\n")
        if step == 2:       # the user edits a settled file: seen, as any tracked file
            (repo / ".claude" / "settings.json").write_text('{"hooks": {"a": 1}}\n')
        statuses.clear()
        trees.append(guard.snap.write_tree())
        result = trees[-1]
        assert result.tree == reference_tree(repo, tmp_path, result.skipped)
        state = stat_tree.load(guard.store.root, guard.store.stat_index)
        assert state is not None and state.tree == result.tree
        assert _tree_of_index_plus(repo, guard.store.stat_index, tmp_path, state.lag) \
            == result.tree
        # The second scan copies the index and finds .claude/ collapsed (it was lag since
        # the first); it settles it there, so every later scan runs a single status.
        assert len(statuses) == (2 if step == 0 else 1), (step, statuses)
        # (settings.json, edited at step 2, then lags as any edited tracked file does.)
        edited = {b".claude/settings.json"} if step >= 2 else set()
        assert {p for p in state.lag if p.startswith(b".claude/")} == edited
        if step == 2:
            assert "\n.claude/settings.json" in "\n" + "\n".join(result.changed)
    assert (repo / ".git" / "index").read_bytes() == user_bytes
    # A new file in the settled directory is a new untracked file, listed by the first
    # status (the directory is no longer collapsed).
    (repo / ".claude" / "new.md").write_text("new\n")
    statuses.clear()
    result = guard.snap.write_tree()
    assert result.changed == (".claude/new.md",) and len(statuses) == 1
    assert result.tree == reference_tree(repo, tmp_path, result.skipped)


def test_a_v2_stat_index_of_an_older_store_turns_v4_with_its_state(
        repo: Path, tmp_path: Path) -> None:
    """An older store's stat index stayed a v2 copy (with a state that goes with it) until
    a lag flush: the next scan rewrites it as v4 and the state still holds (fast way)."""
    guard = Guard.init(repo)
    guard.snap.write_tree()
    (repo / "src" / "app.py").write_text("one\n")
    guard.snap.write_tree()
    stat_index = guard.store.stat_index
    old = stat_tree.load(guard.store.root, stat_index)
    assert old is not None
    env = {**os.environ, "GIT_INDEX_FILE": str(stat_index)}
    subprocess.run(["git", "update-index", "--index-version", "2"], cwd=repo, env=env,
                   check=True)
    stat_tree.save(guard.store.root, stat_index, old.tree, old.lag, old.skipped, old.converting)
    assert stat_index.read_bytes()[:8] != V4
    (repo / "src" / "app.py").write_text("two\n")
    result = guard.snap.write_tree()
    assert stat_index.read_bytes()[:8] == V4
    assert stat_index.stat().st_mode & 0o777 == 0o600
    assert result.base == old.tree and result.changed == ("src/app.py",)
    assert result.tree == reference_tree(repo, tmp_path, result.skipped)
    state = stat_tree.load(guard.store.root, stat_index)
    assert state is not None and state.tree == result.tree
    assert _tree_of_index_plus(repo, stat_index, tmp_path, state.lag) == result.tree
