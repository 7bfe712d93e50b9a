"""The ledger's record format, and folding a long ledger without decoding every line.

A call's first event carries its whole entry (`entry`, fields at their default left out);
each later event carries only what changed (`change`: the callId, the new status and the
fields that differ from the call's previous state, a field reset to its default written
out). The fold merges them. Ledgers written before this format hold a whole `entry` in
every event; an `entry` always replaces the call's state, so both fold to the same entries.

ledger.jsonl stays the only source of truth. `ledger.fold.json` is a snapshot of the fold
of a clean prefix of the ledger (its length and sha256): the folded entries, order, first
seqs and actions. A reader whose ledger still starts with exactly those bytes decodes only
the lines after the prefix, each one checksum-verified as always; a ledger that was cut,
rewritten or damaged fails the hash and is read in full, line by line, so a corrupt middle
line is still reported.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic_core

from gitguard import durable
from gitguard.errors import CorruptRecord
from gitguard.models import ToolLedgerEntry

FOLD_VERSION = 3
FOLD_EVERY = 512          # lines decoded past the cached prefix before the cache is rewritten

# camelCase name -> default of every ToolLedgerEntry field that has one: left out on disk.
_DEFAULTS: dict[str, Any] = {
    (f.alias or name): pydantic_core.to_jsonable_python(f.default)
    for name, f in ToolLedgerEntry.model_fields.items() if not f.is_required()
}
_KEPT = frozenset({"callId", "status"})     # in every change, whether or not they changed


@dataclass
class Fold:
    latest: dict[str, dict[str, Any]] = field(default_factory=dict)   # callId -> newest entry
    order: list[str] = field(default_factory=list)
    first_seq: dict[str, int] = field(default_factory=dict)
    actions: list[dict[str, Any]] = field(default_factory=list)       # whole action events
    last_seq: int = 0
    torn: bytes = b""
    lines: int = 0
    offset: int = 0       # bytes of the ledger folded


def loads(data: bytes) -> Any:
    """pydantic-core's parser is about twice as fast as json's on ledger lines; it refuses
    the lone surrogates that stand for non-UTF-8 path bytes, which json keeps."""
    try:
        return pydantic_core.from_json(data)
    except ValueError:
        return json.loads(data)


def cache_path(ledger_path: Path) -> Path:
    return ledger_path.with_name("ledger.fold.json")


# --- the record format -------------------------------------------------------------------

def compact(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry's JSON without the fields at their default (the model fills them back)."""
    return {k: v for k, v in entry.items() if k not in _DEFAULTS or v != _DEFAULTS[k]}


def event_record(seq: int, recorded_at: str, session_id: str, new: dict[str, Any],
                 previous: dict[str, Any] | None) -> dict[str, Any]:
    """The ledger line of one new state `new` (an entry's JSON) of a call whose previous
    state was `previous` (None for its first event)."""
    record: dict[str, Any] = {"schemaVersion": 1, "seq": seq, "recordedAt": recorded_at,
                              "sessionId": session_id}
    if previous is None:
        record["entry"] = compact(new)
    else:
        record["change"] = {k: v for k, v in new.items()
                            if k in _KEPT or previous.get(k, _DEFAULTS.get(k)) != v}
    return record


def apply(latest: dict[str, dict[str, Any]], record: dict[str, Any],
          before: dict[str, dict[str, Any]] | None = None) -> str | None:
    """Fold one event's entry or change into `latest`; its callId, None for an action.
    `before`: states of calls not in `latest` (an incremental fold's earlier entries).
    KeyError/TypeError when a change names no known call or is not an object."""
    entry = record.get("entry")
    if entry is not None:
        latest[entry["callId"]] = entry
        return str(entry["callId"])
    change = record.get("change")
    if change is None:
        return None
    call_id = change["callId"]
    base = latest.get(call_id)
    if base is None:
        if before is None or call_id not in before:
            raise KeyError(call_id)
        base = before[call_id]
    latest[call_id] = {**base, **change}
    return str(call_id)


def expanded(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The events with every `change` merged into a whole `entry`, as the old format wrote
    them (verify checks each state; tests walk them). A change naming no earlier call is
    passed through unchanged for the caller to report."""
    latest: dict[str, dict[str, Any]] = {}
    for record in records:
        try:
            call_id = apply(latest, record)
        except (KeyError, TypeError):
            yield record
            continue
        if call_id is None or "change" not in record:
            yield record
            continue
        whole = {k: v for k, v in record.items() if k != "change"}
        whole["entry"] = latest[call_id]
        yield whole


# --- folding ------------------------------------------------------------------------------

def fold(ledger_path: Path, raw: bytes | None = None) -> Fold:
    """Fold the ledger (`raw`: its bytes, when the caller has read them already)."""
    if raw is None:
        raw = durable.read_bytes(ledger_path)
        if raw is None:
            return Fold()
    end = raw.rfind(b"\n") + 1
    cache = cache_path(ledger_path)
    result = _load(cache, raw, end) or Fold()
    latest, offset, scanned = result.latest, result.offset, 0
    while offset < end:
        stop = raw.index(b"\n", offset)
        record = durable.decode_line(raw[offset:stop], loads)
        result.lines += 1
        if record is None:
            raise CorruptRecord(
                f"{ledger_path.name} line {result.lines} (byte {offset}) is corrupt: "
                "checksum mismatch",
                "run `gitguard verify`; the file was changed by something other than gitguard")
        seq = int(record.get("seq", 0))
        result.last_seq = max(result.last_seq, seq)
        known = len(latest)
        try:
            call_id = apply(latest, record)
        except (KeyError, TypeError):
            raise CorruptRecord(
                f"{ledger_path.name} line {result.lines} (byte {offset}) changes a call "
                "that has no earlier event", "run `gitguard verify`") from None
        if call_id is None:
            if record.get("action") is not None:
                result.actions.append(record)
        elif len(latest) != known:
            result.order.append(call_id)
            result.first_seq[call_id] = seq
        offset = stop + 1
        scanned += 1
    result.offset = end
    result.torn = raw[end:]
    if scanned >= FOLD_EVERY:
        _save(cache, raw, result)
    return result


def _load(cache: Path, raw: bytes, end: int) -> Fold | None:
    """The cached fold, if it describes a prefix of exactly these bytes."""
    try:
        record = durable.decode_line(cache.read_bytes().rstrip(b"\n"), loads)
    except OSError:
        return None
    if record is None or record.get("foldVersion") != FOLD_VERSION:
        return None
    try:
        offset = int(record["offset"])
        if offset > end or hashlib.sha256(raw[:offset]).hexdigest() != record["prefixSha256"]:
            return None
        order, firsts, entries = record["order"], record["first"], record["entries"]
        if not len(order) == len(firsts) == len(entries):
            return None
        actions = record["actions"]
        if not all(isinstance(e, dict) for e in entries) or not isinstance(actions, list):
            return None
        return Fold(latest=dict(zip(order, entries, strict=True)), order=list(order),
                    first_seq=dict(zip(order, firsts, strict=True)), actions=actions,
                    last_seq=int(record["lastSeq"]), lines=int(record["lines"]),
                    offset=offset)
    except (KeyError, TypeError, ValueError):
        return None


def _save(cache: Path, raw: bytes, folded: Fold) -> None:
    record = {"foldVersion": FOLD_VERSION, "offset": folded.offset,
              "prefixSha256": hashlib.sha256(raw[:folded.offset]).hexdigest(),
              "lastSeq": folded.last_seq, "lines": folded.lines,
              # parallel lists: loading them is a few C-level zips, not a loop per call
              "order": folded.order, "first": [folded.first_seq[c] for c in folded.order],
              "entries": [folded.latest[c] for c in folded.order],
              "actions": folded.actions}
    with contextlib.suppress(OSError):  # only a cache: a read-only store folds in full
        durable.atomic_write(cache, durable.encode_line(record, dumps=_dumps))


def _dumps(value: Any) -> bytes:
    """pydantic-core's serializer, several times faster than canonical JSON on ten thousand
    entries (a cache needs no canonical key order); json keeps the lone surrogates."""
    try:
        return pydantic_core.to_json(value)
    except pydantic_core.PydanticSerializationError:
        return durable.canonical_json(value)
