"""A snapshot's new objects as one pack, instead of hundreds of loose files.

A snapshot of 100 edited files spread over a large tree writes ~100 blobs and a few
hundred trees. As loose objects each costs libgit2 a temp file, a rename and often a
fan-out directory: ~0.4-0.6 ms apiece, 140-300 ms per snapshot at 100k files. The
daemon's trees (tree_build) compute their objects themselves and hand them to
`write_objects`: loose when they are few, else one pack with its version-2 index.

Publishing a pack, as git does: both files are written under temp names and
fsynced (git fsyncs packs by default), the pack's name is recorded in the store's
packs.json (the intent: a kill afterwards leaves nothing unaccounted, see
`packing.settle`; not fsynced, see `packing.record`), then the .pack is renamed into
place before the .idx (a reader finds a pack through its index). Nothing names an
object of the pack before both renames: the snapshot commit and its ref come after
`write_objects` returns.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import zlib
from pathlib import Path
from typing import Any

import pygit2

from gitguard import faults
from gitguard.git import packing, spare_objects
from gitguard.storage import durable
from gitguard.storage.store import Store

PACK_THRESHOLD = 24           # more new objects than this: one pack, else loose files
# Our packs are merged at idle (packing.maybe_pack, past MAX_OWN_PACKS); a burst of big
# snapshots with no idle between must not reach git's gc.autoPackLimit (50) meanwhile,
# so past this many recorded packs a snapshot goes loose (gc.auto counts those: 6700).
MAX_SNAPSHOT_PACKS = 16
BIG_BLOB = 16 << 20           # larger blobs go loose at once (not held in memory)
# Trees are mostly 20-byte ids, which do not compress (a level-1 deflate saved ~23% of
# their bytes but cost ~15x a stored block here); blobs get libgit2's loose level (1).
# A merge of our packs (packing._merge, window 250) stores most trees as deltas against
# the same directory's other versions, which it deflates; only delta bases stay stored.
_KIND = pygit2.enums.ObjectType
_LEVEL: dict[int, int] = {_KIND.TREE: 0, _KIND.BLOB: 1, _KIND.COMMIT: 1, _KIND.TAG: 1}
_PACK_TYPES: dict[int, int] = {_KIND.COMMIT: 1, _KIND.TREE: 2, _KIND.BLOB: 3, _KIND.TAG: 4}


def write_objects(repo: pygit2.Repository, store: Store | None,
                  objects: list[tuple[bytes, int, bytes]], threshold: int = PACK_THRESHOLD,
                  limit: int = MAX_SNAPSHOT_PACKS) -> str | None:
    """Write (raw oid, type, content) objects to `repo`: one pack of ours (returns its
    name) when more than `threshold`, else loose (fewer than a pack is worth)."""
    if not objects:
        return None
    state = packing.read_state(store) if store is not None and len(objects) > threshold else {}
    if store is None or len(objects) <= threshold or len(state.get("packs", [])) >= limit:
        loose = loose_dir(repo, store)
        spares = spares_of(store) if loose is not None and store is not None else None
        for oid, kind, data in objects:
            if loose is None:
                repo.odb.write(kind, data)
            else:
                write_loose(loose, oid, kind, data, spares)
        return None
    return publish(store, objects, state)


_NAMES: dict[int, bytes] = {_KIND.COMMIT: b"commit", _KIND.TREE: b"tree", _KIND.BLOB: b"blob",
                           _KIND.TAG: b"tag"}
_OBJECT_DIRS: dict[Path, bytes] = {}
_SPARES: dict[bytes, spare_objects.Spares] = {}


# objects dir -> ((inode, mtime, size) of its config file, shared?); git rewrites the
# config through a lock file and a rename, so a change gives a new inode.
_SHARED: dict[bytes, tuple[tuple[int, int, int], bool]] = {}


def loose_dir(repo: pygit2.Repository, store: Store | None) -> bytes | None:
    """Where `write_loose` may put objects, or None to leave it to libgit2 (no store, or
    a shared repository whose modes git would set otherwise)."""
    if store is None:
        return None
    found = _OBJECT_DIRS.get(store.ws.git_dir)
    if found is None:
        found = _OBJECT_DIRS[store.ws.git_dir] = os.fsencode(packing.objects_dir(store.ws))
    return None if _shared(repo, found) else found


def _shared(repo: pygit2.Repository, objects: bytes) -> bool:
    """Whether core.sharedRepository is set: asked of libgit2 again only when the
    repository's config file changed (`repo.config` stats three config files and
    reloads them, twice per snapshot). A global setting is seen at the daemon's start."""
    try:
        info = os.stat(os.path.join(os.path.dirname(objects), b"config"))
        key = (info.st_ino, info.st_mtime_ns, info.st_size)
    except OSError:
        key = (-1, -1, -1)
    known = _SHARED.get(objects)
    if known is None or known[0] != key:
        known = _SHARED[objects] = (key, "core.sharedRepository" in repo.config)
    return known[1]


def ensure_fanouts(repo: pygit2.Repository, store: Store) -> int:
    """Make the 256 fan-out directories of objects/ that are missing; how many it made.

    Off the snapshot path (daemon start, idle time): a 1-file snapshot writes ~6 loose
    objects, and on a repository with few loose objects most of them needed a new
    fan-out directory first, a mkdir each (mean ~1 ms under load, up to 28 ms measured)
    inside the call. `git prune-packed` (our idle packing) removes the empty ones again,
    so idle time checks. Costs a directory block each (1 MiB for all), as git's own
    repositories with loose objects have."""
    objects = loose_dir(repo, store)
    if objects is None:
        return 0
    try:
        present = {n for n in os.listdir(objects) if len(n) == 2}
    except FileNotFoundError:
        return 0
    made = 0
    for i in range(256):
        name = b"%02x" % i
        if name not in present:
            with contextlib.suppress(FileExistsError):
                os.mkdir(os.path.join(objects, name))
                made += 1
    return made


class Fanouts:
    """`ensure_fanouts` when objects/ changed since the last look (one stat otherwise):
    the daemon asks at start and in idle time."""

    def __init__(self, repo: pygit2.Repository, store: Store) -> None:
        self.repo = repo
        self.store = store
        self.seen = 0

    def check(self) -> None:
        objects = loose_dir(self.repo, self.store)
        try:
            if objects is None or os.stat(objects).st_mtime_ns == self.seen:
                return
            ensure_fanouts(self.repo, self.store)
            self.seen = os.stat(objects).st_mtime_ns
        except OSError:
            return      # no objects/ to speak of: snapshots make what they need


def _create(fanout: bytes, tmp: bytes) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    for _ in range(3):
        try:
            return os.open(tmp, flags, 0o444)
        except FileNotFoundError:
            os.makedirs(fanout, exist_ok=True)      # git makes fan-out directories lazily
        except FileExistsError:
            os.unlink(tmp)                          # a killed writer's, of this pid
    return os.open(tmp, flags, 0o444)


def write_loose(objects: bytes, oid: bytes, kind: int, data: bytes,
                spares: spare_objects.Spares | None = None) -> None:
    """One loose object as git writes it (`tmp_obj_*` in its fan-out directory, renamed
    into place; deflate level 1 as libgit2), with its id already known; in the file of a
    packed object set aside (`spares`) when there is one, else in a new one.

    libgit2's `odb.write` hashed it again, asked every backend whether it existed (a
    rescan of objects/pack on each miss) and went through a temp file in objects/ then a
    link and an unlink: ~13 system calls and 3 directory updates an object against 4
    and 2 here, ~6 objects for each 1-file snapshot. Not fsynced, as libgit2's."""
    hexid = oid.hex()
    fanout = os.path.join(objects, hexid[:2].encode())
    tmp = os.path.join(fanout, b"tmp_obj_gitguard.%d.%s" % (os.getpid(), hexid[2:].encode()))
    body = zlib.compress(b"%s %d\0%s" % (_NAMES[kind], len(data), data), 1)
    fd = spares.take(tmp) if spares is not None else None
    reused = fd is not None
    if fd is None:
        fd = _create(fanout, tmp)
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view):]
        if reused:
            os.ftruncate(fd, len(body))
            os.fchmod(fd, 0o444)            # as a new loose object's
    finally:
        os.close(fd)
    os.replace(tmp, os.path.join(fanout, hexid[2:].encode()))


def spares_of(store: Store) -> spare_objects.Spares:
    """The store's spare object files, one reader of them per process."""
    key = os.fsencode(store.root)
    found = _SPARES.get(key)
    if found is None:
        found = _SPARES[key] = spare_objects.Spares(key)
    return found


def _header(kind: int, size: int) -> bytes:
    """A pack entry's header: type and size, 4 bits then 7 bits a byte, MSB = more."""
    byte = (_PACK_TYPES[kind] << 4) | (size & 0x0F)
    size >>= 4
    out = bytearray()
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def encode(objects: list[tuple[bytes, int, bytes]]) -> tuple[str, bytes, bytes]:
    """(name, pack bytes, version-2 idx bytes) for (raw oid, type, content) triples."""
    parts = [b"PACK", struct.pack(">II", 2, len(objects))]
    offset = 12
    rows: list[tuple[bytes, int, int]] = []      # (oid, crc32, offset)
    for oid, kind, data in objects:
        entry = _header(kind, len(data)) + zlib.compress(data, _LEVEL[kind])
        rows.append((oid, zlib.crc32(entry), offset))
        parts.append(entry)
        offset += len(entry)
    body = b"".join(parts)
    checksum = hashlib.sha1(body).digest()
    pack = body + checksum
    rows.sort()
    fanout = [0] * 256
    for oid, _, _ in rows:
        fanout[oid[0]] += 1
    total = 0
    for i in range(256):
        total += fanout[i]
        fanout[i] = total
    small: list[int] = []
    large: list[int] = []
    for _, _, at in rows:
        if at < 0x80000000:
            small.append(at)
        else:                       # offsets past 2 GiB go to the 64-bit table
            small.append(0x80000000 | len(large))
            large.append(at)
    idx = b"".join([
        b"\xfftOc", struct.pack(">I", 2), struct.pack(">256I", *fanout),
        b"".join(oid for oid, _, _ in rows),
        struct.pack(f">{len(rows)}I", *(crc for _, crc, _ in rows)),
        struct.pack(f">{len(small)}I", *small),
        struct.pack(f">{len(large)}Q", *large), checksum])
    idx += hashlib.sha1(idx).digest()
    return f"pack-{checksum.hex()}", pack, idx


def tmp_paths(pack_dir: Path, name: str) -> tuple[Path, Path]:
    return (pack_dir / f"{packing.TMP_PREFIX}{name}.pack",
            pack_dir / f"{packing.TMP_PREFIX}{name}.idx")


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o444)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        durable.fsync(fh.fileno())


def publish(store: Store, objects: list[tuple[bytes, int, bytes]],
            state: dict[str, Any] | None = None) -> str:
    """Write `objects` as one pack of ours; returns its name. Under the store lock.
    `state`: packs.json as the caller just read it (read once per snapshot, not thrice)."""
    name, pack, idx = encode(objects)
    pack_dir = packing.objects_dir(store.ws) / "pack"
    if (pack_dir / f"{name}.idx").exists():
        return name                 # the same objects, already published
    pack_dir.mkdir(parents=True, exist_ok=True)
    state = packing.settle(store, state)    # what a killed writer left, before the next intent
    tmp_pack, tmp_idx = tmp_paths(pack_dir, name)
    _write(tmp_pack, pack)
    _write(tmp_idx, idx)
    # The intent: from here the pack is ours on record. Not fsynced (see packing.record):
    # the pack and its index are, as git's, before anything can name their objects.
    packing.record(store, name, state, sync=False)
    faults.point("snapshot.pack_before_publish")
    os.replace(tmp_pack, pack_dir / f"{name}.pack")
    faults.point("snapshot.pack_between_renames")
    os.replace(tmp_idx, pack_dir / f"{name}.idx")
    return name
