"""The incremental reads of the ledger and the checkpoint index (gitguard.storage.journal_tail) must
give exactly what a full read gives: after appends by other processes, after a torn tail and
its repair, after gc replaced the index, and after an in-place edit."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest

from gitguard.api import Guard
from gitguard.errors import CorruptRecord
from gitguard.ledger import journal as ledger
from gitguard.retention import collect
from gitguard.snapshot import checkpoints
from gitguard.storage import durable, journal_tail
from gitguard.storage.store import Store
from tests.helpers.commands import gg


def full_ledger(store: Store) -> dict[str, Any]:
    ledger.forget()
    state = ledger.read_full(store)
    ledger.forget()
    return _ledger_view(state)


def _ledger_view(state: ledger.LedgerState) -> dict[str, Any]:
    return {"entries": {c: e.to_json() for c, e in state.entries.items()},
            "order": state.order, "first": state.first_seq, "last": state.last_seq,
            "actions": [a.to_json() for a in state.actions], "torn": state.torn}


def full_index(store: Store) -> list[dict[str, Any]]:
    checkpoints.forget()
    rows = [r.to_json() for r in checkpoints.read_index_full(store).rows]
    checkpoints.forget()
    return rows


def warm(store: Store) -> None:
    """This process reads both journals once: the marks the next reads start from."""
    ledger.read(store)
    checkpoints.read_index(store)


def agrees(store: Store) -> journal_tail.Mark:
    """The incremental reads (from the marks `warm` left) equal full reads, which leave
    the marks of the full read behind. Returns the incremental read's ledger mark."""
    incremental = _ledger_view(ledger.read(store))
    mark = ledger._FOLDED[store.ledger_path][0]
    rows = [r.to_json() for r in checkpoints.read_index(store).rows]
    assert incremental == full_ledger(store)
    assert rows == full_index(store)
    warm(store)
    return mark


def test_appends_by_other_processes_are_folded_in(repo: Path) -> None:
    guard = Guard.init(repo)
    guard.start_session("s1")
    for n in range(3):
        entry = guard.begin_call("Write", {"file_path": "a.txt", "n": n}, writes=["a.txt"])
        (repo / "a.txt").write_text(f"{n}\n")
        guard.end_call(entry.call_id, "succeeded", "ok")
    warm(guard.store)
    mark = ledger._FOLDED[guard.store.ledger_path][0]
    # Other processes append calls, a checkpoint, and a resume.
    for n in range(3):
        began = gg(repo, "call", "begin", "--tool", "Write", "--input",
                   f'{{"file_path": "b.txt", "n": {n}}}', "--writes", "b.txt", "--json")
        (repo / "b.txt").write_text(f"{n}\n")
        call_id = json.loads(began.stdout)["callId"]
        gg(repo, "call", "end", call_id, "--status", "failed", "--result", "boom")
    gg(repo, "checkpoint", "--step", "later")
    gg(repo, "call", "begin", "--tool", "Bash", "--input", '{"command": "npm publish"}')
    gg(repo, "resume", "--json")            # marks the open call uncertain
    after = agrees(guard.store)
    assert (after.ino, after.dev) == (mark.ino, mark.dev) and after.offset > mark.offset, \
        "the second read continued from the first one's mark"
    state = ledger.read(guard.store)
    assert [e.status for e in state.in_order()] == ["succeeded"] * 3 + ["failed"] * 3 + [
        "uncertain"]


def test_a_torn_tail_and_its_repair(repo: Path) -> None:
    guard = Guard.init(repo)
    guard.checkpoint("manual", "s0")
    entry = guard.begin_call("Write", {"file_path": "a.txt"}, writes=["a.txt"])
    warm(guard.store)
    whole = durable.encode_line({"seq": 999, "entry": None, "action": None})
    for journal in (guard.store.ledger_path, guard.store.index_path):
        with open(journal, "ab") as fh:
            fh.write(whole[: len(whole) // 2])           # an append cut by a crash
    agrees(guard.store)
    assert ledger.read(guard.store).torn == whole[: len(whole) // 2]
    guard.end_call(entry.call_id, "succeeded", "ok")    # the writer repairs, then appends
    agrees(guard.store)
    assert ledger.read(guard.store).torn == b""
    assert ledger.read(guard.store).entries[entry.call_id].status == "succeeded"


def test_gc_replacing_the_index_is_noticed(repo: Path) -> None:
    guard = Guard.init(repo)
    guard.start_session("s1")
    for n in range(6):
        entry = guard.begin_call("Write", {"file_path": "a.txt", "n": n}, writes=["a.txt"])
        (repo / "a.txt").write_text(f"{n}\n")
        guard.end_call(entry.call_id, "succeeded", "ok")
    guard.end_session()
    warm(guard.store)
    before = len(checkpoints.read_index(guard.store).rows)
    policy = dataclasses.replace(guard.settings.retention, keep_days=0.0, keep_first=1,
                                 keep_last=1)
    collect.run(guard.store, guard.snap, dataclasses.replace(guard.settings, retention=policy))
    agrees(guard.store)
    assert len(checkpoints.read_index(guard.store).rows) < before


def test_an_in_place_edit_is_not_trusted(repo: Path) -> None:
    guard = Guard.init(repo)
    for n in range(3):
        entry = guard.begin_call("Write", {"file_path": "a.txt", "n": n}, writes=["a.txt"])
        guard.end_call(entry.call_id, "succeeded", "ok")
    warm(guard.store)
    path = guard.store.ledger_path
    stat = path.stat()
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"seq":2', b'"seq":7')  # same length, same inode
    assert b'"seq":7' in lines[1]
    path.write_bytes(b"\n".join(lines))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    with pytest.raises(CorruptRecord, match="ledger.jsonl line 2 "):
        ledger.read(guard.store)


def test_a_rewritten_file_of_the_same_size_is_read_in_full(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    first = durable.encode_line({"n": 1}) + durable.encode_line({"n": 2})
    path.write_bytes(first)
    raw, st = journal_tail.read_full(path)
    assert st is not None
    mark = journal_tail.mark_of(raw, st)
    tail = journal_tail.read_after(path, mark)
    assert tail is not None and tail.data == b""
    with open(path, "ab") as fh:
        fh.write(durable.encode_line({"n": 3}) + b'{"sum"')
    tail = journal_tail.read_after(path, mark)
    assert tail is not None
    assert tail.data == durable.encode_line({"n": 3}) and tail.torn == b'{"sum"'
    replaced = tmp_path / "new.jsonl"
    replaced.write_bytes(path.read_bytes())
    os.replace(replaced, path)                          # as atomic_write does: a new inode
    assert journal_tail.read_after(path, tail.mark) is None
