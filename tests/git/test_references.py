"""Looking a reference or a tree path up by a name made at run time leaves nothing
behind: pygit2 (1.20, 1.21) keeps a reference to the str it is given, and the daemon
looks refs up by such names twice a call, and trees by path (git.objects.reference and
tree_entry intern them)."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pygit2

from gitguard.git.objects import file_at, reference, tree_entry

FRESH_STR_PER_LOOKUP = 60       # bytes a leaked name costs, at the least


def kept_by(lookup: Callable[[], None], times: int = 1000) -> int:
    """Bytes still held after `times` lookups (one first, so caches are warm)."""
    lookup()
    tracemalloc.start()
    try:
        for _ in range(times):
            lookup()
        gc.collect()
        return tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


def test_lookups_of_refs_by_fresh_names_keep_nothing(repo: Path) -> None:
    disk = pygit2.Repository(str(repo))
    branch = disk.head.shorthand

    def lookup() -> None:
        found = reference(disk, "refs/heads/" + branch)
        assert found is not None and found.target == disk.head.target
        assert reference(disk, "refs/gitguard/none/" + branch) is None

    assert kept_by(lookup) < 1000 * FRESH_STR_PER_LOOKUP // 4


def test_lookups_of_tree_paths_by_fresh_names_keep_nothing(repo: Path) -> None:
    root = pygit2.Repository(str(repo)).head.peel(pygit2.Commit).tree
    name = next(iter(root)).name
    assert name is not None

    def lookup() -> None:
        assert file_at(root, name[:1] + name[1:]) is not None
        assert file_at(root, "missing/" + name) is None
        tree_entry(root, name[:1] + name[1:])

    assert kept_by(lookup) < 1000 * FRESH_STR_PER_LOOKUP // 4
