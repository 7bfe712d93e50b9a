"""Working-tree reads and writes for rollback, exact to the byte and never outside the workspace.

A path's state is what git would store for it: a blob id and a mode (regular,
executable, symlink whose blob is the link target), or nothing. Writes go through
a temporary file in the same directory and `os.replace`, so a crash leaves either
the old or the new content; they never follow a symlink, neither in a parent
directory nor at the path itself. Like `git checkout`, working-tree files are not
fsynced one by one: the ledger entry around the writes is. Trees are built in
treeedit.py.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
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
# Many paths are read or written from a few threads: each file-system call on files spread
# over the tree waits on the journal or the disk, and the waits overlap (measured on ext4,
# 100 files in 100 directories: 95-164 ms one by one, 36-54 ms with 4 threads, 8 no better
# on 2 cores). Below PARALLEL_FROM paths the pool costs more than it saves.
PARALLEL_FROM = 8
THREADS = 4

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
    return _settle(repo, root, _look(root, rel), store_blobs)


def observe_many(repo: pygit2.Repository, root: Path, rels: Iterable[str],
                 store_blobs: bool) -> dict[str, Observed]:
    """`observe` for many paths: the file-system reads overlap in a few threads (they release
    the GIL; hashing and storing stay in this thread, which owns the repository)."""
    paths = list(rels)
    if len(paths) < PARALLEL_FROM:
        looks = [_look(root, p) for p in paths]
    else:
        with ThreadPoolExecutor(THREADS, thread_name_prefix="gitguard-read") as pool:
            looks = list(pool.map(lambda p: _look(root, p), paths))
    return {look.path: _settle(repo, root, look, store_blobs) for look in looks}


@dataclass(frozen=True)
class _Look:
    """What the file system says about a path, before any hashing."""

    path: str
    kind: Kind
    mode: int = 0
    data: bytes | None = None      # a link's target, a file's bytes (None: too large to hold)
    blocker: str | None = None


def _look(root: Path, rel: str) -> _Look:
    blocker = blocking_parent(root, rel)
    if blocker is not None:
        return _Look(rel, "beyond", blocker=blocker)
    full = os.path.join(root, rel)
    try:
        info = os.lstat(full)
    except FileNotFoundError:
        return _Look(rel, "absent")
    if stat.S_ISDIR(info.st_mode):
        return _Look(rel, "dir")
    if stat.S_ISLNK(info.st_mode):
        return _Look(rel, "link", LINK, os.readlink(os.fsencode(full)))
    if not stat.S_ISREG(info.st_mode):
        return _Look(rel, "special")
    data = _read_whole(full, info.st_size) if info.st_size <= KEEP_BYTES else None
    return _Look(rel, "file", git_mode(info.st_mode), data)


def _settle(repo: pygit2.Repository, root: Path, look: _Look, store_blobs: bool) -> Observed:
    if look.kind not in ("link", "file"):
        return Observed(look.path, look.kind, None, look.blocker)
    if look.data is None:         # a large file: hashed and stored in a stream from disk
        full = os.path.join(root, look.path)
        oid = pygit2.hashfile(full)
        if store_blobs and oid not in repo:
            # What gets stored is what we report, even if the file changed since the hash.
            oid = repo.create_blob_fromdisk(full)
    else:
        # Usually the content is what a snapshot already stored; only new bytes are written.
        oid = pygit2.hash(look.data)
        if store_blobs and oid not in repo:
            oid = repo.create_blob(look.data)
    return Observed(look.path, look.kind, FileState(str(oid), look.mode))


def _read_whole(full: str, size: int) -> bytes:
    """A file's bytes with raw reads (no buffer, no isatty, no seeks), to its end."""
    fd = os.open(full, os.O_RDONLY)   # follows a link swapped in since the lstat, as hashfile
    try:                              # does
        data = os.read(fd, size + 1)
        while more := os.read(fd, KEEP_BYTES):
            data += more
    finally:
        os.close(fd)
    return data


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
    data = _read_whole(full, info.st_size)
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


def deepest_first(paths: Iterable[str]) -> list[str]:
    return sorted(paths, key=lambda p: (-p.count("/"), p))
