"""Trace events: one checksummed line per checkpoint, tool start/end, recovery, rollback."""

from __future__ import annotations

from typing import Any

from gitguard import clock, durable
from gitguard.models import TraceEvent, TraceType
from gitguard.store import Store


def emit(store: Store, type_: TraceType, name: str, *, session_id: str | None = None,
         duration_ms: float | None = None, **data: Any) -> None:
    """Under the store lock. Not fsynced: the trace observes, it protects nothing, and an
    fsync per event would slow every tool call; a crash may lose the newest events and
    a torn one is repaired by the next writer, like any journal's."""
    event = TraceEvent(at=clock.stamp(), type=type_, name=name, session_id=session_id,
                       duration_ms=None if duration_ms is None else round(duration_ms, 3),
                       data=data)
    durable.append_jsonl(store.trace_path, [event.to_json()], sync=False)


def read(store: Store) -> list[TraceEvent]:
    return [TraceEvent.model_validate(r) for r in durable.read_jsonl(store.trace_path).records]
