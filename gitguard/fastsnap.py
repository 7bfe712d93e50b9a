"""Snapshot helpers that stay in-process for the daemon: tree diffs without a git subprocess."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pygit2

from gitguard.snapshot import Change, Snapshotter, TreeResult
from gitguard.treediff import diff_trees

__all__ = ["DaemonSnapshotter", "blob_at", "diff_trees"]

if TYPE_CHECKING:
    from gitguard.engine import Engine


class DaemonSnapshotter(Snapshotter):
    """A Snapshotter whose trees come from the engine and whose diffs stay in-process."""

    engine: Engine

    def write_tree(self, changed: list[bytes] | None = None) -> TreeResult:
        if changed is None:
            return self.engine.tree_now()
        return super().write_tree(changed)

    def diff(self, old_tree: str, new_tree: str) -> list[Change]:
        return diff_trees(self.repo, old_tree, new_tree)


def blob_at(repo: pygit2.Repository, tree: pygit2.Tree, path: str) -> bytes | None:
    try:
        obj = repo[tree[path].id]
    except (KeyError, ValueError):
        return None
    return bytes(obj.data) if isinstance(obj, pygit2.Blob) else None


