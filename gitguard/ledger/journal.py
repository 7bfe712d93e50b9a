"""The tool ledger: append-only events, folded to the current entry per callId.

A long-lived process (the daemon) reads the ledger at every `call begin` and `call end`
of a session that may reach tens of thousands of calls, so what it keeps between reads
is bounded (issue #21 item 8: flat memory and per-call time as history grows):

* `recent`: every call not yet finished (planned, approved, started, uncertain: the only
  ones an event can still change) and the newest WINDOW others, as entries;
* `runs`: per callId, its first seq, status and replay policy packed in one int, and
  `by_run`, run_key's hash -> callIds: what the replay guard and the "is this callId
  taken" check need for every call ever made, without its entry (~200 bytes a call, the
  callId string included: 4 MB over 20,000 calls);
* the seq, the torn tail and the recovery actions.

Anything else is read from disk on the rare request that needs it: `entries`, `order`,
`first_seq` and `in_order()` fold the whole ledger (through ledger.fold.json) once per
state that asks, and `get`/`lookup` of a call older than the window do the same. The
ledger file stays the only truth; what is kept in memory is what a fold of it gives
(tests/ledger/test_window.py compares the two, with calls pushed out of the window).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, get_args

from gitguard import clock, faults
from gitguard.errors import IllegalTransition, UnknownId
from gitguard.ledger import fold, segment
from gitguard.ledger.replay import effective_policy
from gitguard.models import (
    TERMINAL,
    LedgerEvent,
    RecoveryAction,
    ReplayPolicy,
    Status,
    ToolLedgerEntry,
)
from gitguard.storage import durable, journal_tail
from gitguard.storage.store import Store

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

# Finished calls kept as entries besides the open ones: a call's end, a hook's lookup of
# the call it reports, the shared pre checkpoint's previous call all look a few calls back.
WINDOW = 256


def input_hash(tool_input: Any) -> str:
    return "sha256:" + hashlib.sha256(durable.canonical_json(tool_input)).hexdigest()


# (session id, tool name, replay identity): what the replay check looks calls up by. The
# identity is the input hash, or the input with the state it acts on (replay_state.py).
RunKey = tuple[str, str, str]


def run_key(entry: ToolLedgerEntry) -> RunKey:
    return entry.session_id, entry.tool_name, entry.replay_key or entry.input_hash


def _key_hash(key: RunKey) -> int:
    """by_run's key: 64 bits of the run key instead of its ~200 bytes of strings. Two keys
    sharing one (odds ~n^2 / 2^64) would make a call look like a repeat of the other's:
    a question asked, never a replay let through."""
    return int.from_bytes(hashlib.blake2b("\0".join(key).encode(errors="surrogatepass"),
                                          digest_size=8).digest(), "big")


class Run(NamedTuple):
    """What the replay guard needs of a call, kept for every call (its entry may not be)."""
    seq: int                    # its first event's seq
    status: Status
    policy: ReplayPolicy        # its replay policy for a repeat that asks for "auto"


# A Run is kept packed: seq << 5 | status << 2 | policy, one int (32 bytes) instead of a
# tuple and its seq (~100 bytes), for every call of a session.
_STATUSES: tuple[Status, ...] = get_args(Status)
_POLICIES: tuple[ReplayPolicy, ...] = get_args(ReplayPolicy)
_STATUS_CODE = {status: code for code, status in enumerate(_STATUSES)}
_POLICY_CODE = {policy: code for code, policy in enumerate(_POLICIES)}
_SEQ_SHIFT = 5


def _packed_run(seq: int, entry: ToolLedgerEntry) -> int:
    return (seq << _SEQ_SHIFT | _STATUS_CODE[entry.status] << 2
            | _POLICY_CODE[effective_policy(entry, "auto")])


def _unpacked(packed: int) -> Run:
    return Run(packed >> _SEQ_SHIFT, _STATUSES[packed >> 2 & 7], _POLICIES[packed & 3])


@dataclass
class RunIndex:
    """The calls of each run key, in ledger order: 64 bits of the key's hash (8 bytes each
    in one bytearray) beside the callIds. ~16 bytes a call, against ~90 for a dict of int
    keys (the int and its slot): over a 20,000-call session the daemon's memory grew
    ~1.3 MiB less. A lookup is a byte search (`bytearray.find`), ~60 µs at 20,000 calls;
    `array.index` compared Python ints one by one: 330 µs."""

    hashes: bytearray = field(default_factory=bytearray)
    ids: list[str] = field(default_factory=list)

    def add(self, key: int, call_id: str) -> None:
        self.hashes += key.to_bytes(8, "little")
        self.ids.append(call_id)

    def find(self, key: int) -> list[str]:
        wanted = key.to_bytes(8, "little")
        found: list[str] = []
        at = self.hashes.find(wanted)
        while at >= 0:
            if at % 8:
                at = self.hashes.find(wanted, at + 1)   # straddles two hashes: not one
                continue
            found.append(self.ids[at // 8])
            at = self.hashes.find(wanted, at + 8)
        return found


@dataclass
class Whole:
    """The whole fold, read from disk when a state is asked for all of history."""
    entries: dict[str, ToolLedgerEntry]
    order: list[str]
    first_seq: dict[str, int]
    last_seq: int = 0       # of the ledger read (a reader without the lock may be behind)


@dataclass
class LedgerState:
    recent: dict[str, ToolLedgerEntry] = field(default_factory=dict)  # see the docstring
    # callId -> packed Run of every call. Shared by the copies of one cached fold and only ever
    # added to or updated to a newer status (by whoever folds or appends a line first):
    # a state sees the calls whose first seq is within its own last_seq.
    runs: dict[str, int] = field(default_factory=dict)
    calls: int = 0                              # callIds within last_seq
    actions: list[LedgerEvent] = field(default_factory=list)
    last_seq: int = 0
    torn: bytes = b""
    # The newest finished_at of the finished calls left out of `recent` ("\uffff" when
    # one had none): a call that began after it overlaps none of them.
    dropped_until: str = ""
    # The calls of each run key (shared like `runs`, the same str objects as its keys);
    # None: built on first use (a process that never checks a replay never builds it).
    by_run: RunIndex | None = None
    ledger_path: Path | None = None
    whole: Whole | None = field(default=None, compare=False, repr=False)
    # The cached fold this state is a copy of (ledger.read): an index built here is handed
    # back to it, so a process builds it once, and only when it checks a replay.
    source: LedgerState | None = field(default=None, compare=False, repr=False)

    # --- the calls the hot path looks at ----------------------------------------------
    def known(self, call_id: str) -> bool:
        run = self.runs.get(call_id)
        return run is not None and run >> _SEQ_SHIFT <= self.last_seq

    def run(self, call_id: str) -> Run | None:
        """What the replay guard knows of a call (every call has one; its entry may be on
        disk only)."""
        return _unpacked(self.runs[call_id]) if self.known(call_id) else None

    def lookup(self, call_id: str) -> ToolLedgerEntry | None:
        found = self.recent.get(call_id)
        if found is not None or not self.known(call_id):
            return found
        return self._whole().entries.get(call_id)      # older than the window: from disk

    def get(self, call_id: str) -> ToolLedgerEntry:
        found = self.lookup(call_id)
        if found is None:
            raise UnknownId(f"no call {call_id!r} in the ledger",
                            "list calls with `gitguard ledger`")
        return found

    def open_entries(self) -> list[ToolLedgerEntry]:
        """The calls not finished, in ledger order (all of them are in `recent`)."""
        return [e for e in self.recent.values() if e.status not in TERMINAL]

    def recent_entries(self) -> tuple[list[ToolLedgerEntry], str]:
        """The entries kept, in ledger order, and `dropped_until` (see above)."""
        return list(self.recent.values()), self.dropped_until

    # --- all of history (read from disk when not in memory) ----------------------------
    @property
    def entries(self) -> dict[str, ToolLedgerEntry]:
        return self._whole().entries

    @property
    def order(self) -> list[str]:
        return self._whole().order

    @property
    def first_seq(self) -> dict[str, int]:
        return self._whole().first_seq

    def in_order(self) -> list[ToolLedgerEntry]:
        whole = self._whole()
        return [whole.entries[c] for c in whole.order]

    def _whole(self) -> Whole:
        if self.whole is None:
            whole = self.whole = _read_whole(self)
            source = self.source
            if (source is not None and source.whole is None
                    and source.last_seq == self.last_seq == whole.last_seq):
                # The same fold: kept for the process's next read (until trim()).
                source.whole = Whole(dict(whole.entries), list(whole.order),
                                     dict(whole.first_seq), whole.last_seq)
        return self.whole

    # --- the replay index -------------------------------------------------------------
    def runs_by_key(self, key: RunKey) -> list[tuple[str, Run]]:
        """(callId, Run) of the calls with this run_key, in ledger order."""
        if self.by_run is None:
            index = RunIndex()
            # The callIds as `runs` holds them: one str object per call, not two. `runs`
            # lists calls in ledger order too, and may go on past this state's last_seq.
            kept = iter(self.runs)
            for entry in self.in_order():
                call_id = next(kept, entry.call_id)
                if call_id != entry.call_id:
                    call_id = entry.call_id
                index.add(_key_hash(run_key(entry)), call_id)
            self.by_run = index
            source = self.source
            if source is not None and source.by_run is None and source.last_seq == self.last_seq:
                source.by_run = self.by_run       # the same fold: nothing appended since
        found = []
        for call_id in self.by_run.find(_key_hash(key)):
            run = self.run(call_id)
            if run is not None:
                found.append((call_id, run))
        return found

    def runs_of(self, key: RunKey) -> list[ToolLedgerEntry]:
        """The calls with this run_key, in ledger order: what filtering in_order() by the
        key gives (tests/ledger/test_replay_index.py compares the two)."""
        return [self.get(call_id) for call_id, _run in self.runs_by_key(key)]

    # --- folding new events in --------------------------------------------------------
    def take(self, updates: dict[str, ToolLedgerEntry], first: dict[str, int]) -> None:
        """Fold `updates` (callId -> newest entry, new calls in ledger order; `first`:
        the first seq of each new one) into this state. The caller sets last_seq."""
        for call_id, entry in updates.items():
            seq = first.get(call_id)
            known = self.runs.get(call_id)
            if seq is None and known is not None:
                seq = known >> _SEQ_SHIFT
            if seq is None:     # an update of a call this state does not have: impossible
                raise KeyError(call_id)
            if call_id in first:
                self.calls += 1
            if self.by_run is not None:
                self._index(call_id, entry, new=call_id in first)
            self.runs[call_id] = _packed_run(seq, entry)
            self.recent[call_id] = entry
            if self.whole is not None:
                if call_id in first:
                    self.whole.order.append(call_id)
                    self.whole.first_seq[call_id] = seq
                self.whole.entries[call_id] = entry
        self._trim()

    def _index(self, call_id: str, entry: ToolLedgerEntry, new: bool) -> None:
        assert self.by_run is not None
        key = _key_hash(run_key(entry))
        if call_id in self.by_run.find(key):
            return          # indexed already (an update; or another copy of this fold)
        if not new:
            self.by_run = None      # its key changed (never seen in practice): rebuild
            return
        self.by_run.add(key, call_id)

    def _trim(self) -> None:
        over = len(self.recent) - WINDOW
        if over <= 0:
            return
        dropped = []
        for call_id, entry in self.recent.items():
            if entry.status in TERMINAL:
                dropped.append(call_id)
                end = entry.finished_at or "\uffff"
                if end > self.dropped_until:
                    self.dropped_until = end
                if len(dropped) == over:
                    break
        for call_id in dropped:
            del self.recent[call_id]

    def copy(self) -> LedgerState:
        """`recent`, `actions` and `whole` (when read) copied; `runs` and `by_run` shared
        (see above)."""
        whole = self.whole
        if whole is not None:
            whole = Whole(dict(whole.entries), list(whole.order), dict(whole.first_seq),
                          whole.last_seq)
        return LedgerState(dict(self.recent), self.runs, self.calls, list(self.actions),
                           self.last_seq, self.torn, self.dropped_until, self.by_run,
                           self.ledger_path, whole)


def _read_whole(state: LedgerState) -> Whole:
    """Every call's entry, from the ledger on disk. Under the store lock it is exactly
    this state's ledger; a reader without it may see calls appended since, as a read a
    moment later would."""
    if state.ledger_path is None:       # a state made in memory, not read
        return Whole(dict(state.recent), list(state.recent),
                     {c: state.runs[c] >> _SEQ_SHIFT for c in state.recent})
    raw, _st = journal_tail.read_full(state.ledger_path)
    whole = segment.stream(state.ledger_path, raw)
    folded = fold.fold(state.ledger_path, whole) if whole else fold.Fold()
    return Whole(folded.entries, folded.order, folded.first_seq, folded.last_seq)


# The state this process last folded per ledger, and how far into the file it reaches:
# the next read decodes only what was appended since (see gitguard.storage.journal_tail).
_FOLDED: dict[Path, tuple[journal_tail.Mark, LedgerState]] = {}
_FOLDED_MAX = 8


def forget() -> None:
    """Drop the in-process fold (the next read is a full one, as in a fresh process)."""
    _FOLDED.clear()


def trim() -> None:
    """Let go of the whole history read for a request (the daemon calls this after each
    call request): the next whole-history request reads it from disk again."""
    for _mark, state in _FOLDED.values():
        state.whole = None


def read(store: Store) -> LedgerState:
    path = store.ledger_path
    cached = _FOLDED.pop(path, None)
    if cached is not None:
        tail = journal_tail.read_after(path, cached[0])
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
    raw, st = journal_tail.read_full(path)
    # gc's segment holds the ledger's older lines: fold them, then ledger.jsonl's. The
    # mark stays on ledger.jsonl alone, where appends go (gitguard.ledger.segment).
    whole = segment.stream(path, raw)
    folded = fold.fold(path, whole) if whole else fold.Fold()
    state = LedgerState(last_seq=folded.last_seq, torn=folded.torn, ledger_path=path,
                        actions=[LedgerEvent.model_validate(r) for r in folded.actions])
    state.take(folded.entries, folded.first_seq)
    state.whole = Whole(folded.entries, folded.order, folded.first_seq, folded.last_seq)
    if st is not None:
        while len(_FOLDED) >= _FOLDED_MAX:
            del _FOLDED[next(iter(_FOLDED))]
        cached = state.copy()
        _FOLDED[path] = (journal_tail.mark_of(raw, st), cached)
        state.source = cached
    return state


def _apply_tail(state: LedgerState, data: bytes) -> bool:
    """Fold appended lines into `state` as fold.fold would. False (state untouched)
    when a line does not decode: the full read then reports it with its line number."""
    decoded = [durable.decode_line(line, fold.loads) for line in data.split(b"\n")[:-1]]
    records = [r for r in decoded if r is not None]
    if len(records) != len(decoded):
        return False
    latest: dict[str, dict[str, Any]] = {}
    earlier = fold.States(_Known(state))
    first: dict[str, int] = {}
    actions: list[LedgerEvent] = []
    last_seq = state.last_seq
    for record in records:
        seq = int(record.get("seq", 0))
        last_seq = max(last_seq, seq)
        try:
            call_id = fold.apply(latest, record, earlier)
        except (KeyError, TypeError):
            return False
        if call_id is None:
            if record.get("action") is not None:
                actions.append(LedgerEvent.model_validate(record))
        elif not state.known(call_id) and call_id not in first:
            first[call_id] = seq
    state.take(fold.validate(latest), first)
    state.actions.extend(actions)
    state.last_seq = last_seq
    return True


class _Known(dict[str, ToolLedgerEntry]):
    """`state`'s calls for fold.States: the ones in `recent`, else from disk."""

    def __init__(self, state: LedgerState) -> None:
        super().__init__()
        self.state = state

    def __contains__(self, call_id: object) -> bool:
        return isinstance(call_id, str) and self.state.known(call_id)

    def __getitem__(self, call_id: str) -> ToolLedgerEntry:
        return self.state.get(call_id)


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


def check_mark(current: ToolLedgerEntry, entry: ToolLedgerEntry) -> None:
    """The same status again: a `mark` event, which may only add what was learnt about a
    call after it ended (fold.MARKS: a probe that could not tell, a rewind)."""
    was, now = current.to_json(), entry.to_json()
    changed = {k for k, v in now.items() if was.get(k) != v}
    if changed - fold.MARKS:
        raise IllegalTransition(
            f"call {entry.call_id} is {current.status}; it cannot become {entry.status}",
            "a finished call cannot change; settle an uncertain one with `gitguard reconcile`")


def append_entries(store: Store, state: LedgerState, entries: list[ToolLedgerEntry],
                   actions: Sequence[tuple[RecoveryAction, str, dict[str, Any] | None]] = ()
                   ) -> None:
    """Check transitions, append one event per entry (fsynced), update `state`. Under lock.
    A call's first event holds its entry; later ones only what changed (fold).
    `actions` (action, session id, detail): recovery actions appended after the entries in
    the same durable write (a rollback's finished entry and its action: one fsync)."""
    events: list[dict[str, Any]] = []
    seq = state.last_seq
    pending: dict[str, ToolLedgerEntry] = {}
    first: dict[str, int] = {}
    for entry in entries:
        current = pending.get(entry.call_id) or state.lookup(entry.call_id)
        if current is not None and current.status == entry.status:
            check_mark(current, entry)
        else:
            check_transition(current, entry.status, entry.call_id)
        seq += 1
        if current is None:
            first[entry.call_id] = seq
        pending[entry.call_id] = entry
        events.append(fold.event_record(
            seq, clock.stamp(), entry.session_id, entry.to_json(),
            current.to_json() if current is not None else None))
    done = [LedgerEvent(seq=seq + n, recorded_at=clock.stamp(), action=action,
                        session_id=session_id, detail=detail)
            for n, (action, session_id, detail) in enumerate(actions, start=1)]
    events += [event.to_json() for event in done]
    faults.point(f"ledger.before_{entries[-1].status}")
    durable.append_jsonl(store.ledger_path, events)
    faults.point(f"ledger.after_{entries[-1].status}")
    state.take(pending, first)
    state.actions += done
    state.last_seq = seq + len(done)


def append_action(store: Store, state: LedgerState, action: RecoveryAction, session_id: str,
                  detail: dict[str, Any] | None = None) -> LedgerEvent:
    event = LedgerEvent(seq=state.last_seq + 1, recorded_at=clock.stamp(), action=action,
                        session_id=session_id, detail=detail)
    durable.append_jsonl(store.ledger_path, [event.to_json()])
    state.last_seq = event.seq
    state.actions.append(event)
    return event
