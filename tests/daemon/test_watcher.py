"""The real watcher (watchdog, inotify) in-process: what it reports, what it filters,
barriers, and no thread left behind."""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from pathlib import Path

from gitguard.api import Guard
from gitguard.daemon.watcher import BARRIER_BATCH, IgnoredDirs, Raw, WatchdogSource
from gitguard.snapshot.daemon_snapshotter import diff_trees
from tests.helpers.commands import git


def until_barrier(sink: queue.SimpleQueue[Raw], source: WatchdogSource, token: int
                  ) -> list[Raw]:
    source.plant_barrier(token)
    seen: list[Raw] = []
    while True:
        item = sink.get(timeout=30)
        if item.kind == "barrier" and item.token == token:
            return seen
        if item.kind != "barrier":
            seen.append(item)


def test_events_filters_and_barriers(repo: Path) -> None:
    before = set(threading.enumerate())
    store = repo / ".git" / "gitguard"
    store.mkdir()
    sink: queue.SimpleQueue[Raw] = queue.SimpleQueue()
    source = WatchdogSource(repo, store, sink)
    source.start()
    try:
        assert source.watch_count() >= 3
        (repo / "new.txt").write_text("x")
        (repo / "src" / "app.py").write_text("changed\n")
        tmp = repo / ".README.md.swp"
        tmp.write_text("saved\n")
        os.replace(tmp, repo / "README.md")
        os.chmod(repo / "new.txt", 0o755)
        (repo / "sub").mkdir()
        (repo / "sub" / "f").write_text("f")
        git(repo, "status")                   # git's own files: filtered
        (repo / "src" / "app.py").unlink()
        seen = until_barrier(sink, source, 1)
        paths = {(r.kind, r.path) for r in seen}
        assert ("move_to", b"README.md") in paths
        assert ("attrib", b"new.txt") in paths and ("delete", b"src/app.py") in paths
        assert {p for _, p in paths} >= {b"new.txt", b"src/app.py", b"sub", b"sub/f"}
        assert not any(p.startswith(b".git") for _, p in paths)
        assert not any(r.kind in ("open", "close_nowrite") for r in seen)
        assert until_barrier(sink, source, 2) == [], "nothing happened since"
    finally:
        source.stop()
    assert set(threading.enumerate()) <= before, "the watcher left a thread running"


def test_a_linked_worktree_barrier_uses_the_gitfile(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(other), "-b", "side")
    guard = Guard.init(other)
    sink: queue.SimpleQueue[Raw] = queue.SimpleQueue()
    source = WatchdogSource(other, guard.store.root, sink)
    assert not source.barriers.in_tree
    source.start()
    try:
        (other / "wt.txt").write_text("in the worktree\n")
        seen = until_barrier(sink, source, 7)
        assert b"wt.txt" in {r.path for r in seen}
        assert b".git" not in {r.path for r in seen}
    finally:
        source.stop()


def test_in_process_diffs_equal_git_diff_tree(repo: Path) -> None:
    guard = Guard.init(repo)
    first = guard.snap.write_tree().tree
    os.remove(repo / "README.md")
    os.symlink("src/app.py", repo / "README.md")            # type change
    os.chmod(repo / "src" / "app.py", 0o755)
    (repo / "dir").mkdir()
    (repo / "dir" / "x").write_text("x")
    (repo / ".gitignore").unlink()
    second = guard.snap.write_tree().tree
    assert diff_trees(guard.snap.repo, first, second) == guard.snap.diff(first, second)
    assert diff_trees(guard.snap.repo, second, first) == guard.snap.diff(second, first)
    assert subprocess.run(["git", "cat-file", "-t", second], cwd=repo, capture_output=True,
                          text=True).stdout.strip() == "tree"


def test_barriers_create_a_file_each_and_clear_leftovers(repo: Path) -> None:
    """Each barrier is one new file named by its token (removed in batches); files a
    killed daemon left are cleared at start, and stop removes what is left."""
    store = repo / ".git" / "gitguard"
    (store / "barrier").mkdir(parents=True)
    (store / "barrier" / ".gg-barrier-41").write_bytes(b"")
    sink: queue.SimpleQueue[Raw] = queue.SimpleQueue()
    source = WatchdogSource(repo, store, sink)
    source.start()
    try:
        assert os.listdir(store / "barrier") == []
        for token in (1, 2, 3):
            (repo / "new.txt").write_text(str(token))
            seen = until_barrier(sink, source, token)
            assert b"new.txt" in {r.path for r in seen}
            assert sorted(os.listdir(store / "barrier")) == [
                f".gg-barrier-{t}" for t in range(1, token + 1)]
        for token in range(4, BARRIER_BATCH + 6):
            until_barrier(sink, source, token)
        assert len(os.listdir(store / "barrier")) <= BARRIER_BATCH, "removed in batches"
    finally:
        source.stop()
    assert os.listdir(store / "barrier") == []


def test_moves_are_paired_and_a_move_out_comes_before_the_barrier(repo: Path,
                                                                  tmp_path: Path) -> None:
    """A rename inside the workspace is a moved-from and a moved-to, one after the other;
    a file moved out of the workspace (watchdog holds its moved-from while it looks for
    the pair) still comes out before a barrier planted after it."""
    store = repo / ".git" / "gitguard"
    store.mkdir()
    sink: queue.SimpleQueue[Raw] = queue.SimpleQueue()
    source = WatchdogSource(repo, store, sink)
    source.start()
    try:
        os.rename(repo / "README.md", repo / "src" / "README.txt")
        os.rename(repo / "src", repo / "lib")
        seen = [(r.kind, r.path) for r in until_barrier(sink, source, 1)]
        first = seen.index(("move_from", b"README.md"))
        assert seen[first + 1] == ("move_to", b"src/README.txt"), seen
        at = seen.index(("move_from", b"src"))
        assert seen[at + 1] == ("move_to", b"lib"), seen
        assert not any(p.startswith(b"lib/") for _, p in seen), "a directory is one event"
        (repo / "lib" / "app.py").write_text("still watched after the move\n")
        os.rename(repo / "lib" / "README.txt", tmp_path / "outside.txt")
        seen = [(r.kind, r.path) for r in until_barrier(sink, source, 2)]
        assert ("move_from", b"lib/README.txt") in seen, seen
        assert ("close", b"lib/app.py") in seen, "the moved directory keeps its watch"
    finally:
        source.stop()


def test_what_happens_below_an_ignored_directory_never_reaches_the_queue(repo: Path) -> None:
    """An `npm install` into an ignored directory: the directory's own event reaches the
    worker (it decides), nothing below it does; a tracked directory is never dropped."""
    (repo / ".gitignore").write_text("node_modules/\nbuild/\n")
    (repo / "build").mkdir(exist_ok=True)
    (repo / "build" / "kept.txt").write_text("tracked inside an ignored name\n")
    git(repo, "add", "-f", ".gitignore", "build/kept.txt")
    git(repo, "commit", "-qm", "tracked build file")
    store = repo / ".git" / "gitguard"
    store.mkdir()
    sink: queue.SimpleQueue[Raw] = queue.SimpleQueue()
    source = WatchdogSource(repo, store, sink, ignored=IgnoredDirs(repo, repo))
    source.start()
    try:
        for package in range(20):
            deep = repo / "node_modules" / f"p{package}" / "lib"
            deep.mkdir(parents=True)
            for i in range(10):
                (deep / f"m{i}.js").write_text("module.exports = 1\n")
        (repo / "build" / "kept.txt").write_text("changed\n")
        paths = {r.path for r in until_barrier(sink, source, 1)}
        assert b"node_modules" in paths
        assert not any(p.startswith(b"node_modules/") for p in paths), sorted(paths)[:5]
        assert b"build/kept.txt" in paths
        assert source.unwatched() == {}
    finally:
        source.stop()


def test_a_nested_worktree_is_its_own_workspace(repo: Path) -> None:
    """Claude Code's `.claude/worktrees/NAME` (and a subagent's `isolation: "worktree"`) is
    a linked worktree inside this one: what happens in it never reaches this workspace's
    queue, nor does anything in a repository made in a directory already seen."""
    store = repo / ".git" / "gitguard"
    store.mkdir()
    sink: queue.SimpleQueue[Raw] = queue.SimpleQueue()
    source = WatchdogSource(repo, store, sink, ignored=IgnoredDirs(repo, repo))
    source.start()
    try:
        (repo / "later").mkdir()
        (repo / "later" / "before.txt").write_text("still this workspace's\n")
        assert b"later/before.txt" in {r.path for r in until_barrier(sink, source, 1)}
        nested = repo / ".claude" / "worktrees" / "agent-a1"
        git(repo, "worktree", "add", "-q", str(nested), "-b", "agent-a1")
        (nested / "sub.txt").write_text("the subagent's\n")
        (nested / "src" / "app.py").write_text("changed there\n")
        git(repo / "later", "init", "-q")
        (repo / "later" / "after.txt").write_text("the nested repository's\n")
        (repo / "mine.txt").write_text("the user's, here\n")
        paths = {r.path for r in until_barrier(sink, source, 2)}
        assert b"mine.txt" in paths
        assert not any(p.startswith(b".claude/worktrees/agent-a1/") for p in paths), paths
        assert b"later/after.txt" not in paths, paths
    finally:
        source.stop()
