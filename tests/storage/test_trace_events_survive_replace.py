"""trace.emit keeps trace.jsonl open between events: every event still lands in the file
readers read, when gc replaced it or it was removed in between."""

from __future__ import annotations

from pathlib import Path

from gitguard.api import Guard
from gitguard.storage import trace_log


def _names(guard: Guard) -> list[str]:
    return [str(r["name"]) for r in trace_log.read_records(guard.store)]


def test_events_follow_the_file_across_replace_and_removal(repo: Path) -> None:
    guard = Guard.open(repo)
    store = guard.store
    with store.writing():
        for n in range(3):
            trace_log.emit(store, "gc", f"test.a{n}")
        held = {path for path in trace_log._OPEN}
        assert store.trace_path in held, "the file is held open"
        trace_log.compact(store, "0000")            # gc: a new trace.jsonl (another inode)
        trace_log.emit(store, "gc", "test.b0")
        trace_log.emit(store, "gc", "test.b1")
    mine = [n for n in _names(guard) if n.startswith("test.")]
    assert mine == ["test.a0", "test.a1", "test.a2", "test.b0", "test.b1"]
    assert store.trace_path.read_bytes().count(b"test.b") == 2
    store.trace_path.unlink()
    store.trace_segment_path.unlink()
    with store.writing():
        trace_log.emit(store, "gc", "test.c0")
    assert _names(guard) == ["test.c0"]
    trace_log.forget()
    with store.writing():
        trace_log.emit(store, "gc", "test.c1")
    assert _names(guard) == ["test.c0", "test.c1"]
