"""Looking a reference up by a name made at run time leaves nothing behind: pygit2 (1.21)
keeps a reference to the name str it is given, and the daemon looks refs up by such
names twice a call, and trees by path (git.objects.reference and tree_entry intern them)."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import pygit2

from gitguard.git.objects import file_at, reference, tree_entry


def test_a_thousand_lookups_by_fresh_names_keep_nothing(repo: Path) -> None:
    disk = pygit2.Repository(str(repo))
    branch = disk.head.shorthand
    reference(disk, "refs/heads/" + branch)
    reference(disk, "refs/gitguard/none/" + branch)
    tracemalloc.start()
    try:
        for _ in range(1000):
            found = reference(disk, "refs/heads/" + branch)
            assert found is not None and found.target == disk.head.target
            assert reference(disk, "refs/gitguard/none/" + branch) is None
        gc.collect()
        kept, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert kept < 16 * 1024, f"{kept} bytes kept: a str per lookup is ~130,000"


def test_a_thousand_tree_lookups_by_fresh_paths_keep_nothing(repo: Path) -> None:
    """The same for a path looked up in a tree (blob_at, file_at, entry_id_at)."""
    disk = pygit2.Repository(str(repo))
    root = disk.head.peel(pygit2.Commit).tree
    name = next(iter(root)).name
    assert name is not None
    tree_entry(root, name[:1] + name[1:])
    tracemalloc.start()
    try:
        for _ in range(1000):
            assert file_at(root, name[:1] + name[1:]) is not None
            assert file_at(root, "missing/" + name) is None
        gc.collect()
        kept, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert kept < 16 * 1024, f"{kept} bytes kept: a str per lookup is ~120,000"
