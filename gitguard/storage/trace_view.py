"""Reading the trace: a per-session summary, and following trace.jsonl as it grows."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from gitguard.models import TraceEvent
from gitguard.storage import durable, trace_log
from gitguard.storage.store import Store

STORE_WIDE = "(store)"   # events that belong to no session: gc, packing


@dataclass
class SessionSummary:
    session_id: str
    calls: int = 0
    failed: int = 0
    tool_ms: float = 0.0         # time the tools themselves ran (call start to call end)
    overhead_ms: float = 0.0     # gitguard's own time in `call begin` / `call end`
    checkpoints: int = 0
    snapshot_ms: float = 0.0     # scan + hash + write-tree + checkpoint file, all checkpoints
    bytes_stored: int = 0        # artifacts, checkpoint files, message blobs, hashed files
    events: int = 0
    first_at: str | None = None
    last_at: str | None = None
    other: dict[str, int] = field(default_factory=dict)   # recovery, rollback, conflict, gc

    def add(self, event: TraceEvent) -> None:
        self.events += 1
        self.first_at = self.first_at or event.at
        self.last_at = event.at
        data = event.data
        self.bytes_stored += _int(data.get("bytes"))
        duration = event.duration_ms or 0.0
        if event.name == "tool.start":
            self.calls += 1
            self.overhead_ms += duration
        elif event.name == "tool.end":
            self.overhead_ms += duration
            self.tool_ms += float(data.get("toolMs") or 0.0)
            self.failed += data.get("status") == "failed"
        elif event.type == "checkpoint":
            self.checkpoints += 1
            self.snapshot_ms += duration
        elif event.type not in ("tool", "session"):
            self.other[event.type] = self.other.get(event.type, 0) + 1

    def to_json(self) -> dict[str, Any]:
        return {"sessionId": self.session_id, "calls": self.calls, "failed": self.failed,
                "toolMs": round(self.tool_ms, 3), "overheadMs": round(self.overhead_ms, 3),
                "checkpoints": self.checkpoints, "snapshotMs": round(self.snapshot_ms, 3),
                "bytesStored": self.bytes_stored, "events": self.events,
                "firstAt": self.first_at, "lastAt": self.last_at, "other": self.other}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def summarize(events: list[TraceEvent]) -> list[SessionSummary]:
    """One summary per session, in order of first appearance; store-wide events last."""
    found: dict[str, SessionSummary] = {}
    for event in events:
        key = event.session_id or STORE_WIDE
        found.setdefault(key, SessionSummary(key)).add(event)
    ordered = [s for k, s in found.items() if k != STORE_WIDE]
    return ordered + ([found[STORE_WIDE]] if STORE_WIDE in found else [])


def follow(store: Store, *, poll_seconds: float = 0.2,
           stop: Callable[[], bool] = lambda: False) -> Iterator[TraceEvent]:
    """Every event already in the trace (gc's segment first), then each new one as it is
    appended to trace.jsonl.

    Only whole lines are read, so an append in progress is picked up on the next poll.
    When gc rewrites the file (a new inode, or a shorter file) reading starts over and
    skips what was already yielded, by timestamp (so also what the segment held).
    """
    offset, inode, pending, last_at = 0, None, b"", ""
    for compacted in trace_log.read_segment(store).records:
        event = TraceEvent.model_validate(compacted)
        last_at = event.at
        yield event
    while not stop():
        try:
            info = os.stat(store.trace_path)
        except FileNotFoundError:
            time.sleep(poll_seconds)
            continue
        if info.st_ino != inode or info.st_size < offset:
            replay_from = last_at
            offset, inode, pending = 0, info.st_ino, b""
        else:
            replay_from = ""
        if info.st_size > offset:
            with open(store.trace_path, "rb") as fh:
                fh.seek(offset)
                chunk = fh.read(info.st_size - offset)
            offset += len(chunk)
            pending += chunk
            lines, _, pending = pending.rpartition(b"\n")
            for line in lines.split(b"\n") if lines else []:
                record = durable.decode_line(line)
                if record is None:
                    continue  # `gitguard verify` reports a bad line; following goes on
                event = TraceEvent.model_validate(record)
                if replay_from and event.at <= replay_from:
                    continue
                last_at = event.at
                yield event
            continue
        time.sleep(poll_seconds)


def line_of(event: TraceEvent) -> str:
    """One human line: when, what, session, how long, the interesting data."""
    took = f"{event.duration_ms:9.1f} ms" if event.duration_ms is not None else " " * 12
    data = " ".join(f"{k}={v}" for k, v in event.data.items() if v not in (None, "", [], {}))
    return f"{event.at}  {event.name:<20} {event.session_id or '-':<26} {took}  {data}"
