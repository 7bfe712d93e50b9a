"""The ledger's compacted prefix: `gitguard gc` moves ledger.jsonl's lines into
ledger.segment, one xz stream under a header line, the way trace.segment holds old trace
events. A thousand calls' ledger lines (~1.7 kB each: checksums, hashes, paths) shrink
about tenfold.

The segment holds the absorbed lines *verbatim*, each with its own checksum, so the
ledger a reader sees is one byte stream: the segment's lines, then ledger.jsonl's. Every
reader folds and verifies that stream exactly as it did ledger.jsonl alone (line
checksums, seq order, transitions); ledger.fold.json describes a prefix of the same
stream, so compaction does not invalidate it. A store written before segments existed
has no segment: its stream is ledger.jsonl, read as before.

Crash safety, as trace.segment's: the header names the ledger.jsonl bytes it absorbed
(length and sha256). gc writes the segment (fsynced, atomic rename) first and empties
ledger.jsonl second; a crash between the two leaves the absorbed lines in both places,
and readers skip ledger.jsonl's copy because its prefix still matches the header. Once
ledger.jsonl has been emptied and new lines appended, its prefix no longer matches and
nothing is skipped. Either way every acknowledged record is read exactly once.

Unlike the trace, the ledger is the source of truth: a damaged segment is an error (the
sha256 over the decompressed lines), never silently dropped.
"""

from __future__ import annotations

import hashlib
import json
import lzma
from dataclasses import dataclass
from pathlib import Path

from gitguard import faults
from gitguard.errors import CorruptRecord
from gitguard.storage import durable

SEGMENT_FORMAT = "gitguard-ledger-segment"
SEGMENT_NAME = "ledger.segment"


@dataclass(frozen=True)
class Segment:
    data: bytes = b""        # the absorbed ledger lines, verbatim (checksummed JSONL)
    live_bytes: int = 0      # how many leading bytes of ledger.jsonl it absorbed
    live_sha256: str = ""
    lines: int = 0


def segment_path(ledger_path: Path) -> Path:
    return ledger_path.with_name(SEGMENT_NAME)


def read_segment(ledger_path: Path) -> Segment:
    """The compacted lines (none when there is no segment); CorruptRecord when damaged."""
    raw = durable.read_bytes(segment_path(ledger_path))
    if raw is None:
        return Segment()
    head, _, body = raw.partition(b"\n")
    try:
        header = json.loads(head)
        data = lzma.decompress(body)
    except (ValueError, lzma.LZMAError) as exc:
        raise _damaged("cannot be read") from exc
    if not isinstance(header, dict) or header.get("format") != SEGMENT_FORMAT:
        raise _damaged("is not a ledger segment")
    if hashlib.sha256(data).hexdigest() != header.get("sha256") or \
            (data and not data.endswith(b"\n")):
        raise _damaged("is corrupt: sha256 mismatch")
    return Segment(data, int(header.get("liveBytes", 0)), str(header.get("liveSha256", "")),
                   int(header.get("lines", 0)))


def _damaged(what: str) -> CorruptRecord:
    return CorruptRecord(f"{SEGMENT_NAME} {what}",
                         "run `gitguard verify`; the file was changed by something other "
                         "than gitguard (restore it from a backup of .git/gitguard)")


def skip(segment: Segment, live: bytes) -> int:
    """How many leading bytes of ledger.jsonl (`live`) the segment already holds."""
    n = segment.live_bytes
    if not n or len(live) < n or hashlib.sha256(live[:n]).hexdigest() != segment.live_sha256:
        return 0
    return n


def stream(ledger_path: Path, live: bytes) -> bytes:
    """The whole ledger: the segment's lines, then ledger.jsonl's (`live`) not in it."""
    segment = read_segment(ledger_path)
    if not segment.data and not segment.live_bytes:
        return live
    return segment.data + live[skip(segment, live):]


def read_stream(ledger_path: Path) -> bytes | None:
    """The whole ledger's bytes; None when neither file exists."""
    live = durable.read_bytes(ledger_path)
    if live is None and not segment_path(ledger_path).exists():
        return None
    return stream(ledger_path, live or b"")


def compact(ledger_path: Path) -> int:
    """Move ledger.jsonl's complete lines into the segment. Under the store lock (gc).
    Returns how many lines were moved. A torn tail (never acknowledged) stays in
    ledger.jsonl for the next writer's repair to set aside, as before."""
    segment = read_segment(ledger_path)
    live = durable.read_bytes(ledger_path) or b""
    end = live.rfind(b"\n") + 1
    start = skip(segment, live)
    moved = live[start:end]
    if start == end:
        if start:          # a crash after the segment, before ledger.jsonl was emptied
            durable.atomic_write(ledger_path, live[end:])
        return 0
    data = segment.data + moved
    lines = segment.lines + moved.count(b"\n")
    header = {"format": SEGMENT_FORMAT, "version": 1, "lines": lines,
              "sha256": hashlib.sha256(data).hexdigest(), "liveBytes": end,
              "liveSha256": hashlib.sha256(live[:end]).hexdigest()}
    durable.atomic_write(segment_path(ledger_path),
                         durable.canonical_json(header) + b"\n" + lzma.compress(data, preset=6))
    faults.point("gc.after_ledger_segment")
    durable.atomic_write(ledger_path, live[end:])
    return moved.count(b"\n")
