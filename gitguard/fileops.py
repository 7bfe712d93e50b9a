"""Working-tree reads and writes for rollback, exact to the byte and never outside the workspace.

A path's state is what git would store for it: a blob id and a mode (regular,
executable, symlink whose blob is the link target), or nothing. Writes go through
a temporary file in the same directory and `os.replace`, so a crash leaves either
the old or the new content; they never follow a symlink, neither in a parent
directory nor at the path itself. Like `git checkout`, working-tree files are not
fsynced one by one: the ledger entry around the writes is.

Trees are serialised here rather than with pygit2's TreeBuilder because that one
cannot insert a name that is not UTF-8, and git allows any bytes but '/' and NUL.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pygit2

REGULAR = 0o100644
EXECUTABLE = 0o100755
LINK = 0o120000
TREE = 0o040000
GITLINK = 0o160000
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
KEEP_BYTES = 1 << 20             # current_content keeps the bytes of files up to this size
TEMP_INFIX = ".gitguard-"        # write_state's temporary files: `.NAME.gitguard-<8 hex>.tmp`

Kind = Literal["absent", "file", "link", "dir", "special", "beyond"]


@dataclass(frozen=True)
class FileState:
    """What git stores for a path: blob id and mode."""

    oid: str
    mode: int

    def describe(self) -> str:
        kind = {LINK: "symlink", EXECUTABLE: "executable"}.get(self.mode, "file")
        return f"{kind} {self.oid[:12]}"


@dataclass(frozen=True)
class Observed:
    """A path in the working tree now. `state` is None when git would see no blob there."""

    path: str
    kind: Kind
    state: FileState | None
    blocker: str | None = None   # for "beyond": the parent that is a symlink or a file


def git_mode(st_mode: int) -> int:
    if stat.S_ISLNK(st_mode):
        return LINK
    return EXECUTABLE if st_mode & stat.S_IXUSR else REGULAR


def blocking_parent(root: Path, rel: str) -> str | None:
    """The first parent of `rel` that exists and is not a real directory (a symlink or a file)."""
    parts = rel.split("/")[:-1]
    current = os.fspath(root)      # strings, not Path: this runs for every path, every level
    for index, part in enumerate(parts):
        current = os.path.join(current, part)
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(info.st_mode):
            return "/".join(parts[: index + 1])
    return None


def observe(repo: pygit2.Repository, root: Path, rel: str, store_blobs: bool) -> Observed:
    """Lstat and hash one path; with `store_blobs` its content also goes into the object store."""
    blocker = blocking_parent(root, rel)
    if blocker is not None:
        return Observed(rel, "beyond", None, blocker)
    full = os.path.join(root, rel)
    try:
        info = os.lstat(full)
    except FileNotFoundError:
        return Observed(rel, "absent", None)
    if stat.S_ISDIR(info.st_mode):
        return Observed(rel, "dir", None)
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(os.fsencode(full))
        oid = pygit2.hash(target)
        if store_blobs and oid not in repo:
            oid = repo.create_blob(target)
        return Observed(rel, "link", FileState(str(oid), LINK))
    if not stat.S_ISREG(info.st_mode):
        return Observed(rel, "special", None)
    oid = pygit2.hashfile(full)
    if store_blobs and oid not in repo:
        # Usually the content is what a snapshot already stored; only new bytes are written.
        # What gets stored is what we report, even if the file changed since the hash.
        oid = repo.create_blob_fromdisk(full)
    return Observed(rel, "file", FileState(str(oid), git_mode(info.st_mode)))


def current_state(root: Path, rel: str) -> FileState | None | Literal["other"]:
    """The state now, hashed without storing: the last check before a write."""
    return current_content(root, rel)[0]


def current_content(root: Path, rel: str
                    ) -> tuple[FileState | None | Literal["other"], bytes | None]:
    """`current_state` and the bytes it hashed (a link's target), read once.

    The bytes serve the patch of what a write replaced without reading the blob back
    from the object store. pygit2.hash of the bytes is pygit2.hashfile of the file (no
    filters either way).
    """
    if blocking_parent(root, rel) is not None:
        return None, None
    full = os.path.join(root, rel)
    try:
        info = os.lstat(full)
    except FileNotFoundError:
        return None, None
    if stat.S_ISDIR(info.st_mode):
        return None, None
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(os.fsencode(full))
        return FileState(str(pygit2.hash(target)), LINK), target
    if not stat.S_ISREG(info.st_mode):
        return "other", None
    if info.st_size > KEEP_BYTES:    # a large file is hashed in a stream, not held in memory
        return FileState(str(pygit2.hashfile(full)), git_mode(info.st_mode)), None
    fd = os.open(full, os.O_RDONLY)   # follows a link swapped in since the lstat, as hashfile
    try:                              # does; a raw read: no buffer, no isatty, no seeks
        data = os.read(fd, info.st_size + 1)
        while more := os.read(fd, KEEP_BYTES):   # to the end, as hashfile reads
            data += more
    finally:
        os.close(fd)
    return FileState(str(pygit2.hash(data)), git_mode(info.st_mode)), data


def files_under(root: Path, rel: str) -> list[str]:
    """Every non-directory entry below a directory, workspace-relative, without following links."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root / rel, followlinks=False):
        base = Path(dirpath).relative_to(root).as_posix()
        found += [f"{base}/{name}" for name in filenames]
        found += [f"{base}/{name}" for name in dirnames if (Path(dirpath) / name).is_symlink()]
    return found


# writes ----------------------------------------------------------------------------------

def _make_parents(root: Path, rel: str) -> None:
    parent = os.fspath(root)
    for part in rel.split("/")[:-1]:
        parent = os.path.join(parent, part)
        try:
            info = os.lstat(parent)
        except FileNotFoundError:
            try:
                os.mkdir(parent)
                continue
            except FileExistsError:     # a concurrent writer made it: check what it is
                info = os.lstat(parent)
        if not stat.S_ISDIR(info.st_mode):
            raise FileExistsError(f"{parent} is not a directory")


def umask() -> int:
    """The process umask (reading it means setting it for a moment)."""
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _permissions(existing: os.stat_result | None, mode: int, mask: int) -> int:
    """Keep the user's permission bits of a file being replaced; git decides only the x bits."""
    if existing is None or not stat.S_ISREG(existing.st_mode):
        return (0o777 if mode == EXECUTABLE else 0o666) & ~mask
    bits = stat.S_IMODE(existing.st_mode)
    if mode == EXECUTABLE:
        return bits | ((bits & 0o444) >> 2) | stat.S_IXUSR
    return bits & ~0o111


def write_state(root: Path, rel: str, state: FileState, data: bytes,
                mask: int | None = None) -> None:
    """Put `data` at `rel` as a file or a symlink; an empty directory in the way is removed.

    `mask`: the process umask, when the caller writes many files (reading it takes two
    calls that change it for a moment). Not fsynced, like `git checkout`: see guarded.py.
    """
    _make_parents(root, rel)
    full = os.path.join(root, rel)
    try:
        existing: os.stat_result | None = os.lstat(full)
    except FileNotFoundError:
        existing = None
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        os.rmdir(full)   # the plan checked it is empty; rmdir refuses otherwise
        existing = None
    head, name = os.path.split(full)
    tmp = os.path.join(head, f".{name}{TEMP_INFIX}{secrets.token_hex(4)}.tmp")
    try:
        if state.mode == LINK:
            os.symlink(data, os.fsencode(tmp))
        else:
            mask = umask() if mask is None else mask
            wanted = _permissions(existing, state.mode, mask)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, wanted)
            try:
                if wanted & ~mask != wanted:
                    os.fchmod(fd, wanted)   # open() applied the umask to bits the user had
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        os.replace(tmp, full)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def delete_path(root: Path, rel: str) -> None:
    """Remove a file or symlink, then the parent directories this left empty (only empty ones)."""
    full = root / rel
    with contextlib.suppress(FileNotFoundError):
        os.unlink(full)
    parent = full.parent
    while parent != root and root in parent.parents:
        try:
            os.rmdir(parent)
        except OSError:
            break
        parent = parent.parent


# trees -----------------------------------------------------------------------------------

def _sort_key(item: tuple[bytes, tuple[int, pygit2.Oid]]) -> bytes:
    name, (mode, _) = item
    return name + b"/" if mode == TREE else name


def _write_tree(repo: pygit2.Repository, entries: dict[bytes, tuple[int, pygit2.Oid]]
                ) -> pygit2.Oid:
    body = b"".join(b"%o %s\0%s" % (mode, name, oid.raw)
                    for name, (mode, oid) in sorted(entries.items(), key=_sort_key))
    return repo.odb.write(pygit2.enums.ObjectType.TREE, body)


def parse_tree(repo: pygit2.Repository, oid: str | pygit2.Oid) -> pygit2.Tree:
    obj = repo.get(oid)
    if not isinstance(obj, pygit2.Tree):
        raise KeyError(f"{oid} is not a tree")
    return obj


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
    tree = parse_tree(repo, base)
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
        subtree = parse_tree(repo, current[1]) if current and current[0] == TREE else None
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
    obj = tree if isinstance(tree, pygit2.Tree) else parse_tree(repo, tree)
    try:
        entry = obj[rel]
    except (KeyError, ValueError):
        return None
    if entry.filemode in (REGULAR, EXECUTABLE, LINK):
        return FileState(str(entry.id), entry.filemode)
    if entry.filemode == GITLINK:
        return FileState(str(entry.id), GITLINK)
    return None


def deepest_first(paths: Iterable[str]) -> list[str]:
    return sorted(paths, key=lambda p: (-p.count("/"), p))
