"""O(changed) snapshot trees: the previous tree plus the changed paths, nothing else.

The daemon knows which paths changed, so it rebuilds only the tree objects on the
way from the root to each of them (pygit2 TreeBuilder); every untouched subtree is
reused by id. The rules are those of the full scan (`Snapshotter.scan`, git status
against gitguard's stat index), so both give the same tree:

* a path already in the previous tree stays tracked, ignored or not, any size;
* a new path is left out when git ignores it, and listed as skipped when it is a
  regular file above the size cap;
* `.git` (and the non-git store) never enter; a nested repository is left out, a
  submodule (gitlink) is kept as it is; fifos and sockets are not files;
* the executable bit is the owner's x bit; a symlink is a blob of its target.

What pygit2 cannot reproduce raises `NeedsFullScan` and the caller falls back to
git: non-UTF-8 names (pygit2 encodes tree entry names as UTF-8). Content that git
converts on the way in (text/eol/filter attributes, core.autocrlf; see
`needs_git_filters`) is left to git altogether: blobs here are the bytes on disk.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field

import pygit2

from gitguard import packwrite
from gitguard.snapshot import TreeResult
from gitguard.store import Store

BLOB = 0o100644
EXEC = 0o100755
DIRECT_PATHS = 3    # up to this many changed paths: objects written loose, directly
LINK = 0o120000
TREE = 0o040000
GITLINK = 0o160000


class NeedsFullScan(Exception):
    """This change cannot be applied incrementally; a full scan must build the tree."""


@dataclass(frozen=True)
class Leaf:
    oid: pygit2.Oid
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


CONVERTING = (b"text", b"eol", b"crlf", b"ident", b"filter", b"working-tree-encoding")


def converts_content(attributes: bytes) -> bool:
    """Whether a .gitattributes text sets anything that changes content on the way in."""
    for line in attributes.splitlines():
        words = line.split()
        if not words or words[0].startswith(b"#"):
            continue
        for word in words[1:]:
            name = word.lstrip(b"-!").split(b"=", 1)[0]
            if name in CONVERTING:
                return True
    return False


def needs_git_filters(repo: pygit2.Repository, converting: Iterable[str]) -> str | None:
    """Why blobs must be hashed by git rather than read from disk, or None.

    `converting` names the attribute files that convert content (`converts_content`).
    """
    config = repo.config
    for key, harmless in (("core.autocrlf", ("false",)), ("core.symlinks", ("true",)),
                          ("core.filemode", ("true",))):
        try:
            value = str(config[key]).lower()
        except KeyError:
            continue
        if value not in harmless:
            return f"{key} = {value}"
    if "core.attributesFile" in config:
        return "core.attributesFile is set"
    info = os.path.join(repo.path, "info", "attributes")
    if os.path.exists(info):
        return "info/attributes exists"
    found = next(iter(converting), None)
    return f"{found} converts content" if found else None


class IncrementalTree:
    """The workspace tree as last written, advanced by changed paths only."""

    def __init__(self, repo: pygit2.Repository, root: str, size_cap: int, tree: str,
                 skipped: Iterable[str], store_names: Iterable[bytes] = (b".git",),
                 store: Store | None = None) -> None:
        self.repo = repo
        # Objects are computed by libgit2 but held in memory, then written as one pack
        # when many (packwrite): loose writes were ~85% of a 100-file snapshot.
        self.writer, self.held = packwrite.memory_repo(repo)
        self._w = repo                  # the handle this advance writes through
        self.store = store
        self.root = os.fsencode(root)
        self.size_cap = size_cap
        self.tree = tree
        self.skipped = set(skipped)
        self.store_names = frozenset(store_names)

    # --- public ------------------------------------------------------------------------
    def advance(self, changed: Iterable[bytes]) -> TreeResult:
        paths = sorted({p.rstrip(b"/") for p in changed if p.strip(b"/")})
        for path in paths:
            try:
                path.decode()
            except UnicodeDecodeError:
                raise NeedsFullScan(f"{path!r} is not UTF-8") from None
        base = tree_of(self.repo, self.tree)       # lookups: libgit2's cache, no callback
        self._entries: dict[bytes, pygit2.Object | None] = {}
        # A few paths make fewer objects than a pack is worth (packwrite.PACK_THRESHOLD):
        # they go straight to the repository, whose object cache already holds the trees
        # on their way (through the memory handle each is read again via Python).
        self._w = self.repo if len(paths) <= DIRECT_PATHS else self.writer
        top = _Node()
        try:
            for path in paths:
                self._resolve(base, path, top)
            built = self._build(base if self._w is self.repo else tree_of(self._w, self.tree),
                                top)
            if built is None:
                built = self._w.TreeBuilder().write()
        except BaseException:
            self.held.objects.clear()   # nothing names them
            raise
        packwrite.flush(self.held, self.store)
        new_tree = str(built)
        self.tree = new_tree
        return TreeResult(tree=new_tree, changed=tuple(os.fsdecode(p) for p in paths),
                          skipped=tuple(sorted(self.skipped)))

    # --- deciding what each path is now -------------------------------------------------
    def _resolve(self, base: pygit2.Tree, path: bytes, top: _Node) -> None:
        parts = path.split(b"/")
        if parts[0] in self.store_names or b".git" in parts[1:] or self._under_gitlink(base,
                                                                                      parts):
            return
        tracked = self._at(base, path)
        if tracked is not None and tracked.filemode == GITLINK:
            return      # a submodule: the full scan ignores submodules too
        node = _place(top, parts)
        if node is None:
            return
        rel = os.fsdecode(path)
        self.skipped.discard(rel)
        self.skipped -= {s for s in self.skipped if s.startswith(rel + "/")}
        info = self._lstat(parts)
        if info is not None and stat.S_ISDIR(info.st_mode):
            node.children.clear()
            if tracked is None and self._ignored(path + b"/"):
                node.delete = True
                return
            node.replace = True
            self._walk(base, path, node)
            return
        leaf = self._leaf(base, path, info) if info is not None else None
        node.children.clear()
        node.leaf, node.delete = leaf, leaf is None

    def _lstat(self, parts: list[bytes]) -> os.stat_result | None:
        """The path's own lstat; None when it is gone or lies below a non-directory
        (git does not look through a symlinked directory)."""
        here = self.root
        for part in parts[:-1]:
            here = os.path.join(here, part)
            try:
                if not stat.S_ISDIR(os.lstat(here).st_mode):
                    return None
            except FileNotFoundError:
                return None
        try:
            return os.lstat(os.path.join(here, parts[-1]))
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return None
            raise

    def _at(self, base: pygit2.Tree, path: bytes) -> pygit2.Object | None:
        """The previous tree's entry at `path`, remembered for this advance: every path
        asks about each of its ancestors (`_under_gitlink`), and siblings share them."""
        try:
            return self._entries[path]
        except KeyError:
            found = self._entries[path] = _lookup(base, path)
            return found

    def _under_gitlink(self, base: pygit2.Tree, parts: list[bytes]) -> bool:
        for depth in range(1, len(parts)):
            entry = self._at(base, b"/".join(parts[:depth]))
            if entry is None:
                return False
            if entry.filemode == GITLINK:
                return True
        return False

    def _leaf(self, base: pygit2.Tree, path: bytes, info: os.stat_result) -> Leaf | None:
        full = os.path.join(self.root, path)
        tracked = self._at(base, path)
        tracked = tracked if tracked is not None and tracked.filemode != TREE else None
        if stat.S_ISLNK(info.st_mode):
            if tracked is None and self._ignored(path):
                return None
            return Leaf(self._w.create_blob(os.readlink(full)), LINK)
        if not stat.S_ISREG(info.st_mode):
            return None
        if tracked is None:
            if self._ignored(path):
                return None
            if info.st_size > self.size_cap:
                self.skipped.add(os.fsdecode(path))
                return None
        mode = EXEC if info.st_mode & stat.S_IXUSR else BLOB
        if info.st_size > packwrite.BIG_BLOB:
            return Leaf(self.repo.create_blob_fromdisk(os.fsdecode(full)), mode)
        # The bytes on disk (git would convert nothing here: see needs_git_filters);
        # create_blob_fromdisk looked attributes up for every path, ~5x slower.
        with open(full, "rb") as fh:
            return Leaf(self._w.create_blob(fh.read()), mode)

    def _ignored(self, path: bytes) -> bool:
        return bool(self.repo.path_is_ignored(path.decode()))

    def _walk(self, base: pygit2.Tree, path: bytes, node: _Node) -> None:
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
                tracked = self._at(base, child_path)
                if tracked is not None and tracked.filemode == GITLINK:
                    node.children[name] = _Node(leaf=Leaf(tracked.id, GITLINK))
                    continue
                if tracked is None and self._ignored(child_path + b"/"):
                    continue
                child = _Node(replace=True)
                self._walk(base, child_path, child)
                if child.children:
                    node.children[name] = child
                continue
            leaf = self._leaf(base, child_path, info)
            if leaf is not None:
                node.children[name] = _Node(leaf=leaf)

    # --- writing trees -------------------------------------------------------------------
    def _build(self, tree: pygit2.Tree | None, node: _Node) -> pygit2.Oid | None:
        builder = self._w.TreeBuilder(tree) if tree is not None else self._w.TreeBuilder()
        for raw, child in node.children.items():
            name = raw.decode()
            existing = builder.get(name)
            if child.leaf is not None:
                builder.insert(name, child.leaf.oid, child.leaf.mode)
                continue
            if child.delete:
                if existing is not None:
                    builder.remove(name)
                continue
            is_tree = existing is not None and existing.filemode == TREE
            subtree = tree_of(self._w, existing.id) if is_tree and not child.replace else None
            sub = self._build(subtree, child)
            if sub is not None:
                builder.insert(name, sub, TREE)
            elif existing is not None and (is_tree or child.replace):
                # Deletions below a file or link are no-ops: they cannot have removed it.
                builder.remove(name)
        if len(builder) == 0:
            return None
        return builder.write()


def tree_of(repo: pygit2.Repository, oid: str | pygit2.Oid) -> pygit2.Tree:
    obj = repo[oid]
    if not isinstance(obj, pygit2.Tree):
        raise KeyError(f"{oid} is not a tree")
    return obj


def _place(top: _Node, parts: list[bytes]) -> _Node | None:
    """The node for a path; None when an ancestor is already decided (file, gone, rebuilt)."""
    node = top
    for part in parts:
        if node.terminal or node.replace:
            return None
        node = node.children.setdefault(part, _Node())
    return node


def _lookup(tree: pygit2.Tree, path: bytes) -> pygit2.Object | None:
    try:
        entry = tree[path.decode()]
    except (KeyError, ValueError, UnicodeDecodeError):
        return None
    return entry
