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

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic_core
from pydantic import BaseModel, ConfigDict, TypeAdapter
from pydantic.alias_generators import to_camel

from gitguard.errors import CorruptRecord
from gitguard.models import ToolLedgerEntry
from gitguard.storage import durable

FOLD_VERSION = 3
FOLD_EVERY = 512          # lines decoded past the cached prefix before the cache is rewritten

# camelCase name -> default of every ToolLedgerEntry field that has one: left out on disk.
_DEFAULTS: dict[str, Any] = {
    (f.alias or name): pydantic_core.to_jsonable_python(f.default)
    for name, f in ToolLedgerEntry.model_fields.items() if not f.is_required()
}
_KEPT = frozenset({"callId", "status"})     # in every change, whether or not they changed
# What a `mark` event may change: facts learnt about a call after it ended (a probe that
# could not settle it, the agent's own rewind), never its status.
MARKS = frozenset({"probedAt", "probeResult", "probeRef", "note", "rewoundAt", "rewoundBy",
                   "rewoundFiles"})


@dataclass
class Fold:
    entries: dict[str, ToolLedgerEntry] = field(default_factory=dict)  # callId -> newest
    order: list[str] = field(default_factory=list)
    first_seq: dict[str, int] = field(default_factory=dict)
    actions: list[dict[str, Any]] = field(default_factory=list)       # whole action events
    last_seq: int = 0
    torn: bytes = b""
    lines: int = 0
    offset: int = 0       # bytes of the ledger folded


class _Cache(BaseModel):
    """ledger.fold.json: one model, so a fresh process parses and validates the cached
    entries in a single call into pydantic-core instead of once per entry."""
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    fold_version: int
    offset: int
    prefix_sha256: str
    last_seq: int
    lines: int
    order: list[str]
    first: list[int]
    actions: list[dict[str, Any]]
    entries: list[ToolLedgerEntry]


_STATES = TypeAdapter(list[ToolLedgerEntry])
# The cache's JSON as bytes: the model's own serializer through the public API (0.03 ms to
# make). `model_dump_json` gives the same bytes but as str: its decode and our encode
# doubled the cost, 20.4 -> 41.0 ms for a cache of 10,000 entries (6.3 MB) on the hook
# path; this is 20.7 ms.
_CACHE = TypeAdapter(_Cache)


class States(dict[str, dict[str, Any]]):
    """The JSON of already folded entries, made only for the calls a change names."""

    def __init__(self, entries: dict[str, ToolLedgerEntry]) -> None:
        super().__init__()
        self.entries = entries

    def __contains__(self, call_id: object) -> bool:
        return call_id in self.entries

    def __missing__(self, call_id: str) -> dict[str, Any]:
        return self.entries[call_id].to_json()


def validate(states: dict[str, dict[str, Any]]) -> dict[str, ToolLedgerEntry]:
    """Entries from their JSON states, in one validator call."""
    return dict(zip(states, _STATES.validate_python(list(states.values())), strict=True))


def loads(data: bytes) -> Any:
    """pydantic-core's parser is about twice as fast as json's on ledger lines; it refuses
    the lone surrogates that stand for non-UTF-8 path bytes, which json keeps.

    Without its string cache: by default pydantic-core keeps the short strings it decodes
    for the life of the process (up to ~16,000 of them: 1.2 MiB measured), and a daemon's
    ledger lines are mostly strings seen once (call ids, times, hashes); tracemalloc
    counted ~86 B a call held there over calls 2,500-6,500. 2.5 µs a 600-byte line,
    against 2.1 with the cache."""
    try:
        return pydantic_core.from_json(data, cache_strings=False)
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
    state was `previous` (None for its first event). The same status again is a `mark`:
    only MARKS fields change (the caller checks), folded exactly like a `change`."""
    record: dict[str, Any] = {"schemaVersion": 1, "seq": seq, "recordedAt": recorded_at,
                              "sessionId": session_id}
    if previous is None:
        record["entry"] = compact(new)
    else:
        kind = "mark" if previous.get("status") == new.get("status") else "change"
        record[kind] = {k: v for k, v in new.items()
                        if k in _KEPT or previous.get(k, _DEFAULTS.get(k)) != v}
    return record


def changed_fields(record: dict[str, Any]) -> set[str]:
    """The fields a `mark` or `change` event sets, besides the callId and status."""
    part = record.get("mark") or record.get("change") or {}
    return set(part) - _KEPT


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
        change = record.get("mark")
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
        if call_id is None or ("change" not in record and "mark" not in record):
            yield record
            continue
        whole = {k: v for k, v in record.items() if k not in ("change", "mark")}
        whole["entry"] = latest[call_id]
        if "mark" in record:
            whole["detail"] = {"markOf": sorted(changed_fields(record))}
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
    latest: dict[str, dict[str, Any]] = {}        # states of the calls past the cache
    before = States(result.entries)
    lines = raw[result.offset:end].split(b"\n")[:-1]
    for number, data in enumerate(durable.checked_payloads(lines)):
        record = _decode(data)
        if record is None:
            raise _corrupt(ledger_path, result, lines, number, "is corrupt: checksum mismatch")
        seq = int(record.get("seq", 0))
        result.last_seq = max(result.last_seq, seq)
        known = len(latest)
        try:
            call_id = apply(latest, record, before)
        except (KeyError, TypeError):
            raise _corrupt(ledger_path, result, lines, number,
                           "changes a call that has no earlier event") from None
        if call_id is None:
            if record.get("action") is not None:
                result.actions.append(record)
        elif len(latest) != known and call_id not in result.entries:
            result.order.append(call_id)
            result.first_seq[call_id] = seq
    result.lines += len(lines)
    result.entries.update(validate(latest))      # new calls come after the cached ones
    result.offset = end
    result.torn = raw[end:]
    if len(lines) >= FOLD_EVERY:
        _save(cache, raw, result)
    return result


def _decode(data: bytes | None) -> dict[str, Any] | None:
    if data is None:
        return None
    try:
        value = pydantic_core.from_json(data, cache_strings=False)    # see loads
    except ValueError:      # lone surrogates (non-UTF-8 path bytes), which json keeps
        try:
            value = json.loads(data)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _corrupt(ledger_path: Path, folded: Fold, lines: list[bytes], number: int,
             what: str) -> CorruptRecord:
    byte = folded.offset + sum(len(line) + 1 for line in lines[:number])
    return CorruptRecord(f"{ledger_path.name} line {folded.lines + number + 1} (byte {byte}) "
                         f"{what}", "something other than gitguard changed the file; "
                         "`gitguard repair` sets damaged lines aside (nothing is deleted) "
                         "and work goes on")


def _load(cache: Path, raw: bytes, end: int) -> Fold | None:
    """The cached fold, if it describes a prefix of exactly these bytes."""
    try:
        data = durable.checked_data(cache.read_bytes().rstrip(b"\n"))
    except OSError:
        return None
    if data is None:
        return None
    try:
        try:
            found = _Cache.model_validate_json(data)
        except ValueError:     # lone surrogates (non-UTF-8 paths): json reads them
            found = _Cache.model_validate(json.loads(data))
    except ValueError:
        return None
    if (found.fold_version != FOLD_VERSION or found.offset > end
            or hashlib.sha256(raw[:found.offset]).hexdigest() != found.prefix_sha256
            or not len(found.order) == len(found.first) == len(found.entries)):
        return None
    return Fold(entries=dict(zip(found.order, found.entries, strict=True)),
                order=found.order, first_seq=dict(zip(found.order, found.first, strict=True)),
                actions=found.actions, last_seq=found.last_seq, lines=found.lines,
                offset=found.offset)


def _save(cache: Path, raw: bytes, folded: Fold) -> None:
    record = _Cache(fold_version=FOLD_VERSION, offset=folded.offset,
                    prefix_sha256=hashlib.sha256(raw[:folded.offset]).hexdigest(),
                    last_seq=folded.last_seq, lines=folded.lines, order=folded.order,
                    first=[folded.first_seq[c] for c in folded.order], actions=folded.actions,
                    entries=[folded.entries[c] for c in folded.order])
    try:    # pydantic-core's serializer: many times faster than canonical JSON here
        data = _CACHE.dump_json(record, by_alias=True, exclude_defaults=True)
    except pydantic_core.PydanticSerializationError:   # lone surrogates: json keeps them
        data = durable.canonical_json(record.model_dump(mode="json", by_alias=True,
                                                        exclude_defaults=True))
    # A cache: one a crash left empty or torn fails its checksum and the ledger is
    # folded in full; a read-only store is folded in full every time.
    durable.replace_unsynced(cache, durable.encode_line({}, dumps=lambda _: data))

