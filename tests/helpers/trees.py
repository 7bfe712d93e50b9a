"""Helpers shared by the daemon-tree tests: a store and the daemon's incremental tree."""

from __future__ import annotations

from pathlib import Path

from gitguard.api import Guard
from gitguard.git.tree_build import IncrementalTree


def start(repo: Path) -> tuple[Guard, IncrementalTree]:
    """A new store on `repo` and an IncrementalTree seeded from its first full scan."""
    guard = Guard.init(repo)
    first = guard.snap.write_tree()
    inc = IncrementalTree(guard.snap.repo, str(repo), guard.settings.untracked_size_cap,
                          first.tree, first.skipped, store=guard.store,
                          skip_dirs=guard.settings.skip_dirs)
    return guard, inc
