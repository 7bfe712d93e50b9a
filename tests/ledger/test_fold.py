"""The ledger fold cache must give exactly what a full, line-by-line read gives, and must
never hide a corrupt line."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitguard import clock, verify
from gitguard.api import Guard
from gitguard.errors import CorruptRecord
from gitguard.ledger import fold, journal
from gitguard.models import FilePatchEntry, LedgerEvent, ToolLedgerEntry
from gitguard.storage import durable
from gitguard.storage.store import Store
from gitguard.workspace import discover
from tests.helpers.crashkit import scratch_root


def reference(path: Path) -> tuple[dict[str, Any], list[str], dict[str, int], int]:
    """The fold as the ledger defines it: every line decoded, the newest state of each call
    (an `entry` is a whole state, a `change` is merged into the call's previous one)."""
    latest: dict[str, Any] = {}
    order: list[str] = []
    first: dict[str, int] = {}
    last = 0
    for record in durable.read_jsonl(path).records:
        last = max(last, record["seq"])
        entry = record.get("entry")
        if entry is None and record.get("change") is not None:
            entry = {**latest[record["change"]["callId"]], **record["change"]}
        if entry is not None:
            if entry["callId"] not in latest:
                order.append(entry["callId"])
                first[entry["callId"]] = record["seq"]
            latest[entry["callId"]] = entry
    return ({c: ToolLedgerEntry.model_validate(e).to_json() for c, e in latest.items()}, order,
            first, last)


def folded(store: Store) -> tuple[dict[str, Any], list[str], dict[str, int], int]:
    state = journal.read(store)
    return ({c: e.to_json() for c, e in state.entries.items()}, state.order, state.first_seq,
            state.last_seq)


def entry(number: int, status: str, path: str = "a.txt") -> ToolLedgerEntry:
    return ToolLedgerEntry(
        call_id=f"call_{number}", step_id=f"step_{number}", tool_name="Write",
        input_hash=journal.input_hash({"n": number}), status=status, risk_level="low",
        idempotency="conditional", replay_policy="auto", session_id="s1",
        planned_at=clock.stamp(), declared_writes=(path,))


def append_calls(store: Store, numbers: range, path: str = "a.txt") -> None:
    with store.writing():
        state = journal.read(store)
        for n in numbers:
            planned = entry(n, "planned", path)
            journal.append_entries(store, state, [planned])
            journal.append_entries(store, state, [planned.model_copy(update={"status": "started"})])
            if n % 3:
                journal.append_entries(store, state, [
                    planned.model_copy(update={"status": "succeeded"})])


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.setattr(fold, "FOLD_EVERY", 8)   # exercise the cache on a short ledger
    work = scratch_root()
    made = Store(discover(work))
    append_calls(made, range(1, 13))
    journal.read(made)
    yield made
    shutil.rmtree(work, ignore_errors=True)


def test_the_cache_is_written_and_used_and_agrees(store: Store) -> None:
    cache = fold.cache_path(store.ledger_path)
    assert cache.is_file(), "a long enough read leaves a fold cache"
    assert folded(store) == reference(store.ledger_path)
    append_calls(store, range(13, 16))
    assert folded(store) == reference(store.ledger_path)
    cache.write_bytes(b"not a cache\n")
    assert folded(store) == reference(store.ledger_path)


def test_a_corrupt_line_under_the_cache_is_still_reported(store: Store) -> None:
    lines = store.ledger_path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"seq":3', b'"seq":9')
    assert b'"seq":9' in lines[2]
    store.ledger_path.write_bytes(b"\n".join(lines))
    with pytest.raises(CorruptRecord, match="ledger.jsonl line 3 "):
        journal.read(store)


def test_non_utf8_paths_survive_the_fast_parser(store: Store) -> None:
    odd = b"caf\xe9.txt".decode("utf-8", "surrogateescape")
    append_calls(store, range(40, 50), path=odd)
    assert journal.read(store).entries["call_40"].declared_writes == (odd,)
    assert folded(store) == reference(store.ledger_path)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=10**6))
def test_cut_anywhere_with_a_cache_folds_like_a_full_read(store: Store, cut: int) -> None:
    whole = store.ledger_path.read_bytes()
    journal.read(store)                       # the cache covers the whole ledger
    store.ledger_path.write_bytes(whole[: cut % (len(whole) + 1)])
    try:
        assert folded(store) == reference(store.ledger_path)
        assert journal.read(store).torn == durable.read_jsonl(store.ledger_path).torn
    finally:
        store.ledger_path.write_bytes(whole)


def write_old_format(store: Store, entries: list[ToolLedgerEntry]) -> None:
    """What gitguard wrote before changes were recorded alone: a whole entry per event."""
    events = [LedgerEvent(seq=n, recorded_at=clock.stamp(), entry=e,
                          session_id=e.session_id).to_json()
              for n, e in enumerate(entries, start=1)]
    with store.writing():
        durable.append_jsonl(store.ledger_path, events)


def session_states() -> list[ToolLedgerEntry]:
    """A session's states, with fields set, changed and reset to their default."""
    states: list[ToolLedgerEntry] = []
    for n in range(1, 8):
        planned = entry(n, "planned").model_copy(update={"note": f"n{n}", "summary": "s"})
        started = planned.model_copy(update={"status": "started", "started_at": clock.stamp(),
                                             "pre_checkpoint_id": f"ckpt_{n}", "note": None})
        end = "failed" if n % 2 else "succeeded"
        finished = started.model_copy(update={"status": end, "finished_at": clock.stamp(),
                                              "error_summary": "boom" if n % 2 else None,
                                              "summary": ""})
        states += [planned, started, finished]
    return states


def fresh_fold(store: Store) -> tuple[dict[str, Any], list[str], dict[str, int], int]:
    journal.forget()
    fold.cache_path(store.ledger_path).unlink(missing_ok=True)
    return folded(store)


def test_old_and_new_formats_fold_to_the_same_entries() -> None:
    old, new = scratch_root(), scratch_root()
    try:
        old_store, new_store = Store(discover(old)), Store(discover(new))
        states = session_states()
        write_old_format(old_store, states)
        with new_store.writing():
            state = journal.read(new_store)
            for one in states:
                journal.append_entries(new_store, state, [one])
        assert new_store.ledger_path.stat().st_size < old_store.ledger_path.stat().st_size / 2
        assert fresh_fold(old_store) == fresh_fold(new_store) == reference(old_store.ledger_path)
        assert {c: e.to_json() for c, e in state.entries.items()} == fresh_fold(new_store)[0]
        records = durable.read_jsonl(new_store.ledger_path).records
        assert list(fold.expanded(records)) != records, "later events are changes"
        expanded = [r["entry"] for r in fold.expanded(records)]
        assert [ToolLedgerEntry.model_validate(e) for e in expanded] == states
    finally:
        shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(new, ignore_errors=True)


def test_a_change_to_an_unknown_call_is_reported(store: Store) -> None:
    record = {"schemaVersion": 1, "seq": 999, "recordedAt": clock.stamp(), "sessionId": "s1",
              "change": {"callId": "call_nobody", "status": "succeeded"}}
    with store.writing():
        durable.append_jsonl(store.ledger_path, [record])
    journal.forget()
    with pytest.raises(CorruptRecord, match="changes a call that has no earlier event"):
        journal.read(store)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(updates=st.lists(st.tuples(st.sampled_from(["note", "error_summary", "summary",
                                                    "result_ref", "post_checkpoint_id"]),
                                  st.one_of(st.none(), st.sampled_from(["", "x", "caf\udce9"]))),
                        min_size=1, max_size=6))
def test_changes_round_trip_through_a_fresh_and_an_incremental_fold(
        store: Store, updates: list[tuple[str, str | None]]) -> None:
    with store.writing():
        state = journal.read(store)
        current = entry(100 + len(state.order), "planned")
        journal.append_entries(store, state, [current])
        for n, (name, value) in enumerate(updates):
            if name == "summary" and value is None:
                value = ""
            status = ("started", "uncertain")[n % 2] if n < 2 else "uncertain"
            if current.status == "uncertain":
                status = "succeeded" if n == len(updates) - 1 else "uncertain"
            if status == "uncertain" and current.status == "uncertain":
                continue
            current = current.model_copy(update={"status": status, name: value})
            journal.append_entries(store, state, [current])
    incremental = journal.read(store)
    assert incremental.entries[current.call_id] == current
    assert fresh_fold(store) == reference(store.ledger_path)
    assert fresh_fold(store)[0][current.call_id] == current.to_json()


def test_verify_checks_each_merged_state(repo: Path) -> None:
    guard = Guard.open(repo)
    for n in range(3):
        begun = guard.begin_call("Write", {"file_path": "a.txt", "n": n}, writes=["a.txt"])
        guard.end_call(begun.call_id, "succeeded", "ok")
    assert verify.problems(guard.store, guard.snap) == []
    records = durable.read_jsonl(guard.store.ledger_path).records
    assert [sorted(r) for r in records if "change" in r], "the ledger holds changes"
    back = {"schemaVersion": 1, "seq": 99, "recordedAt": clock.stamp(), "sessionId": "x",
            "change": {"callId": "call_2", "status": "started", "postCheckpointId": "ckpt_gone"}}
    with guard.store.writing():
        durable.append_jsonl(guard.store.ledger_path, [back])
    found = verify.problems(guard.store, guard.snap)
    assert "ledger seq 99: call call_2 is succeeded; it cannot become started" in found
    assert "call_2 names checkpoint ckpt_gone, which is not in the index" in found
    guard.close()


# --- the cache's bytes --------------------------------------------------------------------

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "ledger" / "fold_cache.golden"


def golden_fold() -> tuple[bytes, fold.Fold]:
    """A fold holding what a cache must carry as it always did: camelCase names, fields at
    their default left out (a whole entry's and a file patch's), fields set to a value that
    equals no default, non-ASCII text in paths and summaries, an action, a torn tail."""
    def one(n: int, status: str) -> ToolLedgerEntry:
        patch = FilePatchEntry(path=f"src/café_{n}.py", before_hash=None, after_hash="b" * 40,
                               patch_ref=f"patch_call_{n}.diff", tool_call_id=f"call_{n}",
                               created_at="2026-01-02T03:04:05.000006Z", after_mode=0o100755)
        return ToolLedgerEntry(
            call_id=f"call_{n}", step_id=f"step_{n}", tool_name="Edit" if n % 2 else "Bash",
            input_hash=f"{n:064x}", status=status, risk_level="low", idempotency="conditional",
            replay_policy="auto", session_id="s1", planned_at="2026-01-02T03:04:05.000001Z",
            started_at=None if status == "planned" else "2026-01-02T03:04:05.000002Z",
            summary=f"écrit {n} — 日本語 ✓" if n % 2 else "",
            declared_writes=(f"src/café_{n}.py",) if n % 2 else (),
            file_patches=(patch,) if n % 2 else (), side_effects=("network",) if n == 2 else (),
            error_summary="boom\n\"quoted\"\ttab" if status == "failed" else None)
    entries = [one(1, "succeeded"), one(2, "failed"), one(3, "planned"), one(4, "started")]
    raw = b"".join(durable.encode_line({"seq": n}) for n in range(1, 9)) + b'{"torn'
    folded = fold.Fold(entries={e.call_id: e for e in entries},
                       order=[e.call_id for e in entries],
                       first_seq={e.call_id: 2 * n for n, e in enumerate(entries, start=1)},
                       actions=[{"schemaVersion": 1, "seq": 8, "recordedAt": "2026-01-02",
                                 "action": {"type": "rollback_files", "checkpointId": "ckpt_ü"}}],
                       last_seq=8, lines=8, offset=raw.rfind(b"\n") + 1)
    return raw, folded


def saved(folded: fold.Fold, raw: bytes) -> bytes:
    work = scratch_root()
    try:
        cache = fold.cache_path(work / "ledger.jsonl")
        fold._save(cache, raw, folded)
        return cache.read_bytes()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_the_cache_is_written_byte_for_byte_as_before() -> None:
    """The golden file is what the cache writer wrote through pydantic-core's serializer
    directly (before issue 28); the public API must give the same bytes, so a cache an
    older gitguard left is read as before and a newer one reads ours."""
    raw, folded = golden_fold()
    assert saved(folded, raw) == GOLDEN.read_bytes()
    data = durable.checked_data(GOLDEN.read_bytes().rstrip(b"\n"))
    assert data is not None and "écrit 1 — 日本語 ✓".encode() in data   # UTF-8, not \\u escapes
    assert b'"schemaVersion"' not in data.split(b'"entries"')[1]          # defaults left out
    assert b'"beforeHash":null' in data and b'"afterMode":33261' in data   # None, not default


def test_the_cache_of_a_real_ledger_is_what_model_dump_json_gives(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fold, "FOLD_EVERY", 4)
    guard = Guard.open(repo)
    names = ["plain.txt", "café.txt", "日本語/ファイル.md", "dir with space/x\ty.txt"]
    for n, name in enumerate(names * 2):
        begun = guard.begin_call("Write", {"file_path": name, "content": f"é{n}"}, writes=[name])
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(f"é{n}\n")
        guard.end_call(begun.call_id, "failed" if n % 3 == 0 else "succeeded", f"résultat {n}")
    journal.forget()
    cache = fold.cache_path(guard.store.ledger_path)
    cache.unlink(missing_ok=True)
    state = journal.read(guard.store)
    line = cache.read_bytes()
    data = durable.checked_data(line.rstrip(b"\n"))
    assert data is not None
    record = fold._Cache.model_validate_json(data)
    assert [e.call_id for e in record.entries] == state.order
    assert data == record.model_dump_json(by_alias=True, exclude_defaults=True).encode()
    assert json.loads(data) == record.model_dump(mode="json", by_alias=True,
                                                 exclude_defaults=True)
    assert {c: e.to_json() for c, e in state.entries.items()} == reference(
        guard.store.ledger_path)[0]
    guard.close()


def test_a_cache_with_non_utf8_paths_is_written_and_read_back(store: Store) -> None:
    """Lone surrogates (non-UTF-8 path bytes) make pydantic-core's JSON refuse: the
    canonical JSON fallback writes the cache instead, and it reads back."""
    odd = b"caf\xe9.txt".decode("utf-8", "surrogateescape")
    append_calls(store, range(40, 52), path=odd)
    cache = fold.cache_path(store.ledger_path)
    cache.unlink(missing_ok=True)
    journal.forget()
    journal.read(store)
    assert b"caf\\udce9.txt" in cache.read_bytes()
    journal.forget()
    assert folded(store) == reference(store.ledger_path)
