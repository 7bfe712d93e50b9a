"""The no-daemon scan's shortcuts (untracked cache on the stat index, the remembered tree
of an unchanged scan, the reused dirty summary) give exactly what a full scan gives: a
throwaway index, `git add -A`, `git write-tree`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gitguard.api import Guard
from gitguard.snapshot import stat_tree
from tests.helpers.commands import git


def reference_tree(repo: Path, tmp: Path, skipped: tuple[str, ...]) -> str:
    """The workspace's tree the slow way: HEAD's index, `add -A`, minus what was skipped."""
    env = {**os.environ, "GIT_INDEX_FILE": str(tmp / "throwaway.index")}

    def run(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True,
                              check=True).stdout.decode()

    run("read-tree", "HEAD")
    run("add", "-A")
    if skipped:
        run("rm", "-r", "-q", "--cached", "--ignore-unmatch", "--",
            *(":(literal)" + s.rstrip("/") for s in skipped))
    return run("write-tree").strip()


def tree_of(guard: Guard, checkpoint_id: str | None) -> str:
    return guard.snap.tree_of(guard.load_checkpoint(checkpoint_id or "").snapshot_commit)


def test_scans_after_a_mix_of_changes_equal_add_all(repo: Path, tmp_path: Path) -> None:
    (repo / ".gitguard.toml").write_text("untracked_size_cap = 1000\n")
    (repo / "docs").mkdir()
    for name in ("a.txt", "b.txt", "c.sh"):
        (repo / "docs" / name).write_text(f"{name}\n")
    (repo / "docs" / "big.bin").write_bytes(b"b" * 5000)     # tracked: kept at any size
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "more")
    user_index = (repo / ".git" / "index").read_bytes()
    guard = Guard.open(repo)
    guard.checkpoint(kind="manual", step_id="s0")

    def changes_0() -> None:
        (repo / "src" / "app.py").write_text("edited\n")
        os.remove(repo / "docs" / "a.txt")
        os.chmod(repo / "docs" / "c.sh", 0o755)
        os.symlink("docs/b.txt", repo / "link")
        (repo / "docs" / "big.bin").write_bytes(b"c" * 6000)

    def changes_1() -> None:
        new = repo / "fresh" / "deep" / "er"
        new.mkdir(parents=True)
        (new / "one.py").write_text("1\n")
        (repo / "fresh" / "huge.dat").write_bytes(b"h" * 5000)       # skipped: over the cap
        (repo / "fresh" / "node_modules" / "pkg").mkdir(parents=True)  # skipped: a dep dir
        (repo / "fresh" / "node_modules" / "pkg" / "index.js").write_text("x\n")
        (repo / "node_modules").mkdir()
        (repo / "node_modules" / "top.js").write_text("y\n")

    def changes_2() -> None:
        os.remove(repo / "docs" / "b.txt")                 # the link now dangles
        (repo / "docs" / "b.txt").mkdir()                  # a file became a directory
        (repo / "docs" / "b.txt" / "inner.txt").write_text("in\n")
        os.remove(repo / "link")
        os.symlink("src", repo / "link")                   # a link retargeted
        (repo / "src" / "app.py").write_text("edited\n")   # same bytes: a stat change only

    def changes_3() -> None:
        pass                                              # nothing: the remembered tree

    def changes_4() -> None:
        (repo / "build" / "out.bin").write_bytes(b"ignored, still out")
        (repo / "fresh" / "deep" / "er" / "one.py").unlink()
        (repo / "docs" / "b.txt" / "inner.txt").write_text("in, edited\n")
        os.symlink("nowhere", repo / "fresh" / "dangling")

    for step, change in enumerate((changes_0, changes_1, changes_2, changes_3, changes_4)):
        entry = guard.begin_call("run_command", {"command": f"step {step}"})
        change()
        done = guard.end_call(entry.call_id, "succeeded")
        post = guard.load_checkpoint(done.post_checkpoint_id or "")
        post_tree = tree_of(guard, done.post_checkpoint_id)
        assert post_tree == reference_tree(repo, tmp_path, post.skipped), step
        # The dirty summary carried over from the pre checkpoint is what a diff gives.
        assert (list(post.dirty), post.dirty_count) == guard.snap.dirty_against_head(post_tree)
        # The next begin finds nothing new: its tree is the post tree, its dirty summary
        # what a diff against HEAD gives.
        again = guard.begin_call("run_command", {"command": f"look {step}"})
        pre = guard.load_checkpoint(again.pre_checkpoint_id or "")
        assert pre.snapshot_commit == post.snapshot_commit
        fresh_dirty, fresh_count = guard.snap.dirty_against_head(tree_of(guard, pre.checkpoint_id))
        assert (list(pre.dirty), pre.dirty_count) == (fresh_dirty, fresh_count)
        guard.end_call(again.call_id, "succeeded")
        assert (repo / ".git" / "index").read_bytes() == user_index
        if step == 2:
            # The user commits: HEAD moves, so no earlier summary can be carried over.
            (repo / "README.md").write_text("# project\nthe user's line\n")
            git(repo, "commit", "-qm", "user's own", "--", "README.md")
            user_index = (repo / ".git" / "index").read_bytes()

    last = guard.checkpoints()[-1]
    assert set(guard.load_checkpoint(last.checkpoint_id).skipped) == {
        "fresh/huge.dat", "fresh/node_modules/", "node_modules/"}


def test_a_stat_index_changed_behind_its_back_is_not_trusted(repo: Path) -> None:
    """The remembered tree belongs to one exact index: another writer invalidates it."""
    guard = Guard.init(repo)
    guard.snap.write_tree()         # the first reads the user's index (first_scan)
    first = guard.snap.write_tree()     # the second makes the private stat index
    assert guard.store.stat_index.exists()
    (repo / "extra.txt").write_text("extra\n")
    env = {**os.environ, "GIT_INDEX_FILE": str(guard.store.stat_index)}
    subprocess.run(["git", "update-index", "--add", "extra.txt"], cwd=repo, env=env, check=True)
    again = guard.snap.write_tree()
    assert again.changed == () and again.tree != first.tree
    listing = git(repo, "ls-tree", "-r", "--name-only", again.tree).split()
    assert "extra.txt" in listing


def test_a_racily_clean_entry_of_the_users_index_is_still_compared(tmp_path: Path) -> None:
    """The stat cache starts as a copy of the user's index. An entry whose mtime is not older
    than that index file is racily clean: git compares its content. The copy must keep the
    index's mtime, or a same-size edit in the second of the user's last `git add` is trusted
    as clean and the snapshot keeps the old bytes."""
    repo = tmp_path / "racy"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "core.trustctime", "false")    # ctime cannot be set by a test
    target = repo / "a.txt"
    target.write_text("v1\n")
    stamp = 1_700_000_000
    os.utime(target, (stamp, stamp))
    git(repo, "add", "a.txt")
    git(repo, "commit", "-qm", "one")
    os.utime(repo / ".git" / "index", (stamp, stamp))  # written in the same second
    target.write_text("v2\n")                          # same size, same mtime
    os.utime(target, (stamp, stamp))
    assert git(repo, "--no-optional-locks", "status", "--porcelain") == " M a.txt\n"
    index_bytes = (repo / ".git" / "index").read_bytes()
    made = Guard.open(repo).checkpoint()
    assert git(repo, "show", f"{made.snapshot_commit}:a.txt") == "v2\n"
    assert (repo / ".git" / "index").read_bytes() == index_bytes


def _index_version(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[4:8], "big")


def test_the_stat_index_turns_v4_and_scans_the_same(repo: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The seed copies the user's index (v2) and rewrites the copy as v4, the smaller
    format, before it takes its name. A store from before (a v2 stat index with the old
    tree memo, no lag state) keeps working, its first update-index (a flush of the lag)
    rewrites it as v4, and every scan still equals `add -A` on a throwaway index."""
    user_index = (repo / ".git" / "index").read_bytes()
    guard = Guard.init(repo)
    stat_index = guard.store.stat_index
    guard.checkpoint(kind="manual", step_id="s0")
    assert not stat_index.exists()          # the first snapshot read the user's index
    (repo / "src" / "app.py").write_text("changed\n")
    (repo / "new.txt").write_text("new\n")
    first = guard.snap.write_tree()
    assert _index_version(stat_index) == 4          # the copy, rewritten before the scan
    assert _index_version(repo / ".git" / "index") == 2
    assert first.tree == reference_tree(repo, tmp_path, first.skipped)
    monkeypatch.setattr(stat_tree, "LAG_MAX", 0)      # any lag is too much: flush now
    assert guard.snap.write_tree().tree == first.tree
    assert _index_version(stat_index) == 4
    assert stat_index.stat().st_mode & 0o777 == 0o600
    monkeypatch.undo()
    # An old store: its stat index back in v2 and no lag state, as the old code left it.
    env = {**os.environ, "GIT_INDEX_FILE": str(stat_index)}
    subprocess.run(["git", "update-index", "--index-version", "2"], cwd=repo, env=env,
                   check=True)
    stat_tree.path_of(guard.store.root).unlink()
    assert _index_version(stat_index) == 2
    assert guard.snap.write_tree().tree == first.tree
    os.remove(repo / "new.txt")
    (repo / "docs").mkdir()
    (repo / "docs" / "x.md").write_text("x\n")
    later = guard.snap.write_tree()
    assert later.tree == reference_tree(repo, tmp_path, later.skipped)
    assert set(later.changed) == {"new.txt", "docs/x.md"}
    assert (repo / ".git" / "index").read_bytes() == user_index


def test_a_raw_diff_without_the_index_is_gits_diff(repo: Path) -> None:
    """`diff` tells git to read no index (it never needs one): the same changes as git's own
    diff-tree, which reads the user's index."""
    guard = Guard.init(repo)
    before = guard.snap.write_tree().tree
    (repo / "src" / "app.py").write_text("changed\n")
    (repo / "added.txt").write_text("a\n")
    after = guard.snap.write_tree().tree
    changes = guard.snap.diff(before, after)
    plain = git(repo, "diff-tree", "-r", "--no-renames", "--name-status", before, after)
    assert [f"{c.status}\t{c.path}" for c in changes] == plain.splitlines()
    assert not (guard.store.root / "no-index").exists()
