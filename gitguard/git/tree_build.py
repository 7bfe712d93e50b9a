"""O(changed) snapshot trees: the previous tree plus the changed paths, nothing else.

The daemon knows which paths changed, so it rebuilds only the tree objects on the
way from the root to each of them (pygit2 TreeBuilder); every untouched subtree is
reused by id. The rules are those of the full scan (`Snapshotter.scan`, git status
against gitguard's stat index), so both give the same tree:

* a path already in the previous tree stays tracked, ignored or not, any size;
* a new path is left out when git ignores it, and listed as skipped when it is a
  regular file above the size cap;
* a new directory named in skip_dirs (node_modules, .venv, ...) is left out and listed
  as skipped (`node_modules/`), with everything in it, unless git ignores it (then it
  is not listed); one the previous tree holds files of is an ordinary directory;
* `.git` (and the non-git store) never enter; a nested repository is left out, a
  submodule (gitlink) is kept as it is; fifos and sockets are not files;
* the executable bit is the owner's x bit; a symlink is a blob of its target.

Trees are read as raw bytes from the repository (its packs, its cache), kept parsed
between advances, and the new ones are written here in git's format, their ids
computed with hashlib (`objects.object_id`): libgit2 TreeBuilders through an in-memory ODB
re-read every tree through Python callbacks, ~40% of a 100-file snapshot at 100k.
The new objects then go to the repository loose when few, else as one pack
(`pack_writer.write_objects`). Entries never touched keep their bytes (mode, name).

A changed path whose name is not UTF-8 raises `NeedsFullScan` (the ignore rules are
asked through pygit2, which takes str) and the caller falls back to git. Content that
git converts on the way in (text/eol/filter attributes, core.autocrlf; see
`needs_git_filters`) is left to git altogether: blobs here are the bytes on disk.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field

import pygit2

from gitguard.git import pack_writer
from gitguard.git.filters import converting_attributes as converting_attributes
from gitguard.git.filters import converts_content as converts_content
from gitguard.git.filters import needs_git_filters as needs_git_filters
from gitguard.git.objects import BLOB_TYPE as _BLOB_T
from gitguard.git.objects import (
    EXECUTABLE,
    GITLINK,
    GITLINK_MODE,
    LINK,
    NOTHING_THERE,
    REGULAR,
    TREE_MODES,
    Entries,
    Entry,
    TreeResult,
    entry_of,
    is_tree,
    object_id,
    parse_tree,
    tree_bytes,
    tree_order,
)
from gitguard.git.objects import TREE_TYPE as _TREE_T
from gitguard.storage.store import Store


class NeedsFullScan(Exception):
    """This change cannot be applied incrementally; a full scan must build the tree."""


CACHED_TREES = 4_000    # parsed trees kept between advances: ~5 KiB each at 100k files


@dataclass(frozen=True)
class Leaf:
    oid: bytes                  # raw 20-byte id
    mode: int


@dataclass
class _Node:
    """One directory level of pending updates."""

    children: dict[bytes, _Node] = field(default_factory=dict)
    leaf: Leaf | None = None       # the path is now this blob
    delete: bool = False           # the path (blob or whole subtree) is gone
    replace: bool = False          # the subtree is rebuilt from `children` alone

    @property
    def terminal(self) -> bool:
        return self.leaf is not None or self.delete


class IncrementalTree:
    """The workspace tree as last written, advanced by changed paths only."""

    def __init__(self, repo: pygit2.Repository, root: str, size_cap: int, tree: str,
                 skipped: Iterable[str], store_names: Iterable[bytes] = (b".git",),
                 store: Store | None = None, skip_dirs: Iterable[str] = ()) -> None:
        self.repo = repo
        self.store = store
        self.root = os.fsencode(root)
        self.size_cap = size_cap
        self.tree = tree
        self.skipped = set(skipped)
        self.store_names = frozenset(store_names)
        self.skip_dirs = frozenset(os.fsencode(n) for n in skip_dirs)
        self._parsed: dict[bytes, Entries] = {}     # raw tree id -> its entries
        self._new: dict[bytes, tuple[int, bytes]] = {}
        self._dirs: dict[bytes, bool] = {}          # this advance: is it a real directory
        self._shown: dict[bytes, bool] = {}         # this advance: would git status show it

    # --- public ------------------------------------------------------------------------
    def advance(self, changed: Iterable[bytes]) -> TreeResult:
        paths = sorted({p.rstrip(b"/") for p in changed if p.strip(b"/")})
        for path in paths:
            try:
                path.decode()
            except UnicodeDecodeError:
                raise NeedsFullScan(f"{path!r} is not UTF-8") from None
        base = bytes.fromhex(self.tree)
        self._entries: dict[bytes, Entry | None] = {b"": entry_of(TREE_MODES[0], b"", base)}
        self._dirs = {b"": True}
        self._shown = {}
        if len(self._parsed) > CACHED_TREES:
            self._parsed.clear()
        top = _Node()
        try:
            for path in paths:
                self._resolve(path, top)
            built = self._build(base, self._tree(base), top)
            if built is None:
                built = self._hold(_TREE_T, b"")
            pack_writer.write_objects(self.repo, self.store,
                                      [(oid, kind, data) for oid, (kind, data)
                                       in self._new.items()])
        finally:
            self._new.clear()       # written, or named by nothing
        new_tree = built.hex()
        self.tree = new_tree
        return TreeResult(tree=new_tree, changed=tuple(os.fsdecode(p) for p in paths),
                          skipped=tuple(sorted(self.skipped)))

    def tracked(self, path: bytes) -> bool:
        """Whether the last tree has an entry (file, link, submodule, directory) at `path`:
        read from the parsed trees, no ignore-rule lookup."""
        entry: Entry = entry_of(TREE_MODES[0], b"", bytes.fromhex(self.tree))
        for name in path.split(b"/"):
            if not is_tree(entry):
                return False
            found = self._tree(entry[-20:]).get(name)
            if found is None:
                return False
            entry = found
        return True

    # --- the previous trees, as raw bytes --------------------------------------------------
    def _tree(self, oid: bytes) -> Entries:
        found = self._parsed.get(oid)
        if found is None:
            kind, data = self.repo.odb.read(pygit2.Oid(raw=oid))
            if int(kind) != _TREE_T:
                raise KeyError(f"{oid.hex()} is not a tree")
            found = self._parsed[oid] = parse_tree(data)
        return found

    def _at(self, path: bytes) -> Entry | None:
        """The previous tree's entry at `path`, remembered for this advance: every path
        asks about each of its ancestors (`_under_gitlink`), and siblings share them."""
        try:
            return self._entries[path]
        except KeyError:
            pass
        parent, _, name = path.rpartition(b"/")
        above = self._at(parent)
        found = None
        if above is not None and is_tree(above):
            found = self._tree(above[-20:]).get(name)
        self._entries[path] = found
        return found

    # --- deciding what each path is now -------------------------------------------------
    def _resolve(self, path: bytes, top: _Node) -> None:
        parts = path.split(b"/")
        if parts[0] in self.store_names or b".git" in parts[1:] or self._under_gitlink(parts):
            return
        tracked = self._at(path)
        if tracked is not None and tracked.startswith(GITLINK_MODE):
            return      # a submodule: the full scan ignores submodules too
        node = _place(top, parts)
        if node is None:
            return
        rel = os.fsdecode(path)
        self.skipped.discard(rel)
        self.skipped -= {s for s in self.skipped if s.startswith(rel + "/")}
        if self._in_dependency_dir(parts):
            node.children.clear()
            node.delete = True      # untracked, under a directory no tree holds
            return
        info = self._lstat(parts)
        if info is not None and stat.S_ISDIR(info.st_mode):
            node.children.clear()
            if ((tracked is None and self._ignored(path + b"/"))
                    or ((tracked is None or not is_tree(tracked))
                        and self._dependency_dir(path, parts[-1]))):
                node.delete = True
                return
            node.replace = True
            self._walk(path, node)
            return
        leaf = self._leaf(path, info) if info is not None else None
        node.children.clear()
        node.leaf, node.delete = leaf, leaf is None

    def _in_dependency_dir(self, parts: list[bytes]) -> bool:
        """Whether a parent of the path is a new dependency directory (listed as skipped
        here unless git ignores it). A tracked parent is an ordinary directory."""
        for depth in range(1, len(parts)):
            if parts[depth - 1] in self.skip_dirs:
                prefix = b"/".join(parts[:depth])
                held = self._at(prefix)
                if (held is None or not is_tree(held)) and self._is_dir(prefix):
                    self._dependency_dir(prefix, parts[depth - 1])
                    return True
        return False

    def _dependency_dir(self, path: bytes, name: bytes) -> bool:
        """Whether the untracked directory `path` is one to leave out (its name is in
        skip_dirs). It is listed as skipped where git status shows it: not ignored, and
        holding something to show."""
        if name not in self.skip_dirs:
            return False
        listed = os.fsdecode(path) + "/"
        if not self._ignored(path + b"/") and self._shows_something(path):
            self.skipped.add(listed)
        else:
            self.skipped.discard(listed)
        return True

    def _shows_something(self, path: bytes) -> bool:
        """Whether git status shows the untracked directory `path`: it holds a file, link
        or nested repository git does not ignore, at any depth (empty directories and
        ignored files show nothing). The walk stops at the first such entry."""
        known = self._shown.get(path)
        if known is None:
            try:
                known = self._shown[path] = self._holds_shown(path)
            except UnicodeDecodeError:      # a name not in UTF-8: git shows it
                known = self._shown[path] = True
        return known

    def _holds_shown(self, path: bytes) -> bool:
        pending = [path]
        while pending:
            rel = pending.pop()
            try:
                entries = list(os.scandir(os.path.join(self.root, rel)))
            except OSError:
                continue
            for entry in entries:
                child = rel + b"/" + entry.name
                if entry.is_dir(follow_symlinks=False):
                    if entry.name == b".git":
                        return True         # a nested repository: shown
                    if not self._ignored(child + b"/"):
                        pending.append(child)
                elif ((entry.is_file(follow_symlinks=False) or entry.is_symlink())
                      and not self._ignored(child)):
                    return True
        return False

    def _lstat(self, parts: list[bytes]) -> os.stat_result | None:
        """`stat_scan.lstat_inside`, its ancestor checks remembered for this advance:
        100 changed files in a few directories asked ~3 lstats each, mostly the same
        directories. The path's own lstat is always fresh."""
        if not self._is_dir(b"/".join(parts[:-1])):
            return None
        try:
            return os.lstat(os.path.join(self.root, *parts))
        except OSError as exc:
            if exc.errno in NOTHING_THERE:
                return None
            raise

    def _is_dir(self, path: bytes) -> bool:
        """A real directory (not a symlink to one) all the way from the root."""
        known = self._dirs.get(path)
        if known is None:
            known = (self._is_dir(path.rpartition(b"/")[0])
                     and _lstat_dir(os.path.join(self.root, path)))
            self._dirs[path] = known
        return known

    def _under_gitlink(self, parts: list[bytes]) -> bool:
        for depth in range(1, len(parts)):
            entry = self._at(b"/".join(parts[:depth]))
            if entry is None:
                return False
            if entry.startswith(GITLINK_MODE):
                return True
        return False

    def _leaf(self, path: bytes, info: os.stat_result) -> Leaf | None:
        full = os.path.join(self.root, path)
        tracked = self._at(path)
        tracked = tracked if tracked is not None and not is_tree(tracked) else None
        if stat.S_ISLNK(info.st_mode):
            if tracked is None and self._ignored(path):
                return None
            return Leaf(self._hold(_BLOB_T, os.readlink(full)), LINK)
        if not stat.S_ISREG(info.st_mode):
            return None
        if tracked is None:
            if self._ignored(path):
                return None
            if info.st_size > self.size_cap:
                self.skipped.add(os.fsdecode(path))
                return None
        mode = EXECUTABLE if info.st_mode & stat.S_IXUSR else REGULAR
        if info.st_size > pack_writer.BIG_BLOB:
            return Leaf(self.repo.create_blob_fromdisk(os.fsdecode(full)).raw, mode)
        # The bytes on disk (git would convert nothing here: see needs_git_filters);
        # create_blob_fromdisk looked attributes up for every path, ~5x slower.
        data = _read(full, info.st_size)
        oid = object_id(_BLOB_T, data)
        if tracked is None or tracked[-20:] != oid:
            self._new[oid] = (_BLOB_T, data)
        return Leaf(oid, mode)

    def _ignored(self, path: bytes) -> bool:
        return bool(self.repo.path_is_ignored(path.decode()))

    def _walk(self, path: bytes, node: _Node) -> None:
        """Fill `node` with every file under the directory `path` that belongs in the tree."""
        full = os.path.join(self.root, path)
        if os.path.lexists(os.path.join(full, b".git")):
            return      # a nested repository that is not a submodule: git leaves it out
        try:
            names = sorted(os.listdir(full))
        except OSError:
            return
        for name in names:
            try:
                name.decode()
            except UnicodeDecodeError:
                raise NeedsFullScan(f"{name!r} is not UTF-8") from None
            child_path = path + b"/" + name
            try:
                info = os.lstat(os.path.join(full, name))
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                if name == b".git":
                    continue
                tracked = self._at(child_path)
                if tracked is not None and tracked.startswith(GITLINK_MODE):
                    node.children[name] = _Node(leaf=Leaf(tracked[-20:], GITLINK))
                    continue
                if tracked is None and (self._ignored(child_path + b"/")
                                        or self._dependency_dir(child_path, name)):
                    continue
                child = _Node(replace=True)
                self._walk(child_path, child)
                if child.children:
                    node.children[name] = child
                continue
            leaf = self._leaf(child_path, info)
            if leaf is not None:
                node.children[name] = _Node(leaf=leaf)

    # --- writing trees -------------------------------------------------------------------
    def _hold(self, kind: int, data: bytes) -> bytes:
        oid = object_id(kind, data)
        self._new[oid] = (kind, data)
        return oid

    def _build(self, old: bytes | None, entries: Entries | None, node: _Node) -> bytes | None:
        """The id of the tree `entries` (the tree `old`) with `node`'s updates, None when
        nothing is left in it. Untouched entries keep their place and bytes."""
        new: Entries = dict(entries) if entries else {}
        resort = False
        for name, child in node.children.items():
            existing = new.get(name)
            was_tree = existing is not None and is_tree(existing)
            if child.leaf is not None:
                new[name] = entry_of(b"%o" % child.leaf.mode, name, child.leaf.oid)
                resort = resort or existing is None or was_tree
                continue
            if child.delete:
                if existing is not None:
                    del new[name]
                continue
            sub_old = existing[-20:] if was_tree and not child.replace and existing else None
            sub = self._build(sub_old, self._tree(sub_old) if sub_old else None, child)
            if sub is not None:
                new[name] = entry_of(TREE_MODES[0], name, sub)
                resort = resort or not was_tree
            elif existing is not None and (was_tree or child.replace):
                # Deletions below a file or link are no-ops: they cannot have removed it.
                del new[name]
        if not new:
            return None
        if resort:
            new = dict(sorted(new.items(), key=tree_order))
        data = tree_bytes(new)
        oid = object_id(_TREE_T, data)
        if oid != old:
            self._new[oid] = (_TREE_T, data)
            # The next advance starts from the new tree: the old version of this directory
            # is not read again (it is from the odb if it is), and kept it would make the
            # cache grow by a few trees per call until CACHED_TREES clears it all.
            if old is not None:
                self._parsed.pop(old, None)
        self._parsed[oid] = new
        return oid


def _lstat_dir(full: bytes) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(full).st_mode)
    except FileNotFoundError:
        return False


def _read(full: bytes, size: int) -> bytes:
    """A file's bytes with open, read, close: `open()` adds an fstat, an ioctl and two
    lseeks per file (100 files per snapshot). Reads to the end: the size is a hint, and a
    short read of a regular file is its end."""
    fd = os.open(full, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = [os.read(fd, size + 1)]
        if len(chunks[0]) <= size:
            return chunks[0]
        while chunks[-1]:           # it grew since the lstat
            chunks.append(os.read(fd, max(size, 1 << 16)))
    finally:
        os.close(fd)
    return b"".join(chunks)


def _place(top: _Node, parts: list[bytes]) -> _Node | None:
    """The node for a path; None when an ancestor is already decided (file, gone, rebuilt)."""
    node = top
    for part in parts:
        if node.terminal or node.replace:
            return None
        node = node.children.setdefault(part, _Node())
    return node
