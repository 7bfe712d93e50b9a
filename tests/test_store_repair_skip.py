"""Store.writing repairs a torn journal tail whenever one may be there, and skips the
read of journals this Store found whole and nobody touched since."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitguard import durable, ledger
from gitguard.api import Guard


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
    assert [e.call_id for e in ledger.read(store).in_order()] == [entry.call_id]
    again = guard.begin_call("Edit", {"file_path": "b.txt"}, writes=["b.txt"])
    assert ledger.read(store).get(again.call_id).status == "started"
