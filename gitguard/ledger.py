"""The tool ledger: append-only events, folded to the current entry per callId."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitguard import clock, durable, faults, ledger_fold, ledger_segment, tailcache
from gitguard.errors import IllegalTransition, UnknownId
from gitguard.models import LedgerEvent, RecoveryAction, ToolLedgerEntry
from gitguard.store import Store

# Which status may follow which. `uncertain` is only reached through a crash (resume),
# and left only when someone reconciles it against the outside world.
TRANSITIONS: dict[str, frozenset[str]] = {
    "planned": frozenset({"approved", "started", "failed"}),
    "approved": frozenset({"started", "failed"}),
    "started": frozenset({"succeeded", "failed", "uncertain"}),
    "uncertain": frozenset({"succeeded", "failed"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
}


def input_hash(tool_input: Any) -> str:
    return "sha256:" + hashlib.sha256(durable.canonical_json(tool_input)).hexdigest()


# (session id, tool name, replay identity): what the replay check looks calls up by. The
# identity is the input hash, or the input with the state it acts on (replay_state.py).
RunKey = tuple[str, str, str]


def run_key(entry: ToolLedgerEntry) -> RunKey:
    return entry.session_id, entry.tool_name, entry.replay_key or entry.input_hash


@dataclass
class LedgerState:
    entries: dict[str, ToolLedgerEntry] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)      # callIds in order of first appearance
    first_seq: dict[str, int] = field(default_factory=dict)  # seq of each call's first event
    actions: list[LedgerEvent] = field(default_factory=list)
    last_seq: int = 0
    torn: bytes = b""
    # run_key -> callIds in order: the replay check at every `call begin` looks up its
    # key instead of walking the whole ledger. Kept up to date where `entries` changes
    # (note_updates); None: built on first use.
    by_run: dict[RunKey, tuple[str, ...]] | None = None
    # The cached fold this state is a copy of (ledger.read): an index built here is handed
    # back to it, so a process builds it once, and only when it checks a replay.
    source: LedgerState | None = field(default=None, compare=False, repr=False)

    def get(self, call_id: str) -> ToolLedgerEntry:
        try:
            return self.entries[call_id]
        except KeyError:
            raise UnknownId(f"no call {call_id!r} in the ledger",
                            "list calls with `gitguard ledger`") from None

    def in_order(self) -> list[ToolLedgerEntry]:
        return [self.entries[c] for c in self.order]

    def runs_of(self, key: RunKey) -> list[ToolLedgerEntry]:
        """The calls with this run_key, in ledger order: what filtering in_order() by the
        key gives (tests/ledger/test_replay_index.py compares the two)."""
        if self.by_run is None:
            runs: dict[RunKey, list[str]] = {}
            for call_id in self.order:
                runs.setdefault(run_key(self.entries[call_id]), []).append(call_id)
            self.by_run = {found: tuple(ids) for found, ids in runs.items()}
            source = self.source
            if (source is not None and source.by_run is None and source.last_seq == self.last_seq
                    and len(source.order) == len(self.order)):
                source.by_run = dict(self.by_run)       # the same fold: nothing appended since
        return [self.entries[c] for c in self.by_run.get(key, ())]

    def note_updates(self, updates: dict[str, ToolLedgerEntry]) -> None:
        """Keep by_run in step before `updates` (callId -> newest entry, new calls in the
        order they appear in the ledger) go into `entries`."""
        if self.by_run is None:
            return
        for call_id, entry in updates.items():
            key = run_key(entry)
            before = self.entries.get(call_id)
            if before is None:
                self.by_run[key] = (*self.by_run.get(key, ()), call_id)
            elif run_key(before) != key:
                self.by_run = None          # never seen in practice: rebuild on next use
                return

    def copy(self) -> LedgerState:
        """Containers copied, entries shared (they are frozen models), by_run's tuples too."""
        return LedgerState(dict(self.entries), list(self.order), dict(self.first_seq),
                           list(self.actions), self.last_seq, self.torn,
                           None if self.by_run is None else dict(self.by_run))


# The state this process last folded per ledger, and how far into the file it reaches:
# the next read decodes only what was appended since (see gitguard.tailcache).
_FOLDED: dict[Path, tuple[tailcache.Mark, LedgerState]] = {}
_FOLDED_MAX = 8


def forget() -> None:
    """Drop the in-process fold (the next read is a full one, as in a fresh process)."""
    _FOLDED.clear()


def read(store: Store) -> LedgerState:
    path = store.ledger_path
    cached = _FOLDED.pop(path, None)
    if cached is not None:
        tail = tailcache.read_after(path, cached[0])
        if tail is not None and _apply_tail(cached[1], tail.data):
            cached[1].torn = tail.torn
            _FOLDED[path] = (tail.mark, cached[1])
            state = cached[1].copy()
            state.source = cached[1]
            return state
    return read_full(store)


def read_full(store: Store) -> LedgerState:
    """Fold the whole ledger (through the on-disk fold cache) and remember the result."""
    path = store.ledger_path
    raw, st = tailcache.read_full(path)
    # gc's segment holds the ledger's older lines: fold them, then ledger.jsonl's. The
    # mark stays on ledger.jsonl alone, where appends go (gitguard.ledger_segment).
    whole = ledger_segment.stream(path, raw)
    folded = ledger_fold.fold(path, whole) if whole else ledger_fold.Fold()
    state = LedgerState(order=folded.order, first_seq=folded.first_seq,
                        last_seq=folded.last_seq, torn=folded.torn,
                        actions=[LedgerEvent.model_validate(r) for r in folded.actions])
    state.entries = folded.entries      # only the newest state of each call is validated
    if st is not None:
        while len(_FOLDED) >= _FOLDED_MAX:
            del _FOLDED[next(iter(_FOLDED))]
        _FOLDED[path] = (tailcache.mark_of(raw, st), state.copy())
        state.source = _FOLDED[path][1]
    return state


def _apply_tail(state: LedgerState, data: bytes) -> bool:
    """Fold appended lines into `state` as ledger_fold.fold would. False (state untouched)
    when a line does not decode: the full read then reports it with its line number."""
    decoded = [durable.decode_line(line, ledger_fold.loads) for line in data.split(b"\n")[:-1]]
    records = [r for r in decoded if r is not None]
    if len(records) != len(decoded):
        return False
    latest: dict[str, dict[str, Any]] = {}
    earlier = ledger_fold.States(state.entries)
    order: list[str] = []
    first: dict[str, int] = {}
    actions: list[LedgerEvent] = []
    last_seq = state.last_seq
    for record in records:
        seq = int(record.get("seq", 0))
        last_seq = max(last_seq, seq)
        try:
            call_id = ledger_fold.apply(latest, record, earlier)
        except (KeyError, TypeError):
            return False
        if call_id is None:
            if record.get("action") is not None:
                actions.append(LedgerEvent.model_validate(record))
        elif call_id not in state.entries and call_id not in first:
            order.append(call_id)
            first[call_id] = seq
    updates = ledger_fold.validate(latest)
    state.note_updates(updates)
    state.entries.update(updates)
    state.order += order
    state.first_seq.update(first)
    state.actions.extend(actions)
    state.last_seq = last_seq
    return True


def check_transition(current: ToolLedgerEntry | None, new_status: str, call_id: str) -> None:
    if current is None:
        if new_status != "planned":
            raise IllegalTransition(f"call {call_id} must be planned before it is {new_status}",
                                    "begin the call with `gitguard call begin`")
        return
    if new_status not in TRANSITIONS[current.status]:
        raise IllegalTransition(
            f"call {call_id} is {current.status}; it cannot become {new_status}",
            "a finished call cannot change; settle an uncertain one with `gitguard reconcile`",
        )


def append_entries(store: Store, state: LedgerState, entries: list[ToolLedgerEntry],
                   actions: Sequence[tuple[RecoveryAction, str, dict[str, Any] | None]] = ()
                   ) -> None:
    """Check transitions, append one event per entry (fsynced), update `state`. Under lock.
    A call's first event holds its entry; later ones only what changed (ledger_fold).
    `actions` (action, session id, detail): recovery actions appended after the entries in
    the same durable write (a rollback's finished entry and its action: one fsync)."""
    events: list[dict[str, Any]] = []
    seq = state.last_seq
    pending: dict[str, ToolLedgerEntry] = {}
    first: dict[str, int] = {}
    for entry in entries:
        current = pending.get(entry.call_id) or state.entries.get(entry.call_id)
        check_transition(current, entry.status, entry.call_id)
        seq += 1
        if current is None:
            first[entry.call_id] = seq
        pending[entry.call_id] = entry
        events.append(ledger_fold.event_record(
            seq, clock.stamp(), entry.session_id, entry.to_json(),
            current.to_json() if current is not None else None))
    done = [LedgerEvent(seq=seq + n, recorded_at=clock.stamp(), action=action,
                        session_id=session_id, detail=detail)
            for n, (action, session_id, detail) in enumerate(actions, start=1)]
    events += [event.to_json() for event in done]
    faults.point(f"ledger.before_{entries[-1].status}")
    durable.append_jsonl(store.ledger_path, events)
    faults.point(f"ledger.after_{entries[-1].status}")
    state.actions += done
    seq += len(done)
    for entry in entries:
        state.note_updates({entry.call_id: entry})
        if entry.call_id not in state.entries:
            state.order.append(entry.call_id)
        state.entries[entry.call_id] = entry
    state.first_seq.update(first)
    state.last_seq = seq


def append_action(store: Store, state: LedgerState, action: RecoveryAction, session_id: str,
                  detail: dict[str, Any] | None = None) -> LedgerEvent:
    event = LedgerEvent(seq=state.last_seq + 1, recorded_at=clock.stamp(), action=action,
                        session_id=session_id, detail=detail)
    durable.append_jsonl(store.ledger_path, [event.to_json()])
    state.last_seq = event.seq
    state.actions.append(event)
    return event
