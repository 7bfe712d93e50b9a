"""Trace events: one checksummed line per checkpoint, tool start/end, recovery, rollback.

Events live in two places: trace.jsonl, where they are appended, and trace.segment,
where `gitguard gc` compacts the older ones (JSON lines in one xz stream, ~16 bytes an
event against ~290 in trace.jsonl, one sha256 over them all in a header line).
Readers see the segment's events, then trace.jsonl's.

The segment's header names the trace.jsonl bytes it absorbed (length and sha256): gc
writes the segment first and empties trace.jsonl second, so a crash between the two
leaves absorbed events in both places, and readers skip them in trace.jsonl.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from gitguard import clock, faults
from gitguard.errors import CorruptRecord
from gitguard.models import SCHEMA_VERSION, TraceEvent, TraceType
from gitguard.storage import durable
from gitguard.storage.store import Store

SEGMENT_FORMAT = "gitguard-trace-segment"


def emit(store: Store, type_: TraceType, name: str, *, session_id: str | None = None,
         duration_ms: float | None = None, **data: Any) -> None:
    """Under the store lock. Not fsynced: the trace observes, it protects nothing, and an
    fsync per event would slow every tool call; a crash may lose the newest events and
    a torn one is repaired by the next writer, like any journal's."""
    _append(store.trace_path, durable.encode_line(
        event_json(type_, name, session_id=session_id, duration_ms=duration_ms, data=data)))


_PLAIN = frozenset({str, int, bool, type(None)})
_TYPES = frozenset(get_args(TraceType))


def event_json(type_: TraceType, name: str, *, session_id: str | None,
               duration_ms: float | None, data: dict[str, Any]) -> dict[str, Any]:
    """`TraceEvent(...).to_json()`, built directly when the data is plain JSON scalars (a
    tool call's events are): the model's construction and dump cost ~0.2 ms an event,
    two per tool call. Anything else (a path, a list, NaN) goes through the model."""
    at = clock.stamp()
    duration = None if duration_ms is None else round(duration_ms, 3)
    if (type_ in _TYPES and (duration is None or math.isfinite(duration))
            and all(type(v) in _PLAIN or (type(v) is float and math.isfinite(v))
                    for v in data.values())):
        return {"schemaVersion": SCHEMA_VERSION, "at": at, "type": type_, "name": name,
                "sessionId": session_id, "durationMs": duration, "data": dict(data)}
    return TraceEvent(at=at, type=type_, name=name, session_id=session_id,
                      duration_ms=duration, data=data).to_json()


# trace.jsonl stays open between events (a daemon emits ~4 per tool call): one stat per
# event instead of an exists, an open and a close. A file replaced since (gc's compact, a
# store made anew) has another inode, and is opened again; the one held open cannot
# have its inode number reused while it is held.
_OPEN: dict[Path, tuple[int, int, int]] = {}        # path -> (fd, st_dev, st_ino)
_OPEN_MAX = 4


def _append(path: Path, payload: bytes) -> None:
    """durable.append_jsonl(path, ..., sync=False) with the file kept open; the same
    fault points."""
    fd = _held(path)
    faults.point("jsonl.before_write")
    if faults.active("jsonl.torn_write") and len(payload) > 1:
        os.write(fd, payload[: len(payload) // 2])
        faults.point("jsonl.torn_write")
    os.write(fd, payload)
    faults.point("jsonl.after_fsync")


def _held(path: Path) -> int:
    held = _OPEN.pop(path, None)
    if held is not None:
        try:
            st = os.stat(path)
            if (st.st_dev, st.st_ino) == held[1:]:
                _OPEN[path] = held
                return held[0]
        except OSError:
            pass
        os.close(held[0])
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, durable.FILE_MODE)
    st = os.fstat(fd)
    while len(_OPEN) >= _OPEN_MAX:
        os.close(_OPEN.pop(next(iter(_OPEN)))[0])
    _OPEN[path] = (fd, st.st_dev, st.st_ino)
    return fd


def forget() -> None:
    """Close the trace files held open."""
    while _OPEN:
        os.close(_OPEN.popitem()[1][0])


@dataclass
class Segment:
    records: list[dict[str, Any]]
    live_bytes: int = 0          # how many leading bytes of trace.jsonl it absorbed
    live_sha256: str = ""


def read_segment(store: Store) -> Segment:
    """The compacted events (none when there is no segment); CorruptRecord when damaged."""
    raw = durable.read_bytes(store.trace_segment_path)
    if raw is None:
        return Segment([])
    head, _, body = raw.partition(b"\n")
    try:
        header = json.loads(head)
        data = lzma.decompress(body)
    except (ValueError, lzma.LZMAError) as exc:
        raise CorruptRecord("trace.segment cannot be read",
                            "run `gitguard verify`; remove trace.segment to drop the old "
                            "trace events (nothing else depends on them)") from exc
    if not isinstance(header, dict) or header.get("format") != SEGMENT_FORMAT \
            or hashlib.sha256(data).hexdigest() != header.get("sha256"):
        raise CorruptRecord("trace.segment is corrupt: sha256 mismatch",
                            "remove trace.segment to drop the old trace events "
                            "(nothing else depends on them)")
    records = [json.loads(line) for line in data.split(b"\n") if line]
    return Segment(records, int(header.get("liveBytes", 0)), str(header.get("liveSha256", "")))


def _live(store: Store, segment: Segment) -> tuple[bytes, list[dict[str, Any]]]:
    """trace.jsonl's bytes, and its records less those the segment already holds."""
    raw = durable.read_bytes(store.trace_path) or b""
    skip = segment.live_bytes
    if not skip or len(raw) < skip or hashlib.sha256(raw[:skip]).hexdigest() != \
            segment.live_sha256:
        skip = 0
    return raw, durable.parse_jsonl(store.trace_path, raw[skip:]).records


def read_records(store: Store) -> list[dict[str, Any]]:
    segment = read_segment(store)
    return segment.records + _live(store, segment)[1]


def read(store: Store) -> list[TraceEvent]:
    return [TraceEvent.model_validate(r) for r in read_records(store)]


def compact(store: Store, cutoff: str) -> int:
    """Move every event into the segment, less those older than `cutoff`. Under the store
    lock (gc). Returns how many events were dropped."""
    segment = read_segment(store)
    raw, live = _live(store, segment)
    everything = segment.records + live
    kept = [r for r in everything if str(r.get("at", "")) >= cutoff]
    if not live and len(kept) == len(everything):
        return 0
    data = b"".join(durable.canonical_json(r) + b"\n" for r in kept)
    header = {"format": SEGMENT_FORMAT, "version": 1, "events": len(kept),
              "sha256": hashlib.sha256(data).hexdigest(), "liveBytes": len(raw),
              "liveSha256": hashlib.sha256(raw).hexdigest()}
    durable.atomic_write(store.trace_segment_path,
                         durable.canonical_json(header) + b"\n" + lzma.compress(data, preset=6))
    faults.point("gc.after_trace_segment")
    if raw:
        durable.atomic_write(store.trace_path, b"")
    return len(everything) - len(kept)
