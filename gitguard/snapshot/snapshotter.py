"""Snapshots of the whole workspace as commits under refs/gitguard/sessions/<id>.

Without the daemon, the first snapshot reads the user's index with one read-only
`git status` and builds its tree in-process (`first_scan`: no private index yet). Later
changed paths come from `git status` run against gitguard's own stat cache (a private
index file, made at the second scan as a byte copy of the user's index so it re-hashes
only what is dirty). Only changed paths are re-hashed: each new tree is the previous
one plus the changed paths, built in-process (`stat_tree`, with the daemon's
`tree_build`), and the stat index is updated only when enough paths lag behind (or
`git write-tree` runs when no state holds). The user's `.git/index` is only ever read.
The stat index also keeps git's untracked cache, so a scan stats unchanged
directories instead of reading them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

import pygit2

from gitguard import clock, faults
from gitguard.git.commands import run_git
from gitguard.git.objects import EMPTY_TREE, Change, TreeResult, file_at, reference
from gitguard.progress import Progress, quiet
from gitguard.settings import Settings
from gitguard.snapshot import stat_tree
from gitguard.snapshot.stat_scan import StatScan, gone_path
from gitguard.storage.store import Store

SESSION_REF = "refs/gitguard/sessions/"
AUTHOR = ("gitguard", "gitguard@localhost")


class Snapshotter(StatScan):
    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.ws = store.ws
        self.settings = settings

    @cached_property
    def repo(self) -> pygit2.Repository:
        repo = pygit2.Repository(str(self.ws.git_dir))
        if self.ws.is_git and repo.workdir is None:
            # GIT_DIR on a bare repository with GIT_WORK_TREE (a dotfiles set-up): libgit2
            # needs the working tree for ignore rules; set in memory, never in its config.
            repo.workdir = str(self.ws.root)
        return repo

    def write_tree(self, changed: list[bytes] | None = None,
                   progress: Progress = quiet) -> TreeResult:
        """The tree of the workspace now. `changed` skips the scan (the daemon knows it).
        `progress`: told of the scan, then of how many changed paths are stored."""
        try:
            return self._write_tree(changed, progress)
        finally:
            # git rewrites the stat index through a lock file with the umask's mode (0644):
            # whatever failed after that (write-tree on a full disk), it stays private, or
            # `verify` fails on it once space is back.
            with contextlib.suppress(OSError):
                self._keep_private(self.store.stat_index)

    def _write_tree(self, changed: list[bytes] | None, progress: Progress) -> TreeResult:
        started = time.perf_counter()
        skipped: list[str] = []
        if changed is None and not self.store.stat_index.exists() \
                and not stat_tree.path_of(self.store.root).exists():
            progress("first snapshot: scanning the workspace (git status)")
            first = self._first_snapshot(started, progress)
            if first is not None:
                return first
        # Read before the scan: the state must go with the stat index as we left it.
        state = self._lag_state()
        scanned = changed is None
        if changed is None or (state is None and stat_tree.path_of(self.store.root).exists()):
            # (Without a state of this index, lag paths are unknown: only a scan finds
            # every difference from the index.)
            progress("scanning the workspace (git status)")
            changed, skipped = self.scan()
            scanned = True
        else:
            self._seed_stat_cache()
        progress(f"storing {len(changed)} changed path(s)")
        fast = stat_tree.advance(self, state, changed, skipped) if state is not None else None
        if fast is not None:
            self._keep_private(self.store.stat_index)       # git status may rewrite it
            if scanned and self.untracked_dirs and state is not None:
                stat_tree.settle(self, state, self.untracked_dirs)
            return dataclasses.replace(fast, duration_ms=(time.perf_counter() - started) * 1000,
                                       bytes_hashed=self._sizes(changed),
                                       base=fast.base if scanned else None)
        if state is not None:
            # The lag paths too: the index then holds all of the new tree (the lag is
            # flushed). Those the scan did not report go in only when the last tree holds
            # them (then they stay, at any size, ignored or not, as a tracked file does) or
            # they are gone; any other one is out of the tree and, not being reported, out
            # of the index too or equal to it (ignored, too big, or put back as it was).
            extra = self._lag_to_flush(state, set(changed))
            changed = [*changed, *extra]
            skipped = [s for s in skipped if os.fsencode(s) not in set(extra)]
        tree = self._write_tree_git(changed, skipped if scanned else None)
        return TreeResult(tree=tree, changed=tuple(os.fsdecode(p) for p in changed),
                          skipped=tuple(skipped),
                          duration_ms=(time.perf_counter() - started) * 1000,
                          bytes_hashed=self._sizes(changed),
                          base=state.tree if (scanned and state is not None) else None)

    def ends_declared_calls_without_scan(self) -> bool:
        """Whether `write_declared` can skip the scan: not for a subclass with its own
        trees (the daemon's knows what changed without one)."""
        return type(self).write_tree is Snapshotter.write_tree

    def write_declared(self, paths: Sequence[str]) -> TreeResult:
        """The tree of the workspace after a declared-only call: the last tree plus the
        paths it declared, with no scan (O(declared)).

        Attribution without the daemon (DESIGN.md: pre to post snapshot = the call):
        a declared-only tool (`attribution.is_declared_only`: Write, Edit, MultiEdit,
        NotebookEdit, write_file) writes only the paths it declares, and an undeclared
        path that changed during a declared-only window is the user's. So the end
        snapshot looks at the declared paths only; any other path that changed during
        the call (the user's edit, or a tool that wrote elsewhere after all) is found by
        the next scan, between calls, and is the user's there: the daemon's rule, and
        the safe direction (rollback never reverts a user-owned path). The stat index
        is not touched, so that next scan still sees every change (`stat_tree`).
        A subclass with its own trees (the daemon's) and any case `stat_tree` leaves to git
        (no state yet, a declared directory, content filters) take the full scan.
        """
        state = self._lag_state()
        if not self.ends_declared_calls_without_scan() or state is None:
            return self.write_tree()
        started = time.perf_counter()
        root = os.fsencode(self.ws.root)
        raw = [os.fsencode(p) for p in paths]
        old = self.repo.get(state.tree)
        if not isinstance(old, pygit2.Tree) or any(os.path.isdir(os.path.join(root, p))
                                                   for p in raw):
            return self.write_tree()
        # The scan never lists a file under a new dependency dir (node_modules...): nor here.
        names = self.settings.skip_dirs
        kept = [p for p in raw if not in_new_skipped_dir(os.fsdecode(p), names, old)]
        fast = stat_tree.advance(self, state, kept, state.skipped)
        if fast is None:
            return self.write_tree()
        return dataclasses.replace(fast, duration_ms=(time.perf_counter() - started) * 1000,
                                   bytes_hashed=self._sizes(kept))

    def _first_snapshot(self, started: float, progress: Progress) -> TreeResult | None:
        """No stat index yet: one read-only status of the user's index (`first_scan`)."""
        from gitguard.snapshot.first_scan import (
            first_tree,  # it loads tree_build, which importing the snapshotter does not
        )

        first = first_tree(self, progress)
        if isinstance(first, TreeResult):
            return dataclasses.replace(
                first, duration_ms=(time.perf_counter() - started) * 1000,
                bytes_hashed=self._sizes([os.fsencode(p) for p in first.changed]), base=None)
        if first is None:
            return None
        # Scanned, not built: the git way on a copy of the very index git read, with
        # no second status (its changed paths are the copy's too).
        self._seed_stat_cache()
        if stat_tree.index_checksum(self.store.stat_index) != first.checksum:
            return None
        tree = self._write_tree_git(first.changed, first.skipped)
        return TreeResult(tree=tree, changed=tuple(map(os.fsdecode, first.changed)),
                          skipped=tuple(first.skipped),
                          duration_ms=(time.perf_counter() - started) * 1000,
                          bytes_hashed=self._sizes(first.changed))

    def scan_index(self) -> Path:
        """The index the last tree was scanned against: the private stat index once one
        exists, the user's own before that (a first snapshot reads it: `first_scan`)."""
        user = self.ws.user_index
        if self.store.stat_index.exists() or user is None or not user.exists():
            return self.store.stat_index
        return user

    def _lag_state(self) -> stat_tree.LagState | None:
        """The saved state when it goes with the stat index. A first snapshot's state goes
        with the user's index (`first_scan`): the stat index is first made here, as its byte
        copy, which has the same checksum while the user's index is unchanged."""
        if not self.store.stat_index.exists() and stat_tree.path_of(self.store.root).exists():
            self._seed_stat_cache()
        elif self.store.stat_index.exists():
            # A store from before the v4 seed (its copy stayed v2 until a lag flush): the
            # same rewrite once, and its state re-keyed (a header read per scan otherwise).
            self._seed_as_v4(self.store.stat_index)
        return stat_tree.load(self.store.root, self.store.stat_index)

    def _lag_to_flush(self, state: stat_tree.LagState, reported: set[bytes]) -> list[bytes]:
        old = self.repo.get(state.tree)
        root = os.fsencode(self.ws.root)
        return [p for p in sorted(state.lag - reported)
                if not isinstance(old, pygit2.Tree) or gone_path(root, p)
                or file_at(old, os.fsdecode(p)) is not None]

    def _write_tree_git(self, changed: list[bytes], skipped: list[str] | None) -> str:
        """The git way: update-index of the changed paths, write-tree; a fresh state (no
        lag) when a scan said what was skipped, else none (the index alone is the truth)."""
        gone = [p for p in changed if gone_path(os.fsencode(self.ws.root), p)]
        if gone:
            # git refuses to look beyond a symlink: a path under a directory that became a
            # link (or a file) must be force-removed, not re-examined.
            self._git(["update-index", *self._to_v4(), "--force-remove", "-z", "--stdin"],
                      stdin=b"\0".join(gone) + b"\0")
        present = [p for p in changed if p not in set(gone)] if gone else changed
        if present:
            self._git(["update-index", *self._to_v4(), "--add", "--remove", "--replace", "-z",
                       "--stdin"], stdin=b"\0".join(present) + b"\0")
        faults.point("snapshot.after_update_index")
        tree = self._git(["write-tree"]).decode().strip()
        self._keep_private(self.store.stat_index)
        if skipped is None:
            stat_tree.path_of(self.store.root).unlink(missing_ok=True)
        else:
            stat_tree.save(self.store.root, self.store.stat_index, tree, (), skipped, None)
        return tree

    def session_head(self, session_id: str) -> pygit2.Commit | None:
        ref = reference(self.repo, SESSION_REF + session_id)
        if ref is None:
            return None
        commit = self.repo.get(ref.target)
        return commit if isinstance(commit, pygit2.Commit) else None

    def commit(self, tree: str, session_id: str, meta: dict[str, object]) -> str:
        """A snapshot commit on the session's chain; reuses the head when nothing changed."""
        head = self.session_head(session_id)
        if head is not None and str(head.tree_id) == tree:
            return str(head.id)
        moment = clock.now()
        sig = pygit2.Signature(*AUTHOR, int(moment.timestamp()), 0)
        message = "gitguard snapshot\n\n" + json.dumps(meta, sort_keys=True) + "\n"
        parents = [head.id] if head is not None else []
        oid = self.repo.create_commit(None, sig, sig, message, pygit2.Oid(hex=tree), parents)
        faults.point("snapshot.before_ref")
        self.repo.references.create(SESSION_REF + session_id, oid, force=True)
        return str(oid)

    def diff(self, old_tree: str, new_tree: str) -> list[Change]:
        """`git diff-tree -r --no-renames --raw` in-process (`tree_diff`, the daemon's):
        O(changed paths), and no process per call end."""
        from gitguard.git.tree_diff import diff_trees

        return diff_trees(self.repo, old_tree, new_tree)

    def patch(self, old_tree: str, new_tree: str, paths: list[str] | None = None) -> bytes:
        """A unified diff `git apply -R` reverses (binary hunks included)."""
        args = ["diff-tree", "-p", "--binary", "--full-index", "--no-renames", "--no-color",
                old_tree, new_tree]
        if paths:
            args += ["--", *(":(literal)" + p for p in paths)]
        return run_git(args, git_dir=self.ws.git_dir).stdout

    def tree_of(self, commit: str) -> str:
        obj = self.repo.get(commit)
        if not isinstance(obj, pygit2.Commit):
            raise KeyError(commit)
        return str(obj.tree_id)

    def head_info(self) -> tuple[str | None, str | None]:
        """(HEAD commit, branch name) of the user's repository; (None, None) outside git."""
        if not self.ws.is_git:
            return None, None
        # HEAD read once and its branch once: head_is_unborn, head_is_detached and
        # repo.head each read and resolve them again (7 file reads; 2 checkpoints a call).
        # tests/snapshot/test_head_info.py compares this with those calls.
        head = self.repo.references.get("HEAD")
        if head is None:
            return None, None
        if head.type != pygit2.enums.ReferenceType.SYMBOLIC:
            return str(head.target), None                   # detached
        name = head.target
        found = reference(self.repo, name) if isinstance(name, str) else None
        if found is None:                                   # unborn
            return None, name.removeprefix("refs/heads/") if isinstance(name, str) else None
        resolved = found.resolve()
        return str(resolved.target), resolved.shorthand

    def dirty_against_head(self, tree: str, limit: int = 200) -> tuple[list[str], int]:
        """Paths where the snapshot differs from HEAD (all paths outside git)."""
        head, _ = self.head_info()
        base = self.tree_of(head) if head else EMPTY_TREE
        paths = [c.path for c in self.diff(base, tree)]
        return paths[:limit], len(paths)

    def dirty_since(self, before: tuple[str, tuple[str, ...], int], result: TreeResult,
                    head: str | None, limit: int = 200) -> tuple[list[str], int] | None:
        """`dirty_against_head` without a diff: the dirty paths of a snapshot taken against
        the same HEAD (`before`: its tree, dirty paths and count), re-checked along with the
        paths this scan changed. None when that does not apply: the scan did not start from
        that tree, the earlier list was cut at the limit, or a name is not UTF-8."""
        old_tree, old_dirty, old_count = before
        if result.base is None or result.base != old_tree or len(old_dirty) != old_count:
            return None
        new = self.repo.get(result.tree)
        base = self.repo.get(self.tree_of(head)) if head else None
        if not isinstance(new, pygit2.Tree) or not (base is None or isinstance(base, pygit2.Tree)):
            return None
        try:
            dirty = [p for p in {*old_dirty, *result.changed}
                     if file_at(base, p) != file_at(new, p)]
        except UnicodeEncodeError:
            return None
        # git's diff order: trees sort as "name/", which is the bytewise order of full paths.
        dirty.sort(key=os.fsencode)
        return dirty[:limit], len(dirty)

    def store_blob(self, data: bytes) -> str:
        return str(self.repo.create_blob(data))


def in_new_skipped_dir(rel: str, names: tuple[str, ...], tree: pygit2.Tree) -> bool:
    """Whether a path lies under a dependency/build directory (named in `names`) that
    `tree` holds nothing of: git status shows such a directory as one untracked entry,
    which the scan lists as skipped, and none of its files (nor does the daemon's
    `tree_build`). One the tree holds a directory of is an ordinary directory."""
    parts = rel.split("/")
    for depth in range(1, len(parts)):
        if parts[depth - 1] in names:
            try:
                held = tree["/".join(parts[:depth])]
            except KeyError:
                return True
            except ValueError:
                return False    # not UTF-8: the tree builder hands it to the full scan
            if held.type_str != "tree":
                return True     # a file there before: the directory is new
    return False


def workspace_path(store: Store, rel: str) -> Path:
    return store.ws.root / rel
