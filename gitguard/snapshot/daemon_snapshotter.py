"""Snapshot helpers that stay in-process for the daemon: tree diffs without a git subprocess."""

from __future__ import annotations

import bisect
import contextlib
import json
import os
from typing import TYPE_CHECKING

import pygit2

from gitguard import clock, faults
from gitguard.git import pack_writer
from gitguard.git.objects import COMMIT_TYPE, EMPTY_TREE, Change, TreeResult, file_at, object_id
from gitguard.git.tree_diff import diff_trees
from gitguard.progress import Progress, quiet
from gitguard.snapshot.snapshotter import AUTHOR, SESSION_REF, Snapshotter

__all__ = ["DaemonSnapshotter", "diff_trees"]

if TYPE_CHECKING:
    from gitguard.daemon.engine import Engine


class DaemonSnapshotter(Snapshotter):
    """A Snapshotter whose trees come from the engine and whose diffs stay in-process.

    It also keeps the whole dirty set (paths where the newest snapshot differs from
    HEAD), not only the first 200 a checkpoint stores: the next checkpoint's summary is
    that set updated at the paths this snapshot changed, O(changed). Without it, once
    200 paths were dirty every checkpoint diffed HEAD against the snapshot, a walk of
    every directory holding a dirty path (per call 138 -> 182 ms from 600 to 1,000
    dirty files at 100k)."""

    engine: Engine
    _dirty: _DirtySet | None = None
    _session_refs: SessionRefs | None = None

    def dirty_against_head(self, tree: str, limit: int = 200) -> tuple[list[str], int]:
        head, _ = self.head_info()
        paths = [c.path for c in self.diff(self.tree_of(head) if head else EMPTY_TREE, tree)]
        self._dirty = _DirtySet(tree, head, paths)
        return paths[:limit], len(paths)

    def dirty_since(self, before: tuple[str, tuple[str, ...], int], result: TreeResult,
                    head: str | None, limit: int = 200) -> tuple[list[str], int] | None:
        known, self._dirty = self._dirty, None
        if known is None or known.tree != before[0] or known.head != head:
            found = super().dirty_since(before, result, head, limit)
            if found is not None and len(found[0]) == found[1]:     # the whole set
                self._dirty = _DirtySet(result.tree, head, found[0])
            return found
        new = self.repo.get(result.tree)
        base = self.repo.get(self.tree_of(head)) if head else None
        if not isinstance(new, pygit2.Tree) or not (base is None or isinstance(base, pygit2.Tree)):
            return None
        try:
            # Elsewhere the new tree equals the old one, so whether it differs from HEAD
            # is what it was.
            for change in self.diff(known.tree, result.tree):
                known.mark(change.path, file_at(base, change.path) != file_at(new, change.path))
        except UnicodeEncodeError:
            return None
        known.tree = result.tree
        self._dirty = known
        return known.first(limit), len(known.keys)

    def write_tree(self, changed: list[bytes] | None = None,
                   progress: Progress = quiet) -> TreeResult:
        if changed is None:
            return self.engine.tree_now()     # current already: nothing long to tell
        return super().write_tree(changed, progress)

    def diff(self, old_tree: str, new_tree: str) -> list[Change]:
        return diff_trees(self.repo, old_tree, new_tree)

    def commit(self, tree: str, session_id: str, meta: dict[str, object]) -> str:
        """`Snapshotter.commit` with the commit object written like the trees
        (`pack_writer.write_loose`): the same bytes as libgit2's `create_commit`, without
        its existence checks, pack-directory rescan and temp file, link and unlink.
        The session ref is read and written by hand too (`SessionRefs`), falling back
        to libgit2 wherever git's semantics need more than a loose ref file."""
        objects = pack_writer.loose_dir(self.repo, self.store)
        if objects is None:
            return super().commit(tree, session_id, meta)
        refs = self._refs(objects)
        head = refs.read(session_id)
        if head is None:
            found = self.session_head(session_id)       # packed, symbolic or missing
            head = (str(found.id), str(found.tree_id)) if found is not None else None
        if head is not None and head[1] == tree:
            return head[0]
        message = "gitguard snapshot\n\n" + json.dumps(meta, sort_keys=True) + "\n"
        data = commit_bytes(tree, [head[0]] if head is not None else [],
                            int(clock.now().timestamp()), message)
        oid = object_id(COMMIT_TYPE, data)
        pack_writer.write_loose(objects, oid, COMMIT_TYPE, data,
                                pack_writer.spares_of(self.store))
        faults.point("snapshot.before_ref")
        if not refs.write(session_id, oid.hex(), tree):
            self.repo.references.create(SESSION_REF + session_id, pygit2.Oid(raw=oid),
                                        force=True)
        return oid.hex()

    def _refs(self, objects: bytes) -> SessionRefs:
        found = self._session_refs
        if found is None or found.objects != objects:
            found = self._session_refs = SessionRefs(self.repo, objects)
        return found


class _DirtySet:
    """The paths where a tree differs from HEAD, kept in git's diff order as they change.

    Sorting the whole set at every checkpoint cost ~1 ms a call once an agent had left
    1,000 files differing from HEAD (a long session: 300,000 `os.fsencode` calls per 300
    calls); a bisect per changed path keeps it O(changed)."""

    def __init__(self, tree: str, head: str | None, paths: list[str]) -> None:
        self.tree = tree
        self.head = head
        # git's diff order: trees sort as "name/", which is the bytewise order of full paths.
        self.keys = sorted((os.fsencode(p), p) for p in paths)

    def mark(self, path: str, dirty: bool) -> None:
        key = (os.fsencode(path), path)
        at = bisect.bisect_left(self.keys, key)
        present = at < len(self.keys) and self.keys[at] == key
        if dirty and not present:
            self.keys.insert(at, key)
        elif present and not dirty:
            del self.keys[at]

    def first(self, limit: int) -> list[str]:
        return [path for _, path in self.keys[:limit]]


class SessionRefs:
    """Session refs as loose ref files, read and written as git does, without libgit2.

    libgit2's `references.create` took ~25 system calls per snapshot: three config
    stats, a read of the new commit back to check it exists, packed-refs and lock
    checks, a read of the old value, a reflog stat, a link that fails then a rename.
    Measured again for #22 (400 snapshot commits on a loaded 2-core machine): with
    `references.create` a daemon snapshot's commit and ref took 3.5-4.0 ms of wall and
    0.8-1.0 ms of CPU, by hand 2.8-3.0 ms and 0.6-0.7 ms; the 1-file snapshot core is
    1-4 ms in all.
    Here: the lock file made with O_EXCL, written, renamed over the ref (git's lock
    protocol, the same two directory updates), after one stat for a reflog.

    `write` returns False, and the caller goes through libgit2, when git would do
    more: a reflog exists or `core.logAllRefUpdates=always` (libgit2 appends to it),
    or the lock is held (libgit2 reports it). `read` returns None when the ref is not
    a plain loose ref (missing, only in packed-refs, symbolic): the caller asks
    libgit2. A loose ref overrides a packed one, as in git, so after `git pack-refs`
    the next write makes the ref loose again. The trees of the commits written here
    are remembered: the next snapshot's "nothing changed?" check reads no object."""

    def __init__(self, repo: pygit2.Repository, objects: bytes) -> None:
        self.repo = repo
        self.objects = objects
        common = os.path.dirname(objects)
        self.refs = os.path.join(common, os.fsencode(SESSION_REF))
        self.logs = os.path.join(common, b"logs", os.fsencode(SESSION_REF))
        self.trees: dict[str, str] = {}         # commit written here -> its tree
        try:
            always = str(repo.config["core.logAllRefUpdates"]).lower() == "always"
        except KeyError:
            always = False
        self.log_all = always

    def read(self, session_id: str) -> tuple[str, str] | None:
        """(commit, tree) the loose ref names, when it is a loose ref to a commit."""
        try:
            with open(os.path.join(self.refs, os.fsencode(session_id)), "rb") as fh:
                value = fh.read(128).strip().decode("ascii")
        except (OSError, UnicodeDecodeError):
            return None
        if len(value) != 40 or value.startswith("ref:"):
            return None
        tree = self.trees.get(value)
        if tree is None:
            obj = self.repo.get(value)
            if not isinstance(obj, pygit2.Commit):
                return None
            tree = str(obj.tree_id)
        return value, tree

    def write(self, session_id: str, commit: str, tree: str) -> bool:
        """Point the session's ref at `commit` (of `tree`); False: leave it to libgit2."""
        name = os.fsencode(session_id)
        if self.log_all or os.path.lexists(os.path.join(self.logs, name)):
            return False
        path = os.path.join(self.refs, name)
        lock = path + b".lock"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        try:
            fd = os.open(lock, flags, 0o666)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(lock), exist_ok=True)
            fd = os.open(lock, flags, 0o666)
        except FileExistsError:
            return False
        try:
            try:
                os.write(fd, commit.encode() + b"\n")
            finally:
                os.close(fd)
            os.replace(lock, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(lock)
            raise
        if len(self.trees) > 1000:
            self.trees.clear()
        self.trees[commit] = tree
        return True


def commit_bytes(tree: str, parents: list[str], when: int, message: str) -> bytes:
    """A commit object as libgit2 writes one for `pygit2.Signature(*AUTHOR, when, 0)` as
    author and committer."""
    who = f"{AUTHOR[0]} <{AUTHOR[1]}> {when} +0000"
    lines = [f"tree {tree}", *(f"parent {p}" for p in parents), f"author {who}",
             f"committer {who}", "", message]
    return "\n".join(lines).encode()


