"""Checkpoints: a JSON file per checkpoint (written atomically, sha256 in the index) that
points at a snapshot commit and carries HEAD, branch, dirty summary, ledger position and
run state. Message bodies are stored once each as blobs (gitguard.snapshot.messages)."""

from __future__ import annotations

import hashlib
import json
import os
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter
from pydantic.alias_generators import to_camel

from gitguard import clock, faults
from gitguard.errors import CorruptRecord, UnknownId
from gitguard.git.objects import TreeResult
from gitguard.models import SCHEMA_VERSION, Checkpoint, CheckpointIndexRow, CheckpointKind
from gitguard.snapshot import messages as message_store
from gitguard.snapshot.snapshotter import Snapshotter
from gitguard.storage import durable, journal_tail, trace_log
from gitguard.storage.store import Store

# Rows a long-lived process keeps between reads of the index: a call's begin and end look
# up their session's newest row and the call's pre checkpoint, a few rows back. Older
# ones are read from disk by whoever asks for `Index.rows` (issue #21 item 8).
KEEP = 256


@dataclass
class Index:
    """The checkpoint index. `recent`: its newest rows (all of them when `total` is their
    number); `rows`: every row, read from the file the first time it is asked for."""
    recent: list[CheckpointIndexRow] = field(default_factory=list)
    # next_id's tally: the highest number per id prefix among all rows, kept up to date
    # as rows are added, so a new id costs nothing, not a scan of the whole day
    top: dict[str, int] = field(default_factory=dict)
    total: int = 0
    path: Path | None = None
    _all: list[CheckpointIndexRow] | None = field(default=None, repr=False)

    @property
    def rows(self) -> list[CheckpointIndexRow]:
        if self._all is None:
            if len(self.recent) == self.total or self.path is None:
                self._all = self.recent
            else:
                raw, _st = journal_tail.read_full(self.path)
                self._all = _parse(self.path, raw)
        return self._all

    def add(self, row: CheckpointIndexRow) -> None:
        """A row just appended to the index file."""
        self.recent.append(row)
        if self._all is not None and self._all is not self.recent:
            self._all.append(row)
        self.total += 1
        _tally(self.top, [row])

    def _newest(self, match: Callable[[CheckpointIndexRow], bool]) -> CheckpointIndexRow | None:
        for row in reversed(self.recent):
            if match(row):
                return row
        if len(self.recent) == self.total:
            return None
        for row in reversed(self.rows):     # older than the rows kept: read from disk
            if match(row):
                return row
        return None

    def find(self, checkpoint_id: str) -> CheckpointIndexRow:
        found = self._newest(lambda row: row.checkpoint_id == checkpoint_id)
        if found is None:
            raise UnknownId(f"no checkpoint {checkpoint_id!r}",
                            "list checkpoints with `gitguard checkpoints`")
        return found

    def latest(self, session_id: str | None = None) -> CheckpointIndexRow | None:
        return self._newest(lambda row: session_id is None or row.session_id == session_id)

    def last(self) -> CheckpointIndexRow | None:
        return self.recent[-1] if self.recent else None

    def after(self, checkpoint_id: str) -> list[CheckpointIndexRow] | None:
        """The rows after `checkpoint_id`'s, oldest first; None when there is no such row."""
        for rows in (self.recent, self.rows):   # the rows kept, else all from disk
            for at in range(len(rows) - 1, -1, -1):
                if rows[at].checkpoint_id == checkpoint_id:
                    return rows[at + 1:]
        return None


# The newest rows this process last read per index file, the tally of all of them, their
# number and how far into the file they reach: the next read decodes only what was
# appended since. gc replaces the file (a new inode), which journal_tail.read_after notices,
# so the next read is a full one.
@dataclass
class _Read:
    mark: journal_tail.Mark
    recent: list[CheckpointIndexRow]
    top: dict[str, int]
    total: int

    def take(self, rows: Sequence[CheckpointIndexRow]) -> None:
        self.recent.extend(rows)
        del self.recent[:-KEEP]
        _tally(self.top, rows)
        self.total += len(rows)

    def index(self, path: Path) -> Index:
        return Index(list(self.recent), dict(self.top), self.total, path)


_READ: dict[Path, _Read] = {}
_READ_MAX = 8


# The checkpoints this process wrote last, as `load` would return them: each call's end
# loads the checkpoint its begin wrote (and every write loads the session's previous
# one), and reading, hashing and validating the file again cost ~1 ms a call. Used only
# while the index row's sha256 and the file's inode, size and mtime are still the ones
# written: gc's rewrite, a removal or any edit sends `load` to the file as before.
_WRITTEN: dict[Path, tuple[str, tuple[int, int, int, int], Checkpoint]] = {}
_WRITTEN_MAX = 4


def forget() -> None:
    _READ.clear()
    _WRITTEN.clear()


def read_index(store: Store) -> Index:
    path = store.index_path
    cached = _READ.pop(path, None)
    if cached is not None:
        tail = journal_tail.read_after(path, cached.mark)
        if tail is not None:
            decoded = [durable.decode_line(line) for line in tail.data.split(b"\n")[:-1]]
            records = [r for r in decoded if r is not None]
            if len(records) == len(decoded):    # else the full read names the bad line
                cached.take([CheckpointIndexRow.model_validate(r) for r in records])
                cached.mark = tail.mark
                _READ[path] = cached
                return cached.index(path)
    return read_index_full(store)


def read_index_full(store: Store) -> Index:
    path = store.index_path
    raw, st = journal_tail.read_full(path)
    rows = _parse(path, raw)
    top: dict[str, int] = {}
    _tally(top, rows)
    if st is not None:
        while len(_READ) >= _READ_MAX:
            del _READ[next(iter(_READ))]
        _READ[path] = _Read(journal_tail.mark_of(raw, st), rows[-KEEP:], dict(top), len(rows))
    return Index(rows, top, len(rows), path)


def _parse(path: Path, raw: bytes) -> list[CheckpointIndexRow]:
    return [CheckpointIndexRow.model_validate(r) for r in durable.parse_jsonl(path, raw).records]


def pruned_ids(store: Store) -> set[str]:
    """Checkpoints `gitguard gc` removed on purpose (ledger entries still name them).

    A record is one gc run's (`pruned_record`); stores written before that have one
    record per checkpoint ({"checkpointId": ...}), read the same way.
    """
    found: set[str] = set()
    for record in durable.read_jsonl(store.pruned_path).records:
        if "checkpointId" in record:
            found.add(str(record["checkpointId"]))
        found.update(str(c) for c in record.get("checkpointIds", ()))
        for prefix, first, last in record.get("ranges", ()):
            found.update(f"{prefix}{n:03d}" for n in range(int(first), int(last) + 1))
    return found


def pruned_record(ids: Sequence[str], pruned_at: str | None = None) -> dict[str, Any]:
    """One gc run's pruned checkpoints: runs of consecutive ids (as `next_id` numbers
    them) as [prefix, first, last] ranges, anything else listed whole. A thousand pruned
    checkpoints of one day take one range, not a thousand lines."""
    ranges: list[list[Any]] = []
    single: list[str] = []
    for checkpoint_id in ids:
        prefix, _, number = checkpoint_id.rpartition("_")
        if not (prefix and number.isdigit() and number.isascii()
                and f"{int(number):03d}" == number):
            single.append(checkpoint_id)
            continue
        prefix += "_"
        if ranges and ranges[-1][0] == prefix and ranges[-1][2] + 1 == int(number):
            ranges[-1][2] = int(number)
        else:
            ranges.append([prefix, int(number), int(number)])
    return {"prunedAt": pruned_at or clock.stamp(), "ranges": ranges, "checkpointIds": single}


def _advance(path: Path, cached: _Read, line: bytes, row: CheckpointIndexRow) -> None:
    """Move this process's read of the index past the line it just appended, so the next
    read_index does not read, checksum and validate it again. Only when the file is the
    one marked and is exactly the marked prefix plus that line (under the store lock
    nothing else appends); else the cache stays as it was and the next read finds out."""
    mark = cached.mark
    try:
        st = os.stat(path)
    except OSError:
        return
    if ((st.st_dev, st.st_ino) != (mark.dev, mark.ino) or mark.size != mark.offset
            or st.st_size != mark.offset + len(line) or _READ.get(path) is not cached):
        return
    cached.take([row])
    guard = line[-4096:]        # journal_tail's guard: the last line, at most 4 KiB of it
    cached.mark = journal_tail.Mark(mark.dev, mark.ino, st.st_size, guard, st.st_size,
                                    st.st_mtime_ns)


def _tally(top: dict[str, int], rows: Sequence[CheckpointIndexRow]) -> None:
    """Raise `top[prefix]` to each row's number: `ckpt_20261129_012` counts 12 for
    `ckpt_20261129_`. Ids not of that shape (none are written) count for nothing."""
    for row in rows:
        prefix, _, number = row.checkpoint_id.rpartition("_")
        if number.isdigit() and number.isascii():
            key = prefix + "_"
            value = int(number)
            if value > top.get(key, 0):
                top[key] = value


def next_id(index: Index) -> str:
    """Today's next number: one above the highest of today's ids in the index (the id of a
    file whose index row a crash lost is written again, as before)."""
    prefix = f"ckpt_{clock.day()}_"
    return f"{prefix}{index.top.get(prefix, 0) + 1:03d}"


def load(store: Store, row: CheckpointIndexRow, open_state: bool = True) -> Checkpoint:
    """Read a checkpoint file and verify it against the sha256 in the index.

    `open_state=False` leaves a sealed run state sealed (no key needed: verify, gc).
    """
    path = store.checkpoints_dir / row.file
    written = _WRITTEN.get(path) if open_state else None
    if written is not None and written[0] == row.sha256 and durable.stat_key(path) == written[1]:
        return written[2]
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CorruptRecord(f"checkpoint {row.checkpoint_id} is missing its file {row.file}",
                            "run `gitguard verify`; resume skips this checkpoint") from None
    if hashlib.sha256(data).hexdigest() != row.sha256:
        raise CorruptRecord(f"checkpoint {row.checkpoint_id} is corrupt: sha256 mismatch",
                            "run `gitguard verify`; resume skips this checkpoint")
    try:
        # json.loads, not model_validate_json: it keeps surrogate-escaped non-UTF-8 paths
        checkpoint = Checkpoint.model_validate(json.loads(file_json(data)))
    except (ValueError, zlib.error) as exc:
        raise CorruptRecord(f"checkpoint {row.checkpoint_id} cannot be parsed",
                            "run `gitguard verify`") from exc
    if checkpoint.run_state is None or not open_state:
        return checkpoint
    return checkpoint.model_copy(update={"run_state":
                                         store.privacy.open_state(checkpoint.run_state)})


def compressed_file(raw: bytes) -> bytes:
    """How gc stores the checkpoints it keeps: zlib, ~9 KB -> ~2 KB with a full dirty list.
    A zlib stream starts with 0x78, never with the `{` of a JSON file."""
    return zlib.compress(raw, 9)


def file_json(data: bytes) -> bytes:
    """A checkpoint file's JSON, from either form (`compressed_file`, or plain JSON)."""
    return data if data[:1] == b"{" else zlib.decompress(data)


def write(store: Store, snap: Snapshotter, index: Index, *, session_id: str,
          kind: CheckpointKind, tree: TreeResult, ledger_seq: int, step_id: str | None = None,
          call_id: str | None = None, run_state: dict[str, Any] | None = None,
          message_refs: Sequence[str] | None = None,
          transcript_path: str | None = None,
          dirty: tuple[list[str], int] | None = None,
          ready: Callable[[], None] | None = None) -> Checkpoint:
    """Commit the snapshot, write the checkpoint file, then index it. Under the store lock.

    Without new run state or messages a checkpoint carries over the session's last ones.
    New run state is redacted; run state is sealed on disk when encryption is on.
    `dirty`: the caller already knows `snap.dirty_against_head(tree)` (rollback derives it).
    `ready`: called once the file is durable, before its index row names it (rollback
    writes a planned tree's checkpoint while its writes run, and waits for them here); it
    may raise to leave the file unnamed, as a kill at `checkpoint.before_index` does.
    """
    started = time.perf_counter()
    previous_row = index.latest(session_id)
    previous: Checkpoint | None = None
    if previous_row is not None:
        try:
            previous = load(store, previous_row)
        except CorruptRecord:
            previous = None
    if run_state is not None:
        run_state = store.privacy.redact_json(run_state)
    known = previous.message_refs if previous else ()
    new_bytes = (message_store.new_blob_bytes(snap, message_refs, known)
                 if message_refs is not None else 0)
    if previous is not None:
        run_state = previous.run_state if run_state is None else run_state
        message_refs = previous.message_refs if message_refs is None else message_refs
        transcript_path = transcript_path or previous.transcript_path
    checkpoint_id = next_id(index)
    commit = snap.commit(tree.tree, session_id, {"checkpoint": checkpoint_id, "kind": kind,
                                                 "step": step_id, "call": call_id,
                                                 "skipped": list(tree.skipped)})
    head, branch = snap.head_info()
    dirty_paths, dirty_count = (dirty if dirty is not None
                                else _dirty_summary(snap, previous, commit, head, tree))
    # The file's JSON and the index row are built once, from plain data, as `to_json()` of
    # the models would give them (tests/snapshot/test_checkpoint_records.py compares);
    # the objects returned are built without validating again what was just typed.
    fields: dict[str, Any] = dict(
        checkpoint_id=checkpoint_id, session_id=session_id, kind=kind, step_id=step_id,
        call_id=call_id, created_at=clock.stamp(), snapshot_commit=commit, head=head,
        branch=branch, dirty=tuple(dirty_paths), dirty_count=dirty_count,
        skipped=tuple(tree.skipped), ledger_seq=ledger_seq, run_state=run_state,
        message_refs=tuple(message_refs or ()), transcript_path=transcript_path)
    checkpoint = Checkpoint.model_construct(schema_version=SCHEMA_VERSION, **fields)
    data = _file_bytes(fields, store.privacy.seal_state(run_state))
    file = f"{checkpoint_id}.json"
    faults.point("checkpoint.before_file")
    path = store.checkpoints_dir / file
    # The file's and its directory's fsyncs run concurrently; its index row is written only
    # once both are done, so a row always names a durable file, after a power cut too (a
    # row fsynced beside them could outlive a torn file). A kill or a power cut before the
    # row leaves a file no row names, which resume sets aside; the ledger names the
    # checkpoint only after the row.
    durable.write_then_name(path, data)
    if ready is not None:
        ready()      # rollback's writes ran meanwhile
    _index(store, index, path, data, fields, checkpoint, previous, run_state)
    faults.point("checkpoint.after_index")
    trace_log.emit(store, "checkpoint", f"checkpoint.{kind}", session_id=session_id,
                   duration_ms=tree.duration_ms + (time.perf_counter() - started) * 1000,
                   checkpointId=checkpoint_id, callId=call_id, files=len(tree.changed),
                   skipped=len(tree.skipped), bytes=len(data) + tree.bytes_hashed + new_bytes)
    return checkpoint


def _index(store: Store, index: Index, path: Path, data: bytes, fields: dict[str, Any],
           checkpoint: Checkpoint, previous: Checkpoint | None,
           run_state: dict[str, Any] | None) -> None:
    """Append the checkpoint's index row (fsynced), remember what it read back as."""
    faults.point("checkpoint.before_index")
    row_fields: dict[str, Any] = dict(
        checkpoint_id=fields["checkpoint_id"], session_id=fields["session_id"],
        kind=fields["kind"], step_id=fields["step_id"], file=path.name,
        sha256=hashlib.sha256(data).hexdigest(), created_at=fields["created_at"],
        snapshot_commit=fields["snapshot_commit"])
    row = CheckpointIndexRow.model_construct(schema_version=SCHEMA_VERSION, **row_fields)
    # What load returns is the JSON's reading: remember the object only when it reads back
    # the same (new run state from the API may hold tuples, which JSON makes lists).
    carried = run_state is None or (previous is not None and run_state is previous.run_state)
    same = carried or json.loads(durable.canonical_json(run_state)) == run_state
    key = durable.stat_key(path) if same else None
    if key is not None:
        _WRITTEN.pop(path, None)
        while len(_WRITTEN) >= _WRITTEN_MAX:
            del _WRITTEN[next(iter(_WRITTEN))]
        _WRITTEN[path] = (row.sha256, key, checkpoint)
    line = durable.encode_line(_camel(row_fields))
    cached = _READ.get(store.index_path)
    durable.append_jsonl(store.index_path, [_camel(row_fields)])
    index.add(row)
    if cached is not None:
        _advance(store.index_path, cached, line, row)


_CAMEL = {name: to_camel(name) for name in Checkpoint.model_fields}
_CAMEL.update({name: to_camel(name) for name in CheckpointIndexRow.model_fields})
_STATE = TypeAdapter(dict[str, Any] | None)


def _camel(fields: dict[str, Any]) -> dict[str, Any]:
    """A record's JSON as `Record.to_json()` gives it: camelCase names, tuples as lists."""
    out: dict[str, Any] = {"schemaVersion": SCHEMA_VERSION}
    for name, value in fields.items():
        out[_CAMEL[name]] = list(value) if isinstance(value, tuple) else value
    return out


def _file_bytes(fields: dict[str, Any], stored_state: dict[str, Any] | None) -> bytes:
    """The checkpoint file: its fields with the run state as stored (sealed or not), the
    state in pydantic's JSON form (inf and nan become null, as `to_json()` makes them)."""
    out = _camel({**fields, "run_state": None})
    out["runState"] = _STATE.dump_python(stored_state, mode="json")
    return durable.canonical_json(out) + b"\n"


def _dirty_summary(snap: Snapshotter, previous: Checkpoint | None, commit: str,
                   head: str | None, tree: TreeResult) -> tuple[list[str], int]:
    """`snap.dirty_against_head(tree)`, from the previous checkpoint's when that is exact."""
    if previous is not None and previous.snapshot_commit == commit and previous.head == head:
        # Same snapshot, same HEAD: the same dirty summary (a begin right after an end).
        return list(previous.dirty), previous.dirty_count
    known = None
    if previous is not None and previous.head == head:
        try:
            before = (snap.tree_of(previous.snapshot_commit), previous.dirty,
                      previous.dirty_count)
            known = snap.dirty_since(before, tree, head)
        except KeyError:        # its snapshot is gone (gc): take the slow way
            known = None
    return known or snap.dirty_against_head(tree.tree)
