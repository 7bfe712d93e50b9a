"""Working-tree reads and writes for rollback, exact to the byte and never outside the workspace.

A path's state is what git would store for it: a blob id and a mode (regular,
executable, symlink whose blob is the link target), or nothing. Writes go through
a temporary file in the same directory and `os.replace`, so a crash leaves either
the old or the new content; they never follow a symlink, neither in a parent
directory nor at the path itself. Like `git checkout`, working-tree files are not
fsynced one by one: the ledger entry around the writes is. Trees are built in
tree_edit.py.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import secrets
import stat
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

import pygit2

from gitguard import workers
from gitguard.git.objects import EXECUTABLE, LINK, REGULAR

KEEP_BYTES = 1 << 20             # current_content keeps the bytes of files up to this size
TEMP_INFIX = ".gitguard-"        # write_state's temporary files: `.NAME.gitguard-<8 hex>.tmp`
NAME_MAX = 255                   # bytes in one file name (Linux, and most file systems)
_TEMP_EXTRA = len(f".{TEMP_INFIX}00000000.tmp")
# Many paths are read or written from a few threads: each file-system call on files spread
# over the tree waits on the journal or the disk, and the waits overlap (measured on ext4,
# 100 files in 100 directories: 95-164 ms one by one, 36-54 ms with 4 threads, 8 no better
# on 2 cores). Below PARALLEL_FROM paths the pool costs more than it saves.
PARALLEL_FROM = 8
THREADS = 4

Kind = Literal["absent", "file", "link", "dir", "special", "beyond"]
_In = TypeVar("_In")
_Out = TypeVar("_Out")


def in_threads(fn: Callable[[_In], _Out], items: Sequence[_In]) -> list[_Out]:
    """`[fn(x) for x in items]` in THREADS threads, one contiguous slice each: a job per
    item cost a lock handshake per path; neighbours share directories. The calling thread
    takes the first slice itself, the others go to kept workers (gitguard.workers); every
    slice has ended when this returns or raises."""
    if not items:
        return []
    size = -(-len(items) // THREADS)
    slices = [items[at:at + size] for at in range(0, len(items), size)]
    with workers.Scope() as scope:
        jobs = [scope.submit(functools.partial(_each, fn, part)) for part in slices[1:]]
        first = _each(fn, slices[0])
    return first + [out for job in jobs for out in job.result()]


def _each(fn: Callable[[_In], _Out], part: Sequence[_In]) -> list[_Out]:
    return [fn(x) for x in part]


@dataclass(frozen=True)
class FileState:
    """What git stores for a path: blob id and mode."""

    oid: str
    mode: int

    def describe(self) -> str:
        kind = {LINK: "symlink", EXECUTABLE: "executable"}.get(self.mode, "file")
        return f"{kind} {self.oid[:12]}"


StatKey = tuple[int, int, int, int, int, int]   # dev, inode, mode, size, mtime, ctime (ns)


@dataclass(frozen=True)
class Fence:
    """A file-system timestamp taken before a batch of reads, on device `dev`.

    The racy-timestamp rule (git's, for its index): a file read after the fence whose
    ctime and mtime are both strictly older than the fence cannot change afterwards
    without its ctime moving to the fence or later (the kernel stamps every write, chmod,
    rename or utime with its clock, at the file system's granularity, whatever that is:
    the fence comes from the same clock and granularity). So a later lstat with the same
    key proves the bytes read are still there. A file stamped at or after the fence (it
    changed in the fence's clock tick, or a clock set back) proves nothing: it is read
    again. Only a clock set back between the read and the check, as for git, defeats it.
    """

    dev: int
    ns: int


@dataclass(frozen=True)
class Seen:
    """A regular file's bytes as read, with the lstat taken just before the read, valid
    only when that lstat was older than a fence (see Fence)."""

    key: StatKey
    state: FileState
    data: bytes


@dataclass(frozen=True)
class Observed:
    """A path in the working tree now. `state` is None when git would see no blob there."""

    path: str
    kind: Kind
    state: FileState | None
    blocker: str | None = None   # for "beyond": the parent that is a symlink or a file
    seen: Seen | None = None     # the bytes read, reusable for the last check (fence rule)


def stat_key(info: os.stat_result) -> StatKey:
    return (info.st_dev, info.st_ino, info.st_mode, info.st_size, info.st_mtime_ns,
            info.st_ctime_ns)


def fence(stamp_file: Path) -> Fence | None:
    """Stamp `stamp_file` (one gitguard owns, on the store's file system) with the file
    system's clock and read the stamp back; None when it cannot be stamped."""
    try:
        os.utime(stamp_file)
        info = os.stat(stamp_file)
    except OSError:
        return None
    return Fence(info.st_dev, info.st_mtime_ns)


def _older(info: os.stat_result, before: Fence | None) -> bool:
    return (before is not None and info.st_dev == before.dev
            and info.st_ctime_ns < before.ns and info.st_mtime_ns < before.ns)


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
        info = _lstat_there(current)
        if info is None:
            return None
        if not stat.S_ISDIR(info.st_mode):
            return "/".join(parts[: index + 1])
    return None


def _lstat_there(full: str) -> os.stat_result | None:
    """The lstat of what is at `full`; None when nothing is, a name longer than NAME_MAX
    included (an agent may declare one; no file can have it)."""
    try:
        return os.lstat(full)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENAMETOOLONG):
            return None
        raise


def observe(repo: pygit2.Repository, root: Path, rel: str, store_blobs: bool) -> Observed:
    """Lstat and hash one path; with `store_blobs` its content also goes into the object store."""
    return _settle(repo, root, _look(root, rel), store_blobs)


def observe_many(repo: pygit2.Repository, root: Path, rels: Iterable[str],
                 store_blobs: bool, before: Fence | None = None,
                 walked: Container[str] = ()) -> dict[str, Observed]:
    """`observe` for many paths: the file-system reads overlap in a few threads (they release
    the GIL; hashing and storing stay in this thread, which owns the repository).

    `before`: a fence taken before these reads; a regular file stamped before it keeps
    its bytes in `Observed.seen` for `last_check`. `walked`: paths whose parents the caller
    has just found to be real directories (not walked again)."""
    paths = list(rels)
    if len(paths) < PARALLEL_FROM:
        looks = [_look(root, p, before, p in walked) for p in paths]
    else:
        looks = in_threads(lambda p: _look(root, p, before, p in walked), paths)
    return {look.path: _settle(repo, root, look, store_blobs) for look in looks}


@dataclass(frozen=True)
class _Look:
    """What the file system says about a path, before any hashing."""

    path: str
    kind: Kind
    mode: int = 0
    data: bytes | None = None      # a link's target, a file's bytes (None: too large to hold)
    blocker: str | None = None
    key: StatKey | None = None     # the lstat before the read, when older than the fence


def _look(root: Path, rel: str, before: Fence | None = None, walked: bool = False) -> _Look:
    blocker = None if walked else blocking_parent(root, rel)
    if blocker is not None:
        return _Look(rel, "beyond", blocker=blocker)
    full = os.path.join(root, rel)
    info = _lstat_there(full)
    if info is None:
        return _Look(rel, "absent")
    if stat.S_ISDIR(info.st_mode):
        return _Look(rel, "dir")
    if stat.S_ISLNK(info.st_mode):
        return _Look(rel, "link", LINK, os.readlink(os.fsencode(full)))
    if not stat.S_ISREG(info.st_mode):
        return _Look(rel, "special")
    data = _read_whole(full, info.st_size) if info.st_size <= KEEP_BYTES else None
    key = stat_key(info) if data is not None and _older(info, before) else None
    return _Look(rel, "file", git_mode(info.st_mode), data, key=key)


def _settle(repo: pygit2.Repository, root: Path, look: _Look, store_blobs: bool) -> Observed:
    if look.kind not in ("link", "file"):
        return Observed(look.path, look.kind, None, look.blocker)
    if look.data is None:         # a large file: hashed and stored in a stream from disk
        full = os.path.join(root, look.path)
        oid = pygit2.hashfile(full)
        if store_blobs and not _stored(repo, oid):
            # What gets stored is what we report, even if the file changed since the hash.
            oid = repo.create_blob_fromdisk(full)
    else:
        # Usually the content is what a snapshot already stored; only new bytes are written.
        oid = pygit2.hash(look.data)
        if store_blobs and not _stored(repo, oid):
            oid = repo.create_blob(look.data)
    state = FileState(str(oid), look.mode)
    seen = (Seen(look.key, state, look.data) if look.key is not None and look.data is not None
            else None)
    return Observed(look.path, look.kind, state, seen=seen)


def _stored(repo: pygit2.Repository, oid: pygit2.Oid) -> bool:
    """Whether the object store holds `oid`: the odb's own check (an index lookup in a pack,
    a stat of a loose file), not `oid in repo`, which reads and inflates the object to make
    one (40 us per packed blob measured, more for a loose one; 100 per rollback)."""
    return repo.odb.exists(oid)


def _read_whole(full: str, size: int) -> bytes:
    """A file's bytes with raw reads (no buffer, no isatty, no seeks), to its end."""
    fd = os.open(full, os.O_RDONLY)   # follows a link swapped in since the lstat, as hashfile
    try:                              # does
        data = os.read(fd, size + 1)
        if len(data) == size:         # a short read of a regular file is its end: no second
            return data               # read to find it (one read per file, not two)
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
    found, held, _ = last_check(root, rel)
    return found, held


def last_check(root: Path, rel: str, seen: Seen | None = None
               ) -> tuple[FileState | None | Literal["other"], bytes | None,
                          os.stat_result | None]:
    """`current_content` right before a write, and the lstat of the path found there
    (None when absent or a parent is in the way).

    `seen`: the bytes an earlier read found, with its lstat; when the lstat now is the
    same (the fence rule, see Fence), they are what the file holds and it is not read
    again. Any other stat, or none, means reading and hashing the file as it is now.
    """
    if blocking_parent(root, rel) is not None:
        return None, None, None
    full = os.path.join(root, rel)
    info = _lstat_there(full)
    if info is None:
        return None, None, None
    if seen is not None and stat_key(info) == seen.key:
        return seen.state, seen.data, info
    found, held = _content_at(full, info)
    return found, held, info


def _content_at(full: str, info: os.stat_result
                ) -> tuple[FileState | None | Literal["other"], bytes | None]:
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

def _make_parents(root: Path, rel: str) -> list[str]:
    """Make the missing parent directories of `rel`; returns those made (relative)."""
    parent = os.fspath(root)
    made: list[str] = []
    parts = rel.split("/")[:-1]
    for depth, part in enumerate(parts, start=1):
        parent = os.path.join(parent, part)
        try:
            info = os.lstat(parent)
        except FileNotFoundError:
            try:
                os.mkdir(parent)
                made.append("/".join(parts[:depth]))
                continue
            except FileExistsError:     # a concurrent writer made it: check what it is
                info = os.lstat(parent)
        if not stat.S_ISDIR(info.st_mode):
            raise FileExistsError(f"{parent} is not a directory")
    return made


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
                mask: int | None = None, checked: os.stat_result | None = None) -> list[str]:
    """Put `data` at `rel` as a file or a symlink; an empty directory in the way is removed.
    Returns the parent directories it had to make.

    `mask`: the process umask, when the caller writes many files (reading it takes two
    calls that change it for a moment). `checked`: the lstat of the file or symlink at
    `rel` that `last_check` just found, every parent a real directory: its parents are
    not walked again (a parent swapped for a symlink since is the same race as between
    that walk and the open either way). Not fsynced, like `git checkout`: see workspace_writer.py.
    """
    full = os.path.join(root, rel)
    existing: os.stat_result | None
    made: list[str] = []
    if checked is not None and not stat.S_ISDIR(checked.st_mode):
        existing = checked
    else:
        made = _make_parents(root, rel)
        try:
            existing = os.lstat(full)
        except FileNotFoundError:
            existing = None
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        os.rmdir(full)   # the plan checked it is empty; rmdir refuses otherwise
        existing = None
    head, name = os.path.split(full)
    tmp = os.path.join(head, f".{temp_stem(name)}{TEMP_INFIX}{secrets.token_hex(4)}.tmp")
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
    return made


def temp_stem(name: str) -> str:
    """The part of `name` a temporary file beside it carries: all of it, or as many of its
    bytes as keep the temporary name within NAME_MAX (a 240-byte name is valid; its
    temporary name must be too). A cut inside a UTF-8 character stays a surrogate escape,
    which the file system gets back as the same bytes."""
    raw = os.fsencode(name)
    room = NAME_MAX - _TEMP_EXTRA
    return name if len(raw) <= room else os.fsdecode(raw[:room])


def is_temp_of(stem: str, names: Iterable[str]) -> bool:
    """Whether a temporary file whose stem is `stem` was made for one of `names`."""
    cut = len(os.fsencode(stem)) == NAME_MAX - _TEMP_EXTRA
    return any(name == stem or (cut and temp_stem(name) == stem) for name in names)


def delete_path(root: Path, rel: str) -> list[str]:
    """Remove a file or symlink, then the parent directories this left empty (only empty
    ones); returns those directories, workspace-relative, so that an undo can make them
    again (no snapshot holds an empty directory)."""
    full = root / rel
    with contextlib.suppress(FileNotFoundError):
        os.unlink(full)
    removed: list[str] = []
    parent = full.parent
    while parent != root and root in parent.parents:
        try:
            os.rmdir(parent)
        except OSError:
            break
        removed.append(parent.relative_to(root).as_posix())
        parent = parent.parent
    return removed


def make_dirs(root: Path, rels: Iterable[str]) -> list[str]:
    """Make the directories `rels` that are missing (shallowest first), never through a
    symlink or a file; returns those made. What cannot be made is left out."""
    made: list[str] = []
    for rel in sorted(set(rels), key=lambda p: (p.count("/"), p)):
        try:
            made += _make_parents(root, rel)
            os.mkdir(os.path.join(root, rel))
        except OSError:     # there already (FileExistsError), or something in the way
            continue
        made.append(rel)
    return made


def deepest_first(paths: Iterable[str]) -> list[str]:
    return sorted(paths, key=lambda p: (-p.count("/"), p))
