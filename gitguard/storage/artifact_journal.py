"""Artifact journals: a tool call's small artifacts appended to one file per session.

Each `call begin` wrote its input, and each `call end` its patch and result, as files of
their own: a file created, fsynced and renamed, and the directory fsynced, three times
per call. Now the call path appends them to `artifacts/journal-<session>.log` and
fsyncs that once per command (the directory only when the journal is new).

One line per artifact, so a torn append is repaired like any journal of the store
(`durable.repair_torn_tail`, under the store lock, before the next append):

    <name, percent-encoded> <sha256[:16] of what follows the second space> <payload>\\n

where the payload is `t` + a JSON string (ASCII) when the stored bytes are UTF-8 text,
else `b` + base64. The stored bytes are what `write_artifact` would have put in the file
(sealed when encryption is on), so `Store.read_artifact` returns the same plaintext.
Refs do not change (`artifacts/NAME`): `Store` looks for the file, then the journals,
then gc's bundles. gc moves what the journals hold into its bundle and removes them
(gitguard.retention.artifacts); names are unique per store, so the lookup needs no session.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from urllib.parse import quote, unquote

from gitguard.errors import CorruptRecord
from gitguard.storage import durable, fsync_pool

PREFIX, SUFFIX = "journal-", ".log"
_SUM_LEN = 16


def is_journal(name: str) -> bool:
    return name.startswith(PREFIX) and name.endswith(SUFFIX)


def journals(directory: Path) -> list[Path]:
    try:
        return sorted(directory / n for n in os.listdir(directory) if is_journal(n))
    except FileNotFoundError:
        return []


def path_for(directory: Path, session_id: str) -> Path:
    # Session ids are ref-safe (letters, digits, '_', '-', '.'): quoted all the same.
    return directory / f"{PREFIX}{quote(session_id, safe='')}{SUFFIX}"


def encode(name: str, stored: bytes) -> bytes:
    try:
        text = stored.decode()
        body = b"t" + json.dumps(text, ensure_ascii=True).encode()
    except UnicodeDecodeError:
        body = b"b" + base64.b64encode(stored)
    rest = quote(name, safe="").encode() + b" "
    digest = hashlib.sha256(body).hexdigest()[:_SUM_LEN].encode()
    return rest + digest + b" " + body + b"\n"


def decode(line: bytes) -> tuple[str, bytes] | None:
    """(name, stored bytes) of a whole line, or None when it does not check out."""
    parts = line.rstrip(b"\n").split(b" ", 2)
    if len(parts) != 3:
        return None
    quoted, digest, body = parts
    if hashlib.sha256(body).hexdigest()[:_SUM_LEN].encode() != digest:
        return None
    try:
        if body[:1] == b"t":
            stored = json.loads(body[1:]).encode()
        elif body[:1] == b"b":
            stored = base64.b64decode(body[1:], validate=True)
        else:
            return None
    except ValueError:
        return None
    return unquote(quoted.decode("ascii", errors="replace")), stored


def append(path: Path, items: Iterable[tuple[str, bytes]], *, background: bool = False
           ) -> Callable[[], None]:
    """Append (name, stored bytes) lines and fsync; the directory too when the journal is
    new. Under the store lock, after the torn-tail repair (`Store.append_artifacts`).

    Returns `wait`: it returns once the lines are durable (raising what the fsync
    raised). `background=True` runs the fsync in a thread, so the caller's next writes
    (a checkpoint's) overlap it; the caller must `wait()` before any record names them."""
    payload = b"".join(encode(name, stored) for name, stored in items)
    if not payload:
        return _durable
    created = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, durable.FILE_MODE)
    try:
        view = memoryview(payload)
        while view:                     # a short write (a full disk) is not a silent one
            view = view[os.write(fd, view):]
    except BaseException:
        os.close(fd)
        raise
    if not background:
        _sync(fd, path, created)
        return _durable
    return _in_background(lambda: _sync(fd, path, created))


# The fsync runs on gitguard.storage.fsync_pool's workers (kept per process, not a thread per
# append).
_in_background = fsync_pool.run


def _sync(fd: int, path: Path, created: bool) -> None:
    try:
        durable.fsync(fd)
    finally:
        os.close(fd)
    if created:
        durable.fsync_dir(path.parent)


def _durable() -> None:
    """wait() of an append that is durable already."""


def read(path: Path) -> dict[str, bytes]:
    """Every whole, checked line of a journal: name -> stored bytes (the last wins)."""
    found: dict[str, bytes] = {}
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return found
    for line in raw.splitlines(keepends=True):
        if not line.endswith(b"\n"):
            break                       # a torn tail: never named by a record
        record = decode(line)
        if record is not None:
            found[record[0]] = record[1]
    return found


# Lines whose spot a Journals keeps per journal: a call's end reads back the input its
# begin appended a few lines before. An older line is found by a scan of the file.
KEEP = 512


class Journals:
    """Where journaled artifacts are, per journal: name -> (offset, length) of its line,
    for the newest KEEP lines; each journal read once and then only what was appended
    since. A name not among them is looked for in the older part of the file (a request
    for history, or a fresh process: the cost of the old full index, once per lookup).
    `placed`: which journal this process appended each recent name to, looked in first."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        # path -> (inode, bytes indexed, bytes before the kept spots, spots)
        self._seen: dict[Path, tuple[int, int, int, dict[str, tuple[int, int]]]] = {}
        self._placed: dict[str, Path] = {}

    def appended(self, path: Path, names: Iterable[str]) -> None:
        for name in names:
            self._placed.pop(name, None)
            self._placed[name] = path
        while len(self._placed) > KEEP:
            del self._placed[next(iter(self._placed))]

    def find(self, name: str) -> bytes | None:
        """The stored bytes of `name`; None when no journal has a line of it. A line of it
        that fails its checksum raises CorruptRecord (not None: it was there, and is not
        what was written)."""
        quoted = quote(name, safe="").encode() + b" "
        damaged: Path | None = None
        found = journals(self.directory)
        placed = self._placed.get(name)
        if placed in found:
            found.remove(placed)
            found.insert(0, placed)
        for path in found:
            try:
                spot = self._index(path, quoted)
                if spot is None:
                    continue
                with open(path, "rb") as fh:
                    fh.seek(spot[0])
                    record = decode(fh.read(spot[1]))
            except FileNotFoundError:
                continue                # gc bundled it just now: the bundle has it
            if record is not None and record[0] == name:
                return record[1]
            damaged = damaged or path
        if damaged is not None:
            raise CorruptRecord(
                f"artifacts/{damaged.name}: the line of {name} fails its checksum "
                "(edited or damaged)",
                "it cannot be read back; `gitguard verify` lists every record that names it")
        return None

    def _index(self, path: Path, quoted: bytes) -> tuple[int, int] | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            self._seen.pop(path, None)
            raise
        inode, done, floor, spots = self._seen.get(path, (st.st_ino, 0, 0, {}))
        if inode != st.st_ino or st.st_size < done:
            done, floor, spots = 0, 0, {}       # rewritten or cut (a torn tail repaired)
        if st.st_size > done:
            with open(path, "rb") as fh:
                fh.seek(done)
                tail = fh.read(st.st_size - done)
            at = 0
            while True:
                end = tail.find(b"\n", at)
                if end < 0:
                    break
                space = tail.find(b" ", at, end)
                if space > at:
                    key = tail[at:space + 1].decode("ascii", errors="replace")
                    spots.pop(key, None)        # re-inserted: the newest stays last
                    spots[key] = (done + at, end + 1 - at)
                at = end + 1
            done += at
            for key in list(spots)[:max(0, len(spots) - KEEP)]:
                offset, length = spots.pop(key)     # oldest first: lines before `floor`
                floor = max(floor, offset + length)  # are all dropped or superseded
        self._seen[path] = (st.st_ino, done, floor, spots)
        key = quoted.decode("ascii", errors="replace")
        spot = spots.get(key)
        if spot is None and floor:
            spot = _scan(path, quoted, floor)
        return spot


def _scan(path: Path, quoted: bytes, limit: int) -> tuple[int, int] | None:
    """The spot of the last line of `quoted` starting before `limit` (its newer lines,
    if any, are among the spots kept)."""
    with open(path, "rb") as fh:
        head = fh.read(limit)
        start = head.rfind(b"\n" + quoted) + 1
        if not start and not head.startswith(quoted):
            return None
        fh.seek(start)
        line = fh.readline()
    return (start, len(line)) if line.endswith(b"\n") else None
