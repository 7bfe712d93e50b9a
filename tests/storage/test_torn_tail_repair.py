"""Store.writing repairs a torn journal tail whenever one may be there, and skips the
read of journals this Store found whole and nobody touched since."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitguard.api import Guard
from gitguard.ledger import journal
from gitguard.storage import durable


def test_a_torn_tail_is_still_repaired_and_untouched_journals_are_not_read(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    guard = Guard.open(repo)
    store = guard.store
    entry = guard.begin_call("Edit", {"file_path": "a.txt"}, writes=["a.txt"])
    guard.end_call(entry.call_id, "succeeded", "ok")
    with store.writing():       # every journal is now known whole
        pass
    read: list[Path] = []
    real = durable.repair_torn_tail

    def counted(path: Path) -> bytes:
        read.append(path)
        return real(path)

    monkeypatch.setattr(durable, "repair_torn_tail", counted)
    with store.writing():
        pass
    assert read == [], "nothing changed: no journal is read"
    # A writer killed mid-append (another process) leaves half a line in two journals.
    for path in (store.ledger_path, store.sessions_path):
        with open(path, "ab") as fh:
            fh.write(b'{"sum":"0123')
    with store.writing():
        pass
    assert set(read) == {store.ledger_path, store.sessions_path}
    for path in (store.ledger_path, store.sessions_path):
        assert path.read_bytes().endswith(b"\n")
        aside = list(path.parent.glob(f"{path.name}.torn-*"))
        assert [p.read_bytes() for p in aside] == [b'{"sum":"0123']
    assert [e.call_id for e in journal.read(store).in_order()] == [entry.call_id]
    again = guard.begin_call("Edit", {"file_path": "b.txt"}, writes=["b.txt"])
    assert journal.read(store).get(again.call_id).status == "started"


def test_what_a_block_appended_is_not_read_again_but_a_later_tear_is_repaired(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    guard = Guard.open(repo)
    store = guard.store
    first = guard.begin_call("Edit", {"file_path": "a.txt"}, writes=["a.txt"])
    read: list[Path] = []
    real = durable.repair_torn_tail

    def counted(path: Path) -> bytes:
        read.append(path)
        return real(path)

    monkeypatch.setattr(durable, "repair_torn_tail", counted)
    # call end appends to the ledger, the checkpoint index and the trace under the lock;
    # the next lock reads none of them again (the block ended normally: its appends are whole).
    guard.end_call(first.call_id, "succeeded", "ok")
    read.clear()
    with store.writing():
        pass
    assert read == []
    # A block that fails keeps nothing as known: the next entry reads what it may have grown.
    with pytest.raises(RuntimeError), store.writing():
        durable.append_jsonl(store.ledger_path, [{"torn": "no"}])
        raise RuntimeError("the block failed")
    with store.writing():
        pass
    assert read == [store.ledger_path]
    # Another process killed mid-append after that: its half line is still set aside.
    with open(store.trace_path, "ab") as fh:
        fh.write(b'{"sum":"4567')
    read.clear()
    with store.writing():
        pass
    assert read == [store.trace_path] and store.trace_path.read_bytes().endswith(b"\n")
