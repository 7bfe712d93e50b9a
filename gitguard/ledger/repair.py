"""`gitguard repair`: set damaged ledger lines aside, byte for byte, so work can go on.

A damaged ledger line stops every command (the fold cannot go past it), and a deleted one
silently turns a finished call back into a started one. Repair looks at ledger.jsonl's
lines (the part gc moved into ledger.segment is checked whole by its sha256; a damaged
segment is refused, not split) and finds:

- a line whose checksum fails or that does not parse (edited, a flipped byte);
- a line that changes a call whose first line is gone (it cannot be folded);
- a second line with a seq already seen;
- lines out of seq order: put back in order, nothing set aside;
- a gap in the seqs (a deleted line): nothing to set aside, but recorded.

What is set aside goes to `quarantine/ledger-<stamp>.lines` in the store, exactly the bytes
that were in the ledger; nothing is deleted. The new ledger.jsonl is the remaining lines in
seq order, then one repair event (its `detail.repair` names every line set aside, every
gap and every call they may have touched), then a rebuilt entry for each such call that
was not finished: it becomes `uncertain` (a damaged or missing line may have been its
`succeeded`, or its `started`), never `succeeded`; `gitguard reconcile` settles it. A call
whose first line was damaged is rebuilt from that line's readable JSON when there is some
(the replay guard must keep seeing a `npm publish` whose line lost a byte), else it is
listed as lost. Rebuilt entries carry `detail.repairedBy` (the repair event's seq): they
replace the call's state, which `gitguard verify` accepts from a repair only.

The ledger is replaced in one atomic write after the quarantine file is durable, so a crash
leaves either the old ledger (run repair again) or the repaired one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from gitguard import clock
from gitguard.ledger import fold, journal
from gitguard.ledger import segment as ledger_segment
from gitguard.models import ToolLedgerEntry
from gitguard.storage import durable, trace_log
from gitguard.storage.store import Store

QUARANTINE_DIR = "quarantine"
FINISHED = frozenset({"succeeded", "failed", "uncertain"})


@dataclass(frozen=True)
class SetAside:
    line: int              # 1-based line number in ledger.jsonl
    offset: int            # byte offset in ledger.jsonl
    length: int            # bytes, newline included
    reason: str
    seq: int | None = None
    call_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "offset": self.offset, "length": self.length,
                "reason": self.reason, "seq": self.seq, "callId": self.call_id}


@dataclass(frozen=True)
class Report:
    set_aside: tuple[SetAside, ...] = ()
    reordered: int = 0                            # lines moved back into seq order
    gaps: tuple[tuple[int, int], ...] = ()        # missing seqs, first and last of each run
    uncertain: tuple[str, ...] = ()               # calls made uncertain
    lost: tuple[str, ...] = ()                    # calls whose first line was unreadable
    quarantine: str | None = None                 # store-relative file of the set-aside bytes
    repair_seq: int | None = None
    dry_run: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.set_aside or self.reordered or self.gaps)

    def to_json(self) -> dict[str, Any]:
        return {"changed": self.changed, "dryRun": self.dry_run,
                "setAside": [s.to_json() for s in self.set_aside],
                "reordered": self.reordered, "gaps": [list(g) for g in self.gaps],
                "uncertain": list(self.uncertain), "lost": list(self.lost),
                "quarantine": self.quarantine, "repairSeq": self.repair_seq}


@dataclass
class _Line:
    number: int
    offset: int
    raw: bytes              # with its newline
    record: dict[str, Any]
    seq: int


@dataclass
class _Plan:
    kept: list[_Line] = field(default_factory=list)
    aside: list[tuple[SetAside, bytes]] = field(default_factory=list)
    reordered: int = 0
    latest: dict[str, dict[str, Any]] = field(default_factory=dict)
    first_seq: dict[str, int] = field(default_factory=dict)
    salvaged: dict[str, dict[str, Any]] = field(default_factory=dict)
    last_seq: int = 0


def repair(store: Store, dry_run: bool = False) -> Report:
    """Plan, then (unless `dry_run`) quarantine and rewrite. Under the store lock."""
    with store.writing():
        path = store.ledger_path
        segment = ledger_segment.read_segment(path)     # CorruptRecord when damaged
        live = durable.read_bytes(path) or b""
        start = ledger_segment.skip(segment, live)
        end = live.rfind(b"\n") + 1
        plan = _plan(segment.data, live, start, end)
        records = [*_records(segment.data), *(line.record for line in plan.kept)]
        gaps = _gaps(sorted(int(r.get("seq", 0)) for r in records), _recorded(records))
        touched = _touched(plan, gaps)
        lost = sorted({s.call_id for s, _ in plan.aside
                       if s.call_id and s.call_id not in plan.latest
                       and s.call_id not in plan.salvaged})
        report = Report(tuple(s for s, _ in plan.aside), plan.reordered, tuple(gaps),
                        tuple(touched), tuple(lost), dry_run=dry_run)
        if dry_run or not report.changed:
            return report
        return _apply(store, plan, report, live[:start], live[end:])


def _plan(segment: bytes, live: bytes, start: int, end: int) -> _Plan:
    plan = _Plan()
    seen: set[int] = set()
    for old in _records(segment):
        fold.apply(plan.latest, old)
        old_seq = int(old.get("seq", 0))
        seen.add(old_seq)
        plan.last_seq = max(plan.last_seq, old_seq)
        _note_first(plan, old, old_seq)
    segment_last = plan.last_seq
    candidates: list[_Line] = []
    offset = start
    number = live[:start].count(b"\n")
    for raw in (line + b"\n" for line in live[start:end].split(b"\n")[:-1]):
        number += 1
        record = durable.decode_line(raw.rstrip(b"\n"), fold.loads)
        seq = record.get("seq") if record is not None else None
        if record is None or not isinstance(seq, int):
            _aside(plan, number, offset, raw, "its checksum fails or it does not parse",
                   _readable(raw))
        elif seq in seen or seq <= segment_last:
            _aside(plan, number, offset, raw, f"its seq {seq} was already used", record)
        else:
            seen.add(seq)
            candidates.append(_Line(number, offset, raw, record, seq))
        offset += len(raw)
    in_order = sorted(candidates, key=lambda line: line.seq)
    plan.reordered = sum(1 for a, b in zip(candidates, in_order, strict=True) if a is not b)
    for line in in_order:
        try:
            call_id = fold.apply(plan.latest, line.record)
        except (KeyError, TypeError):
            _aside(plan, line.number, line.offset, line.raw,
                   "it changes a call whose first line is gone", line.record)
            continue
        plan.kept.append(line)
        plan.last_seq = max(plan.last_seq, line.seq)
        if call_id is not None:
            _note_first(plan, line.record, line.seq)
    plan.aside.sort(key=lambda item: item[0].line)
    return plan


def _records(data: bytes) -> list[dict[str, Any]]:
    return [r for line in data.split(b"\n")[:-1]
            if (r := durable.decode_line(line, fold.loads)) is not None]


def _recorded(records: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """The gaps earlier repairs recorded: not news."""
    found: list[tuple[int, int]] = []
    for record in records:
        detail = record.get("detail")
        repair = detail.get("repair") if isinstance(detail, dict) else None
        if isinstance(repair, dict):
            found += [(int(a), int(b)) for a, b in repair.get("gaps", ())]
    return found


def _note_first(plan: _Plan, record: dict[str, Any], seq: int) -> None:
    entry = record.get("entry")
    if isinstance(entry, dict) and entry.get("callId") not in plan.first_seq:
        plan.first_seq[str(entry["callId"])] = seq


def _readable(raw: bytes) -> dict[str, Any] | None:
    """What a damaged line still says, its checksum ignored: only ever used to make more
    calls uncertain or to rebuild one as uncertain, never to mark anything finished."""
    start = raw.find(b'"data":')
    payload = raw[start + len(b'"data":'):].rstrip(b"\n")[:-1] if start >= 0 else b""
    try:
        value = json.loads(payload)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _call_of(record: dict[str, Any] | None) -> str | None:
    if record is None:
        return None
    for key in ("entry", "change", "mark"):
        part = record.get(key)
        if isinstance(part, dict) and isinstance(part.get("callId"), str):
            return str(part["callId"])
    return None


def _aside(plan: _Plan, number: int, offset: int, raw: bytes, reason: str,
           record: dict[str, Any] | None) -> None:
    call_id = _call_of(record)
    seq = record.get("seq") if record is not None else None
    plan.aside.append((SetAside(number, offset, len(raw), reason,
                                seq if isinstance(seq, int) else None, call_id), raw))
    if call_id is None or record is None or call_id in plan.latest:
        return
    entry, change = record.get("entry"), record.get("change") or record.get("mark")
    if isinstance(entry, dict) and call_id not in plan.salvaged:
        plan.salvaged[call_id] = entry
    elif isinstance(change, dict) and call_id in plan.salvaged:    # its later fields
        plan.salvaged[call_id] = {**plan.salvaged[call_id], **change}


def _gaps(seqs: list[int], recorded: list[tuple[int, int]]) -> list[tuple[int, int]]:
    gaps: list[tuple[int, int]] = []
    previous = 0
    for seq in seqs:
        gap = (previous + 1, seq - 1)
        if seq > previous + 1 and not any(a <= gap[0] and gap[1] <= b for a, b in recorded):
            gaps.append(gap)
        previous = max(previous, seq)
    return gaps


def _touched(plan: _Plan, gaps: list[tuple[int, int]]) -> list[str]:
    """Calls not finished whose line may be among those set aside or missing."""
    named = {s.call_id for s, _ in plan.aside if s.call_id}
    unread = any(s.call_id is None for s, _ in plan.aside)    # could be any call's line
    touched: list[str] = []
    for call_id, state in plan.latest.items():
        if state.get("status") in FINISHED:
            continue
        first = plan.first_seq.get(call_id, 0)
        if call_id in named or unread or any(last > first for _, last in gaps):
            touched.append(call_id)
    touched += [c for c in plan.salvaged if c not in plan.latest]
    return touched


def _rebuilt(plan: _Plan, call_id: str, repair_seq: int) -> ToolLedgerEntry | None:
    state = plan.latest.get(call_id) or plan.salvaged.get(call_id)
    if state is None:
        return None
    note = (f"ledger repair (seq {repair_seq}): a line of this call was damaged or is "
            "missing, so its outcome is unknown; check outside, then `gitguard reconcile`")
    try:
        entry = ToolLedgerEntry.model_validate(state)
    except ValueError:
        return None
    return entry.model_copy(update={"status": "uncertain", "note": note})


def _apply(store: Store, plan: _Plan, report: Report, before: bytes, torn: bytes) -> Report:
    stamp = clock.stamp()
    name = None
    if plan.aside:
        directory = store.root / QUARANTINE_DIR
        durable.ensure_dir(directory)
        safe = "".join(c if c.isalnum() else "-" for c in stamp)
        target = directory / f"ledger-{safe}.lines"
        n = 1
        while target.exists():
            n += 1
            target = directory / f"ledger-{safe}-{n}.lines"
        durable.atomic_write(target, b"".join(raw for _, raw in plan.aside))
        name = f"{QUARANTINE_DIR}/{target.name}"
    repair_seq = plan.last_seq + 1
    rebuilt = [e for c in report.uncertain if (e := _rebuilt(plan, c, repair_seq)) is not None]
    lost = sorted({*report.lost, *(c for c in report.uncertain
                                   if c not in {e.call_id for e in rebuilt})})
    detail = {"repair": {"quarantine": name, "setAside": [s.to_json() for s in report.set_aside],
                         "reordered": report.reordered,
                         "gaps": [list(g) for g in report.gaps],
                         "uncertain": [e.call_id for e in rebuilt], "lost": lost}}
    lines = [line.raw for line in plan.kept]
    lines.append(durable.encode_line({"schemaVersion": 1, "seq": repair_seq,
                                      "recordedAt": stamp, "detail": detail}))
    for n, entry in enumerate(rebuilt, start=1):
        record = fold.event_record(repair_seq + n, stamp, entry.session_id,
                                   entry.to_json(), None)
        record["detail"] = {"repairedBy": repair_seq}
        lines.append(durable.encode_line(record))
    durable.atomic_write(store.ledger_path, before + b"".join(lines) + torn)
    fold.cache_path(store.ledger_path).unlink(missing_ok=True)
    journal.forget()
    store.appended(store.ledger_path)
    trace_log.emit(store, "recovery", "recovery.repair", quarantine=name,
                   setAside=len(report.set_aside), gaps=len(report.gaps),
                   uncertain=[e.call_id for e in rebuilt], lost=lost)
    return Report(report.set_aside, report.reordered, report.gaps,
                  tuple(e.call_id for e in rebuilt), tuple(lost), name, repair_seq)
