"""Editing git trees in memory: a tree with some paths set or removed, path lookups.

Used where gitguard builds a tree from another plus a few changed paths without a
working tree or an index: the safety and post trees of a rollback, conflict
resolutions (fileops reads and writes the files; this module only builds trees).

The trees come from libgit2's TreeBuilder: a rollback edits a few paths once, where
the daemon's hand-written trees (`tree_build`) pay off only at every snapshot's hundreds
of trees (see its docstring). Only a level whose changed names are not UTF-8 (which
TreeBuilder cannot take) is written in git's raw format (`objects.tree_bytes`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

import pygit2

from gitguard.fileops import FileState
from gitguard.git.objects import (
    EXECUTABLE,
    GITLINK,
    LINK,
    REGULAR,
    TREE,
    TREE_TYPE,
    as_tree,
    entry_of,
    tree_bytes,
    tree_order,
)


def _write_tree(repo: pygit2.Repository, entries: dict[bytes, tuple[int, pygit2.Oid]]
                ) -> pygit2.Oid:
    raw = {name: entry_of(b"%o" % mode, name, oid.raw) for name, (mode, oid) in entries.items()}
    return repo.odb.write(TREE_TYPE, tree_bytes(dict(sorted(raw.items(), key=tree_order))))


def _entries(tree: pygit2.Tree | None) -> dict[bytes, tuple[int, pygit2.Oid]]:
    if tree is None:
        return {}
    return {bytes(entry.raw_name or b""): (entry.filemode, entry.id) for entry in tree}


def tree_with(repo: pygit2.Repository, base: str,
              changes: Mapping[str, FileState | None]) -> str:
    """`base` with each changed path set to its state (None removes it); empty trees vanish.

    A change that `base` already holds is dropped first: rebuilding the directories above a
    path costs a tree write per level, and a rollback's safety tree usually equals the latest
    snapshot's (the agent's post checkpoint), so then nothing is written at all.
    """
    tree = as_tree(repo, base)
    # A change above or below another one is kept: together they act differently (a file
    # set at a directory's name wins over changes below it).
    above = {q for p in changes for q in _parents(p)}
    needed = {p: s for p, s in changes.items()
              if p in above or any(q in changes for q in _parents(p)) or not _holds(tree, p, s)}
    if not needed:
        return base
    return _tree_with(repo, tree, needed)


def _parents(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[:depth]) for depth in range(1, len(parts))]


def _holds(tree: pygit2.Tree, rel: str, state: FileState | None) -> bool:
    """Whether applying `rel` -> `state` to `tree` would change nothing (False when unsure)."""
    try:
        entry = tree[rel]
    except KeyError:
        if state is not None:
            return False
        # Removing below a file removes that file (see _apply); below nothing it is a no-op.
        for parent in _parents(rel):
            try:
                if tree[parent].filemode != TREE:
                    return False
            except KeyError:
                return True
        return True
    except ValueError:
        return False
    if state is None:
        return entry.filemode == TREE    # _apply never removes a directory for a None change
    return entry.filemode == state.mode and str(entry.id) == state.oid


def _tree_with(repo: pygit2.Repository, tree: pygit2.Tree,
               changes: Mapping[str, FileState | None]) -> str:
    """Every change applied, none skipped: the reference `tree_with` must equal (tests)."""
    split = {tuple(os.fsencode(p).split(b"/")): s for p, s in changes.items()}
    result = _apply(repo, tree, split)
    return str(result) if result is not None else str(_write_tree(repo, {}))


def _utf8(name: bytes) -> bool:
    try:
        name.decode()
    except UnicodeDecodeError:
        return False
    return True


class _Level:
    """One directory of a tree being edited: pygit2's TreeBuilder (fast, in C) unless a name
    being changed is not UTF-8, which TreeBuilder cannot take; then raw entries."""

    def __init__(self, repo: pygit2.Repository, tree: pygit2.Tree | None,
                 names: Iterable[bytes]) -> None:
        self.repo = repo
        self.tree = tree
        self.raw = None if all(_utf8(n) for n in names) else _entries(tree)
        self.builder = (None if self.raw is not None else
                        repo.TreeBuilder(tree) if tree is not None else repo.TreeBuilder())

    def original(self, name: bytes) -> tuple[int, pygit2.Oid] | None:
        """Mode and id of an entry before this level changed it."""
        if self.raw is not None:
            return self.raw.get(name)
        if self.tree is None:
            return None
        key = name.decode()
        if key not in self.tree:
            return None
        entry = self.tree[key]
        return entry.filemode, entry.id

    def put(self, name: bytes, mode: int, oid: pygit2.Oid) -> None:
        if self.raw is not None:
            self.raw[name] = (mode, oid)
        else:
            assert self.builder is not None
            self.builder.insert(name.decode(), oid, mode)

    def drop(self, name: bytes) -> None:
        if self.raw is not None:
            self.raw.pop(name, None)
            return
        assert self.builder is not None
        if self.builder.get(name.decode()) is not None:
            self.builder.remove(name.decode())

    def write(self) -> pygit2.Oid | None:
        if self.raw is not None:
            return _write_tree(self.repo, self.raw) if self.raw else None
        assert self.builder is not None
        return self.builder.write() if len(self.builder) else None


def _apply(repo: pygit2.Repository, tree: pygit2.Tree | None,
           changes: Mapping[tuple[bytes, ...], FileState | None]) -> pygit2.Oid | None:
    level = _Level(repo, tree, {parts[0] for parts in changes})
    nested: dict[bytes, dict[tuple[bytes, ...], FileState | None]] = {}
    for parts, state in changes.items():
        if len(parts) > 1:
            nested.setdefault(parts[0], {})[parts[1:]] = state
    for name, sub in nested.items():
        if changes.get((name,)) is not None:
            continue   # a file took the directory's place: it is set below
        current = level.original(name)
        subtree = as_tree(repo, current[1]) if current and current[0] == TREE else None
        oid = _apply(repo, subtree, sub)
        if oid is None:
            level.drop(name)
        else:
            level.put(name, TREE, oid)
    for parts, state in changes.items():
        if len(parts) != 1:
            continue
        if state is not None:
            level.put(parts[0], state.mode, pygit2.Oid(hex=state.oid))
            continue
        current = level.original(parts[0])
        if current is not None and current[0] != TREE and parts[0] not in nested:
            level.drop(parts[0])   # a directory at this name is not what is being removed
    return level.write()


def lookup(repo: pygit2.Repository, tree: str | pygit2.Tree, rel: str) -> FileState | None:
    """The blob state of a path in a tree; a directory there counts as none.

    Pass a parsed Tree when looking up many paths: a large root tree is not in libgit2's
    object cache and would be parsed again for every path.
    """
    obj = tree if isinstance(tree, pygit2.Tree) else as_tree(repo, tree)
    try:
        entry = obj[rel]
    except (KeyError, ValueError):
        return None
    if entry.filemode in (REGULAR, EXECUTABLE, LINK):
        return FileState(str(entry.id), entry.filemode)
    if entry.filemode == GITLINK:
        return FileState(str(entry.id), GITLINK)
    return None


def blob_holder(repo: pygit2.Repository, blob_ids: Iterable[str],
                base: pygit2.Tree | None = None) -> pygit2.Oid | None:
    """A tree that keeps blobs reachable: `base`'s blobs plus `blob_ids`, each at
    `<first two hex digits>/<the rest>` (a fan-out, so no level grows past a few hundred
    entries). None when `base` already holds every one of them."""
    fanout: dict[str, list[str]] = {}
    for oid in dict.fromkeys(blob_ids):
        sub = base[oid[:2]] if base is not None and oid[:2] in base else None
        if not (isinstance(sub, pygit2.Tree) and oid[2:] in sub):
            fanout.setdefault(oid[:2], []).append(oid)
    if not fanout:
        return None
    root = repo.TreeBuilder(base) if base is not None else repo.TreeBuilder()
    for prefix, oids in sorted(fanout.items()):
        existing = base[prefix] if base is not None and prefix in base else None
        sub_builder = (repo.TreeBuilder(existing) if isinstance(existing, pygit2.Tree)
                       else repo.TreeBuilder())
        for oid in oids:
            sub_builder.insert(oid[2:], pygit2.Oid(hex=oid), REGULAR)
        root.insert(prefix, sub_builder.write(), TREE)
    return root.write()
