"""Durable writes: atomic file replace, checksummed JSONL, and the store lock.

Every file gitguard persists goes through one of these helpers so a crash at any
byte leaves either the old or the new content, and a torn append is detected and
kept aside rather than silently dropped.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitguard import faults
from gitguard.errors import CorruptRecord, StoreError

FILE_MODE = 0o600
DIR_MODE = 0o700
_SUM_LEN = 16
_PREFIX = b'{"sum":"'
_MIDDLE = b'","data":'
_DATA_AT = len(_PREFIX) + _SUM_LEN + len(_MIDDLE)


class FsyncCounter:
    """Every fsync the store makes, counted with the time spent in it: how much of a
    command's wall time is the disk's queue rather than our work (the daemon reports it
    per request, `daemon status --json`). `busy_ns` is the time at least one fsync was in
    flight: two concurrent fsyncs (threads) count twice in `wait_ns`, once in `busy_ns`.
    Two clock reads and a lock per fsync: nothing beside the fsync itself."""

    def __init__(self) -> None:
        self.count = 0
        self.wait_ns = 0
        self.busy_ns = 0
        self._inflight = 0
        self._since = 0
        self._lock = threading.Lock()

    def snapshot(self) -> tuple[int, int, int]:
        with self._lock:
            busy = self.busy_ns + (time.perf_counter_ns() - self._since if self._inflight else 0)
            return self.count, self.wait_ns, busy

    def run(self, fd: int) -> None:
        start = time.perf_counter_ns()
        with self._lock:
            if not self._inflight:
                self._since = start
            self._inflight += 1
        try:
            os.fsync(fd)
        finally:
            end = time.perf_counter_ns()
            with self._lock:
                self.count += 1
                self.wait_ns += end - start
                self._inflight -= 1
                if not self._inflight:
                    self.busy_ns += end - self._since


FSYNCS = FsyncCounter()


def fsync(fd: int) -> None:
    """os.fsync, counted (FsyncCounter)."""
    FSYNCS.run(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(path: Path) -> None:
    if not path.is_dir():
        path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)


def replace_unsynced(path: Path, data: bytes) -> None:
    """Write tmp, rename over; no fsync, so a read never waits for the disk. For caches
    only: one a crash left empty or torn must be detected (a checksum) or harmless (read
    again in full). A failure leaves the old file and no temp file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


def atomic_write(path: Path, data: bytes, mode: int = FILE_MODE, sync_dir: bool = True) -> None:
    """Write tmp, fsync, rename over, fsync the directory (`sync_dir=False`: the caller
    fsyncs it once after several writes, before anything names them)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            fsync(fh.fileno())
        faults.point("atomic_write.before_replace")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync_dir:
        fsync_dir(path.parent)


def write_then_name(path: Path, data: bytes, mode: int = FILE_MODE) -> None:
    """Write `path` in place and make it and its directory entry durable: for a file that
    only a later durable record names, with its checksum (a checkpoint file and its index
    row). Until that record exists a torn or half-written file is an unnamed one, which no
    reader takes (recovery.scan sets such files aside), so atomic_write's temp file and
    rename buy nothing here. Nothing may name the file before this returns.

    The two fsyncs run concurrently, the file's here and its directory's on a
    gitguard.storage.fsync_pool worker: their order does not matter (an entry without its data is a
    torn file, data without an entry no file), and together they wait for one journal
    commit (ext4, xfs) instead of two, or overlap their waits where there is no journal.
    When one fails the file is removed and the failure raised."""
    from gitguard.storage import fsync_pool

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        faults.point("durable.before_file_fsync")
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)    # unnamed anyway; do not leave it half written
        raise
    directory_synced = fsync_pool.run(lambda: fsync_dir(path.parent))
    failed: BaseException | None = None
    try:
        fsync(fd)
    except BaseException as exc:  # noqa: BLE001 - raised below, after the directory's
        failed = exc
    finally:
        os.close(fd)
    try:
        directory_synced()
    except BaseException as exc:  # noqa: BLE001 - the first failure is raised below
        failed = failed or exc
    if failed is not None:
        path.unlink(missing_ok=True)
        raise failed


def canonical_json(value: Any) -> bytes:
    # ensure_ascii keeps non-UTF-8 path names (surrogate escapes) representable and round-trippable
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def encode_line(record: dict[str, Any],
                dumps: Callable[[Any], bytes] = canonical_json) -> bytes:
    data = dumps(record)
    digest = hashlib.sha256(data).hexdigest()[:_SUM_LEN].encode()
    return _PREFIX + digest + _MIDDLE + data + b"}\n"


def checked_data(line: bytes) -> bytes | None:
    """The JSON payload of one complete line, or None when its checksum or shape is wrong."""
    if not (line.startswith(_PREFIX) and line.endswith(b"}") and line[_DATA_AT - len(_MIDDLE):
            _DATA_AT] == _MIDDLE):
        return None
    digest = line[len(_PREFIX):len(_PREFIX) + _SUM_LEN]
    data = line[_DATA_AT:-1]
    if hashlib.sha256(data).hexdigest()[:_SUM_LEN].encode() != digest:
        return None
    return data


def checked_payloads(lines: list[bytes]) -> list[bytes | None]:
    """checked_data of each line, in one comprehension: a long journal read in full pays
    no Python call per line for the checksum."""
    sha, head, mid = hashlib.sha256, len(_PREFIX), _DATA_AT - len(_MIDDLE)
    return [data if (line[:head] == _PREFIX and line[mid:_DATA_AT] == _MIDDLE
                     and line[-1:] == b"}" and sha(data).hexdigest()[:_SUM_LEN].encode()
                     == line[head:head + _SUM_LEN]) else None
            for line in lines for data in (line[_DATA_AT:-1],)]


def decode_line(line: bytes, loads: Callable[[bytes], Any] = json.loads
                ) -> dict[str, Any] | None:
    """The record of one complete line, or None when its checksum or shape is wrong."""
    data = checked_data(line)
    if data is None:
        return None
    try:
        value = loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


@dataclass
class JsonlRead:
    records: list[dict[str, Any]] = field(default_factory=list)
    good_bytes: int = 0          # length of the clean prefix
    torn: bytes = b""            # bytes after the last newline (an interrupted append)


def stat_key(path: Path) -> tuple[int, int, int, int] | None:
    """(inode, size, mtime, ctime) of a file, or None when it is gone: whether a file a
    process wrote or read is still the one it saw (any write moves size or the times)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def read_bytes(path: Path) -> bytes | None:
    """A store file's bytes; None when it does not exist, StoreError when it cannot be read."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}",
                         "check the permissions of the gitguard store") from exc


def read_jsonl(path: Path) -> JsonlRead:
    """Read every record; a torn tail is reported, a corrupt middle line raises."""
    raw = read_bytes(path)
    return JsonlRead() if raw is None else parse_jsonl(path, raw)


def parse_jsonl(path: Path, raw: bytes) -> JsonlRead:
    """The records of `raw`, the bytes of `path` (named in errors), as read_jsonl reads them."""
    result = JsonlRead()
    end = raw.rfind(b"\n") + 1
    result.torn = raw[end:]
    offset = 0
    for number, line in enumerate(raw[:end].split(b"\n")[:-1], start=1):
        record = decode_line(line)
        if record is None:
            raise CorruptRecord(
                f"{path.name} line {number} (byte {offset}) is corrupt: checksum mismatch",
                "run `gitguard verify`; the file was changed by something other than gitguard",
            )
        result.records.append(record)
        offset += len(line) + 1
    result.good_bytes = end
    return result


def repair_torn_tail(path: Path) -> bytes:
    """Move an interrupted append aside (never delete it) and cut the file to its clean prefix.

    Must run under the store lock. Returns the torn bytes that were moved aside. Reads only
    the end of the file: every write takes this path, and a long ledger must not cost a
    full decode per write (readers still verify every line they use).
    """
    try:
        good_bytes, torn = _tail(path)
    except FileNotFoundError:
        return b""
    if not torn:
        return b""
    aside = path.with_name(f"{path.name}.torn-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}")
    atomic_write(aside, torn)
    with open(path, "r+b") as fh:
        fh.truncate(good_bytes)
        fh.flush()
        fsync(fh.fileno())
    return torn


def _tail(path: Path, chunk: int = 1 << 16) -> tuple[int, bytes]:
    """(length of the clean prefix, bytes after the last newline), reading from the end."""
    with open(path, "rb") as fh:
        end = fh.seek(0, os.SEEK_END)
        while end > 0:
            start = max(0, end - chunk)
            fh.seek(start)
            newline = fh.read(end - start).rfind(b"\n")
            if newline >= 0:
                good = start + newline + 1
                fh.seek(good)
                return good, fh.read()
            end = start
        fh.seek(0)
        return 0, fh.read()


def append_jsonl(path: Path, records: list[dict[str, Any]], *, sync: bool = True) -> None:
    """Append checksummed lines and fsync before returning. Call under the store lock.

    `sync=False` is for records a crash may lose but never tear silently (the trace).
    """
    payload = b"".join(encode_line(r) for r in records)
    created = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
    try:
        faults.point("jsonl.before_write")
        if faults.active("jsonl.torn_write") and len(payload) > 1:
            os.write(fd, payload[: len(payload) // 2])
            faults.point("jsonl.torn_write")
        _append_whole(fd, payload, path)
        if sync:
            fsync(fd)
    finally:
        os.close(fd)
    if created and sync:
        fsync_dir(path.parent)
    faults.point("jsonl.after_fsync")


def _append_whole(fd: int, payload: bytes, path: Path) -> None:
    """Write all of `payload`, or none of it: os.write may write less than asked (a full
    disk, a file size limit), and a partial line left behind would only be noticed, as a
    torn tail, by the next reader. On failure the file is cut back to where it was."""
    start = os.fstat(fd).st_size
    view = memoryview(payload)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        with contextlib.suppress(OSError):   # else the reader's torn-tail repair keeps them aside
            os.ftruncate(fd, start)
        raise StoreError(f"cannot append to {path.name}: {exc.strerror}",
                         "free disk space (or raise the file size limit) and run the "
                         "command again; nothing was recorded") from None


class StoreLock:
    """An exclusive flock on `<store>/lock`, so two gitguard processes never interleave writes."""

    def __init__(self, path: Path, timeout: float = 30.0) -> None:
        self.path = path
        self.timeout = timeout
        self._fd: int | None = None
        self._depth = 0

    def acquire(self) -> None:
        if self._depth:
            self._depth += 1
            return
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        except OSError as exc:
            raise StoreError(f"cannot open the store lock {self.path}: {exc.strerror}",
                             "check that the store directory is writable") from exc
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise StoreError("the gitguard store is locked by another process",
                                     "wait for it to finish, or check `gitguard daemon status`"
                                     ) from None
                time.sleep(0.005)
        self._fd = fd
        self._depth = 1

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    @contextmanager
    def held(self) -> Iterator[None]:
        self.acquire()
        try:
            yield
        finally:
            self.release()
