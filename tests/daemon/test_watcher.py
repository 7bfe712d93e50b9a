"""The real watcher (watchdog, inotify) in-process: what it reports, what it filters,
barriers, and no thread left behind."""

from __future__ import annotations

import os
import queue
import subprocess
import threading
from pathlib import Path

from gitguard.api import Guard
from gitguard.daemon.watcher import Raw, WatchdogSource
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


def test_barriers_rename_one_file_and_reuse_a_leftover(repo: Path) -> None:
    """Each barrier renames the one barrier file (no file made or removed per barrier);
    a file a killed daemon left is taken over, and stop removes it."""
    store = repo / ".git" / "gitguard"
    (store / "barrier").mkdir(parents=True)
    leftover = store / "barrier" / ".gg-barrier-1"
    leftover.write_bytes(b"")
    inode = leftover.stat().st_ino
    sink: queue.SimpleQueue[Raw] = queue.SimpleQueue()
    source = WatchdogSource(repo, store, sink)
    source.start()
    try:
        for token in (1, 2, 3):     # 1 is the leftover's own name: an attrib event
            (repo / "new.txt").write_text(str(token))
            seen = until_barrier(sink, source, token)
            assert b"new.txt" in {r.path for r in seen}
            files = os.listdir(store / "barrier")
            assert files == [f".gg-barrier-{token}"], files
            assert (store / "barrier" / files[0]).stat().st_ino == inode
    finally:
        source.stop()
    assert os.listdir(store / "barrier") == []
