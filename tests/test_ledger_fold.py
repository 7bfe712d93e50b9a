"""The ledger fold cache must give exactly what a full, line-by-line read gives, and must
never hide a corrupt line."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from crashkit import scratch_root
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitguard import clock, durable, ledger, ledger_fold
from gitguard.errors import CorruptRecord
from gitguard.models import ToolLedgerEntry
from gitguard.store import Store
from gitguard.workspace import discover


def reference(path: Path) -> tuple[dict[str, Any], list[str], dict[str, int], int]:
    """The fold as the ledger defines it: every line decoded, the newest state of each call."""
    latest: dict[str, Any] = {}
    order: list[str] = []
    first: dict[str, int] = {}
    last = 0
    for record in durable.read_jsonl(path).records:
        last = max(last, record["seq"])
        entry = record.get("entry")
        if entry is not None:
            if entry["callId"] not in latest:
                order.append(entry["callId"])
                first[entry["callId"]] = record["seq"]
            latest[entry["callId"]] = entry
    return latest, order, first, last


def folded(store: Store) -> tuple[dict[str, Any], list[str], dict[str, int], int]:
    state = ledger.read(store)
    return ({c: e.to_json() for c, e in state.entries.items()}, state.order, state.first_seq,
            state.last_seq)


def entry(number: int, status: str, path: str = "a.txt") -> ToolLedgerEntry:
    return ToolLedgerEntry(
        call_id=f"call_{number}", step_id=f"step_{number}", tool_name="Write",
        input_hash=ledger.input_hash({"n": number}), status=status, risk_level="low",
        idempotency="conditional", replay_policy="auto", session_id="s1",
        planned_at=clock.stamp(), declared_writes=(path,))


def append_calls(store: Store, numbers: range, path: str = "a.txt") -> None:
    with store.writing():
        state = ledger.read(store)
        for n in numbers:
            planned = entry(n, "planned", path)
            ledger.append_entries(store, state, [planned])
            ledger.append_entries(store, state, [planned.model_copy(update={"status": "started"})])
            if n % 3:
                ledger.append_entries(store, state, [
                    planned.model_copy(update={"status": "succeeded"})])


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.setattr(ledger_fold, "FOLD_EVERY", 8)   # exercise the cache on a short ledger
    work = scratch_root()
    made = Store(discover(work))
    append_calls(made, range(1, 13))
    ledger.read(made)
    yield made
    shutil.rmtree(work, ignore_errors=True)


def test_the_cache_is_written_and_used_and_agrees(store: Store) -> None:
    cache = ledger_fold.cache_path(store.ledger_path)
    assert cache.is_file(), "a long enough read leaves a fold cache"
    assert folded(store) == reference(store.ledger_path)
    append_calls(store, range(13, 16))
    assert folded(store) == reference(store.ledger_path)
    cache.write_bytes(b"not a cache\n")
    assert folded(store) == reference(store.ledger_path)


def test_a_corrupt_line_under_the_cache_is_still_reported(store: Store) -> None:
    lines = store.ledger_path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b"step_", b"stop_")
    store.ledger_path.write_bytes(b"\n".join(lines))
    with pytest.raises(CorruptRecord, match="ledger.jsonl line 3 "):
        ledger.read(store)


def test_non_utf8_paths_survive_the_fast_parser(store: Store) -> None:
    odd = b"caf\xe9.txt".decode("utf-8", "surrogateescape")
    append_calls(store, range(40, 50), path=odd)
    assert ledger.read(store).entries["call_40"].declared_writes == (odd,)
    assert folded(store) == reference(store.ledger_path)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=10**6))
def test_cut_anywhere_with_a_cache_folds_like_a_full_read(store: Store, cut: int) -> None:
    whole = store.ledger_path.read_bytes()
    ledger.read(store)                       # the cache covers the whole ledger
    store.ledger_path.write_bytes(whole[: cut % (len(whole) + 1)])
    try:
        assert folded(store) == reference(store.ledger_path)
        assert ledger.read(store).torn == durable.read_jsonl(store.ledger_path).torn
    finally:
        store.ledger_path.write_bytes(whole)
