"""Resume's fast ways (the ledger folded in a thread during the scan, one pass over the
calls) give exactly what the plain definitions over the fully read ledger give."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from gitguard.api import Guard
from gitguard.errors import CorruptRecord
from gitguard.ledger import fold, journal
from gitguard.ledger.replay import verdict
from gitguard.recovery import resume
from tests.helpers.crashkit import make_repo, scratch_root


@pytest.fixture
def guard(monkeypatch: pytest.MonkeyPatch) -> Iterator[Guard]:
    monkeypatch.setattr(fold, "FOLD_EVERY", 4)    # the fold cache on a short ledger
    root = scratch_root()
    made = Guard.init(make_repo(root / "repo"))
    made.start_session("s1")
    yield made
    made.close()
    shutil.rmtree(root, ignore_errors=True)


def run_with_every_status(g: Guard) -> None:
    """succeeded, failed, a replayed call, a reconciled one, a never-started one, a
    started one the crash leaves open, a gitguard-internal entry, and a torn tail."""
    g.checkpoint("manual", "step_0", state={"plan": ["a"]})
    for n in range(6):
        publish = n % 2 == 0
        command = "npm publish" if publish else f"pytest {n}"
        g.begin_call("Bash", {"command": command, "n": n},
                     replay="never" if publish else "auto")
        g.end_call(f"call_{n + 1}", "failed" if n == 3 else "succeeded")
    g.begin_call("send_email", {"to": "a@example.com"})       # call_7: left open
    g.resume()                                                 # call_7 uncertain
    g.reconcile("call_7", "succeeded", "it was sent")
    g.begin_call("Bash", {"command": "pytest 1", "n": 1})     # call_8: replay of call_2
    g.end_call("call_8", "succeeded")
    g.begin_call("send_email", {"to": "b@example.com"})       # call_9: open at the crash
    g.begin_call("gitguard.rollback", {"x": 1}, idempotency="idempotent")   # call_10
    g.end_call("call_10", "succeeded")
    with g.store.ledger_path.open("ab") as fh:                 # a torn, unfinished append
        fh.write(b'{"schemaVersion":1,"seq":')


def expected(g: Guard, sid: str) -> dict[str, Any]:
    """The plain definitions, over a full read without the fold cache."""
    journal.forget()
    fold.cache_path(g.store.ledger_path).unlink(missing_ok=True)
    entries = [e for e in journal.read_full(g.store).in_order() if e.session_id == sid]
    finished = [e for e in entries if e.status in ("succeeded", "failed")
                and not resume.never_started(e) and not e.tool_name.startswith("gitguard.")]
    return {"uncertain": [e.call_id for e in entries if e.status == "uncertain"],
            "doNotRepeat": [e.call_id for e in entries if not verdict(e).replayable],
            "lastCompletedStep": finished[-1].step_id}


def test_resume_equals_the_plain_fold_and_twice_is_the_same(guard: Guard) -> None:
    run_with_every_status(guard)
    journal.forget()            # as a fresh process finds it: the fold cache only
    first = guard.resume().to_json()
    assert first["uncertain"] == ["call_9"]
    want = expected(guard, "s1")
    assert {k: first[k] for k in want} == want
    assert "call_7" not in first["uncertain"] and "call_1" in first["doNotRepeat"]
    again = guard.resume().to_json()            # no cache and nothing open: same answer
    assert again == first


def test_a_corrupt_ledger_line_fails_resume_and_writes_nothing(guard: Guard) -> None:
    run_with_every_status(guard)
    lines = guard.store.ledger_path.read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b'"seq":4', b'"seq":99')
    guard.store.ledger_path.write_bytes(b"\n".join(lines))
    journal.forget()
    fold.cache_path(guard.store.ledger_path).unlink(missing_ok=True)
    before = guard.store.ledger_path.read_bytes()
    with pytest.raises(CorruptRecord, match="ledger.jsonl line 4 "):
        guard.resume()
    # Taking the store lock drops the torn tail (as any writer does); nothing is appended.
    assert guard.store.ledger_path.read_bytes() == before[:before.rfind(b"\n") + 1]
