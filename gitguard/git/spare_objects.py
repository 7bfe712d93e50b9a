"""Loose-object files kept for reuse once packed, instead of deleted and created again.

A call writes ~5 loose objects (a blob, the trees above it, a commit) and packing
deletes them again a few hundred calls later. On ext4 without a journal the kernel
skips inodes freed in the last ~30 s when it allocates one (`recently_deleted` in
fs/ext4/ialloc.c), one inode-table lookup each: with packing freeing ~850 inodes every
few seconds in the groups where the next objects are made, creating a loose object
went from 0.04 ms to 0.7-0.8 ms (in-process, 1k bench repository: 58 ms per 300 calls
at call 300, 1,150-1,300 ms from call 1,500 to 10,000, most of the per-call growth).
A spare is a packed object's file renamed into the store instead of deleted; the next
loose object takes it back by a rename: no inode freed, none allocated.

A spare is reused only 2 s after it was set aside (its name carries the time): a reader
that found the object's file just before it moved (git and libgit2 read a loose object
whole and close it) is long done before the file is truncated and written again.
Anything unusual (another filesystem, no store, a spare taken by another process)
falls back to creating the file, as before."""

from __future__ import annotations

import contextlib
import os
import time

SPARE_DIR = b"spare-objects"
SPARE_MAX = 4096        # two packings' worth (~850-1,850 objects each): one has aged
REUSE_AFTER_NS = 2_000_000_000
SCAN_BATCH = 64         # spares a scan picks out (Spares._scan)
_NEVER = 1 << 63
_PRIVATE = 0o600        # writable by us while set aside; 0444 again once written


class Spares:
    """The spare files of one store (`<store>/spare-objects`)."""

    def __init__(self, store_dir: bytes) -> None:
        self.dir = os.path.join(store_dir, SPARE_DIR)
        self.names: list[bytes] = []        # spares old enough to take, from the last scan
        self.listed = -1                    # the directory's mtime at the last scan
        self.retry_at = 0                   # when the young spares it skipped come of age
        self.failed = False                 # a rename failed for good (another filesystem)

    def take(self, target: bytes) -> int | None:
        """A spare renamed to `target` and opened for writing, or None. Not emptied: the
        caller writes over the old bytes and then cuts the file to its length, so a new
        object no bigger than the old one frees and allocates no block either."""
        while True:
            name = self._next()
            if name is None:
                return None
            try:
                _rename_into(os.path.join(self.dir, name), target)
            except FileNotFoundError:
                continue                    # another process took this one
            except OSError:
                self.failed = True
                return None
            try:
                return os.open(target, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(target)
                return None

    def _next(self) -> bytes | None:
        if not self.names and not self._scan():
            return None
        return self.names.pop()

    def _scan(self) -> bool:
        """Up to SCAN_BATCH spares old enough to take, in directory order: a process that
        writes a few objects reads a few dozen names, not all 4,096 (a full listing and
        sort took 2.5 ms). Scans again once the directory changed, or once the young
        spares it passed over are old enough."""
        if self.failed:
            return False
        now = time.time_ns()
        try:
            mtime = os.stat(self.dir).st_mtime_ns
        except OSError:
            return False
        if mtime == self.listed and now < self.retry_at:
            return False
        self.listed = mtime
        self.retry_at = _NEVER
        try:
            with os.scandir(self.dir) as entries:
                for entry in entries:
                    born, _, _ = entry.name.partition(b"-")
                    if not born.isdigit():
                        continue                # not ours
                    if now - int(born) >= REUSE_AFTER_NS:
                        self.names.append(entry.name)
                        if len(self.names) >= SCAN_BATCH:
                            break
                    else:
                        self.retry_at = min(self.retry_at, int(born) + REUSE_AFTER_NS)
        except OSError:
            return False
        return bool(self.names)


def _rename_into(spare: bytes, target: bytes) -> None:
    try:
        os.rename(spare, target)
    except FileNotFoundError:
        fanout = os.path.dirname(target)
        if os.path.isdir(fanout):
            raise
        os.makedirs(fanout, exist_ok=True)  # git makes fan-out directories lazily
        os.rename(spare, target)


def set_aside(store_dir: bytes, objects: bytes, oids: list[str]) -> int:
    """Move packed loose objects into the spares (up to SPARE_MAX); how many moved.
    The caller has recorded the pack holding them: what is left loose goes to
    `git prune-packed`."""
    spare_dir = os.path.join(store_dir, SPARE_DIR)
    try:
        os.makedirs(spare_dir, mode=0o700, exist_ok=True)
        room = SPARE_MAX - len(os.listdir(spare_dir))
    except OSError:
        return 0
    moved = 0
    now = b"%d" % time.time_ns()
    for oid in oids[:max(room, 0)]:
        loose = os.path.join(objects, oid[:2].encode(), oid[2:].encode())
        spare = os.path.join(spare_dir, b"%s-%s" % (now, oid.encode()))
        try:
            os.rename(loose, spare)
        except FileNotFoundError:
            continue
        except OSError:
            break                           # another filesystem, a read-only store: stop
        with contextlib.suppress(OSError):
            os.chmod(spare, _PRIVATE)
        moved += 1
    return moved


def clear(store_dir: bytes) -> int:
    """Delete every spare (`gitguard gc`); how many."""
    spare_dir = os.path.join(store_dir, SPARE_DIR)
    try:
        names = os.listdir(spare_dir)
    except OSError:
        return 0
    for name in names:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(spare_dir, name))
    return len(names)
