"""Reading only what was appended to a journal since this process last read it.

Every `call begin`/`call end` reads the whole ledger and checkpoints/index.jsonl; both grow
by a few lines per call, so a full read makes each call cost O(history). A process that has
read a journal once keeps, next to what it folded, a `Mark`: the file's identity (st_dev,
st_ino), the length of the clean prefix it consumed and the last complete line of that
prefix. The next read opens the file, checks the identity, that the file is at least that
long and that the same line still ends the prefix, and then decodes only the bytes after
it. Anything else (the file was replaced, as gc's atomic rewrite does; cut shorter; changed
in place) makes the caller read it in full. Nothing is trusted that is not checked.

A file that did not grow but whose mtime moved was edited in place: read in full. An
in-place edit that also grows the file and keeps the marked line is not detected here;
`gitguard verify` and every fresh process read journals in full and report it.

Appends by other processes are just more bytes after the mark; a torn tail (bytes after
the last newline) is never consumed, so the repair that later cuts it leaves the mark valid.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gitguard.errors import StoreError

_GUARD_MAX = 4096     # a journal line is a few hundred bytes to a few kB


@dataclass(frozen=True)
class Mark:
    dev: int
    ino: int
    offset: int          # bytes of clean prefix already folded
    guard: bytes         # the prefix's last line (or its last _GUARD_MAX bytes)
    size: int            # the file's size and mtime when it was read: a file that did
    mtime_ns: int        # not grow but was touched was changed in place


@dataclass(frozen=True)
class Tail:
    data: bytes          # complete lines appended after the mark
    torn: bytes          # bytes after the last newline
    mark: Mark           # the mark after consuming `data`


def _guard(raw: bytes, end: int) -> bytes:
    start = raw.rfind(b"\n", max(0, end - _GUARD_MAX), max(0, end - 1)) + 1
    return raw[max(start, end - _GUARD_MAX):end]


def mark_of(raw: bytes, st: os.stat_result) -> Mark:
    """The mark of a full read of `raw`, the bytes read with stat `st`."""
    end = raw.rfind(b"\n") + 1
    return Mark(st.st_dev, st.st_ino, end, _guard(raw, end), len(raw), st.st_mtime_ns)


def read_full(path: Path) -> tuple[bytes, os.stat_result | None]:
    """The whole file and its stat taken on the same descriptor (None when missing)."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            return fh.read(), st
    except FileNotFoundError:
        return b"", None
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}",
                         "check the permissions of the gitguard store") from exc


def read_after(path: Path, mark: Mark) -> Tail | None:
    """What was appended after `mark`, or None when the file is not the one marked."""
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if (st.st_dev, st.st_ino) != (mark.dev, mark.ino) or st.st_size < mark.offset:
                return None
            if st.st_size <= mark.size and st.st_mtime_ns != mark.mtime_ns:
                return None
            start = mark.offset - len(mark.guard)
            fh.seek(start)
            chunk = fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror}",
                         "check the permissions of the gitguard store") from exc
    if not chunk.startswith(mark.guard):
        return None
    rest = chunk[len(mark.guard):]
    end = rest.rfind(b"\n") + 1
    if not end:
        return Tail(b"", rest, Mark(mark.dev, mark.ino, mark.offset, mark.guard,
                                    mark.offset + len(rest), st.st_mtime_ns))
    whole = mark.guard + rest[:end]
    return Tail(rest[:end], rest[end:],
                Mark(mark.dev, mark.ino, mark.offset + end, _guard(whole, len(whole)),
                     mark.offset + len(rest), st.st_mtime_ns))
