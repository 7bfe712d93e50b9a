"""Snapshot helpers that stay in-process for the daemon: tree diffs without a git subprocess."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pygit2

from gitguard.snapshot import Change, Snapshotter, TreeResult
from gitguard.treebuild import tree_of

if TYPE_CHECKING:
    from gitguard.engine import Engine

_FLAGS = pygit2.enums.DiffOption.INCLUDE_TYPECHANGE


def diff_trees(repo: pygit2.Repository, old: str, new: str) -> list[Change]:
    """What `git diff-tree -r --no-renames` reports, in-process."""
    if old == new:
        return []
    changes = []
    for delta in tree_of(repo, old).diff_to_tree(tree_of(repo, new), flags=_FLAGS).deltas:
        gone_old = delta.old_file.id.raw == b"\0" * 20
        gone_new = delta.new_file.id.raw == b"\0" * 20
        changes.append(Change(
            path=os.fsdecode(delta.new_file.raw_path if not gone_new
                             else delta.old_file.raw_path),
            status=delta.status_char(), old_mode=delta.old_file.mode,
            new_mode=delta.new_file.mode,
            old_oid=None if gone_old else str(delta.old_file.id),
            new_oid=None if gone_new else str(delta.new_file.id)))
    return changes


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


