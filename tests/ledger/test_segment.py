"""gc moves the ledger's lines into ledger.segment: every reader (the fold, the
in-process tail reads, verify, the artifact references, `gitguard ledger`) sees the same
ledger as before, a crash between the segment and emptying ledger.jsonl shows each record
once, and a damaged segment is reported, never misread."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gitguard import verify
from gitguard.api import Guard
from gitguard.errors import CorruptRecord
from gitguard.ledger import fold, journal
from gitguard.ledger import segment as ledger_segment
from gitguard.retention import artifacts
from gitguard.storage import durable
from gitguard.storage.store import Store
from tests.helpers.commands import gg
from tests.helpers.storage import GC_ENV, calls


def full_read(store: Store) -> list[dict[str, Any]]:
    """A fresh process's read: no in-process fold, no fold cache."""
    journal.forget()
    fold.cache_path(store.ledger_path).unlink(missing_ok=True)
    return [e.to_json() for e in journal.read(store).in_order()]


def reference(raw: bytes) -> list[dict[str, Any]]:
    """The slow way: every line decoded and folded, no cache."""
    latest: dict[str, dict[str, Any]] = {}
    for record in durable.parse_jsonl(Path("ledger.jsonl"), raw).records:
        fold.apply(latest, record)
    return [fold.validate({k: v})[k].to_json() for k, v in latest.items()]


def test_gc_moves_the_ledger_into_a_segment_that_every_reader_reads(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    calls(repo, guard, 6)
    store = guard.store
    before = store.ledger_path.read_bytes()
    assert ledger_segment.read_stream(store.ledger_path) == before   # no segment: as before
    entries = full_read(store)
    shown = json.loads(gg(repo, "ledger", "--json").stdout)
    named = artifacts.ledger_named(guard.ledger())
    gg(repo, "gc", env=GC_ENV)

    assert store.ledger_path.read_bytes() == b""
    segment = ledger_segment.read_segment(store.ledger_path)
    assert segment.data == before            # the absorbed lines, verbatim
    assert ledger_segment.segment_path(store.ledger_path).stat().st_size < len(before) / 3
    assert not fold.cache_path(store.ledger_path).exists()
    assert full_read(store) == entries == reference(before)
    assert json.loads(gg(repo, "ledger", "--json").stdout) == shown
    fresh = Guard.open(repo)
    assert artifacts.ledger_named(fresh.ledger()) == named
    for name in named:                       # still there, bundled by the same gc
        assert fresh.store.read_artifact("artifacts/" + name)
    assert verify.problems(fresh.store, fresh.snap) == []

    # Appends after gc go to ledger.jsonl: a process's incremental reads equal a full read,
    # seqs go on from the segment's, and a second gc absorbs them too.
    journal.read(fresh.store)
    calls(repo, fresh, 3, start=6)
    incremental = [e.to_json() for e in journal.read(fresh.store).in_order()]
    stream = ledger_segment.read_stream(store.ledger_path)
    assert stream is not None and stream.startswith(before)
    assert incremental == full_read(store) == reference(stream)
    assert len(incremental) == 9
    assert verify.problems(fresh.store, fresh.snap) == []
    gg(repo, "gc", env=GC_ENV)
    assert ledger_segment.read_segment(store.ledger_path).data == stream
    assert full_read(store) == incremental


def test_a_crash_between_segment_and_emptying_shows_each_record_once(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    calls(repo, guard, 2)
    store = guard.store
    live = store.ledger_path.read_bytes()
    entries = full_read(store)
    with store.writing():
        assert ledger_segment.compact(store.ledger_path) == live.count(b"\n")
    store.ledger_path.write_bytes(live)       # as if killed before ledger.jsonl was emptied
    assert ledger_segment.read_stream(store.ledger_path) == live
    assert full_read(store) == entries
    journal.read(store)                        # a process holding a mark reads on from it
    calls(repo, guard, 1, start=2)            # appended after the absorbed bytes
    grown = ledger_segment.read_stream(store.ledger_path)
    assert grown is not None and grown.startswith(live) and len(grown) > len(live)
    incremental = [e.to_json() for e in journal.read(store).in_order()]
    assert incremental == full_read(store) == reference(grown)
    assert verify.problems(store, guard.snap) == []
    second = store.ledger_path.read_bytes()
    with store.writing():
        ledger_segment.compact(store.ledger_path)
    assert ledger_segment.read_segment(store.ledger_path).data == grown
    assert store.ledger_path.read_bytes() == b""
    assert full_read(store) == incremental
    # Killed again before emptying, with nothing new: the next gc just empties it.
    store.ledger_path.write_bytes(second)
    with store.writing():
        assert ledger_segment.compact(store.ledger_path) == 0
    assert store.ledger_path.read_bytes() == b""
    assert full_read(store) == incremental


def test_a_damaged_segment_is_reported_not_misread(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    calls(repo, guard, 2)
    gg(repo, "gc", env=GC_ENV)
    store = Guard.open(repo).store
    path = ledger_segment.segment_path(store.ledger_path)
    raw = bytearray(path.read_bytes())
    raw[-3] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptRecord, match="ledger.segment"):
        full_read(store)
    fresh = Guard.open(repo)
    assert any("ledger.segment" in p for p in verify.problems(fresh.store, fresh.snap))
    proc = gg(repo, "ledger", check=False)
    assert proc.returncode == 1 and "ledger.segment" in proc.stderr
