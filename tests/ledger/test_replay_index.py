"""The replay check's index (LedgerState.runs_of) gives what a walk of the whole ledger
gives: the same calls in the same order, and the same replay decisions, after appends by
this process, after appends by another process since the index was built, and on a full
read in a fresh state."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitguard import clock
from gitguard.calls import lifecycle
from gitguard.errors import ReplayRefused
from gitguard.ledger import journal
from gitguard.ledger.replay import BLOCKING_STATUSES, effective_policy, stricter
from gitguard.models import ToolLedgerEntry
from gitguard.storage.store import Store
from gitguard.workspace import discover
from tests.helpers.crashkit import scratch_root

ROOT = Path(__file__).resolve().parents[2]
SESSIONS = ("s1", "s2", "s3")
TOOLS = ("Bash", "Write", "Edit")
INPUTS = tuple(range(4))
ENDINGS = ("succeeded", "failed", None)      # None: left started
POLICIES = ("auto", "ask", "never")
IDEMPOTENCY = ("idempotent", "conditional", "non_idempotent")

APPEND = """
import sys
from pathlib import Path
from gitguard.storage.store import Store
from gitguard.workspace import discover
from tests.ledger.test_replay_index import append_calls
append_calls(Store(discover(Path(sys.argv[1]))), range(int(sys.argv[2]), int(sys.argv[3])))
"""


def entry(number: int) -> ToolLedgerEntry:
    """Call `number`: a spread of sessions, tools, inputs, policies and idempotency."""
    return ToolLedgerEntry(
        call_id=f"call_{number}", step_id=f"step_{number}",
        tool_name=TOOLS[number % len(TOOLS)], session_id=SESSIONS[number // 3 % len(SESSIONS)],
        input_hash=journal.input_hash({"n": INPUTS[number // 5 % len(INPUTS)]}),
        status="planned", risk_level="low", idempotency=IDEMPOTENCY[number // 7 % 3],
        replay_policy=POLICIES[number // 2 % 3], planned_at=clock.stamp())


def append_calls(store: Store, numbers: range) -> None:
    with store.writing():
        state = journal.read(store)
        for n in numbers:
            planned = entry(n)
            started = planned.model_copy(update={"status": "started"})
            journal.append_entries(store, state, [planned, started])
            ending = ENDINGS[n % len(ENDINGS)]
            if ending is not None:
                journal.append_entries(store, state, [started.model_copy(
                    update={"status": ending, "finished_at": clock.stamp()})])


def walked_check(state: journal.LedgerState, session_id: str, tool: str, digest: str,
                 policy: str, confirm: bool, force: bool) -> str | None:
    """The replay check as it was: a walk of the whole ledger."""
    earlier = [e for e in state.in_order() if e.session_id == session_id and e.tool_name == tool
               and e.input_hash == digest and e.status in BLOCKING_STATUSES]
    if not earlier:
        return None
    policy = stricter(*(effective_policy(e, policy) for e in earlier))  # type: ignore[arg-type]
    if policy == "ask" and not (confirm or force):
        raise ReplayRefused("ask", "")
    if policy == "never" and not force:
        raise ReplayRefused("never", "")
    return earlier[-1].call_id


def outcome(check: object, *args: object) -> str | None:
    try:
        return check(*args)  # type: ignore[operator, no-any-return]
    except ReplayRefused:
        return "refused"


def assert_index_is_the_walk(state: journal.LedgerState) -> None:
    keys = {journal.run_key(e) for e in state.entries.values()}
    keys |= set(itertools.product(SESSIONS, TOOLS, (journal.input_hash({"n": 99}),)))
    for key in keys:
        walked = [e for e in state.in_order() if journal.run_key(e) == key]
        assert state.runs_of(key) == walked, key
        for policy, confirm, force in itertools.product(POLICIES, (False, True), (False, True)):
            args = (state, *key, policy, confirm, force)
            lineage_args = (state, (key[0],), *key[1:], policy, confirm, force)
            assert outcome(lifecycle._replay_check, *lineage_args) == \
                outcome(walked_check, *args), args


@pytest.fixture
def store() -> Iterator[Store]:
    work = scratch_root()
    yield Store(discover(work))
    shutil.rmtree(work, ignore_errors=True)


def test_the_index_equals_the_walk_across_processes(store: Store) -> None:
    append_calls(store, range(1, 60))
    assert_index_is_the_walk(journal.read(store))
    assert journal.read(store).by_run is not None, "the process's cached fold keeps the index"
    # Appended by another process since this one built its index: a tail read folds them in.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}       # the child runs in the store's repo
    subprocess.run([sys.executable, "-c", APPEND, str(store.ws.root), "60", "140"],
                   check=True, env=env, cwd=store.ws.root)
    append_calls(store, range(140, 150))                    # and this one's again
    incremental = journal.read(store)
    assert len(incremental.order) == 149
    assert incremental.by_run is not None, "kept up to date, not rebuilt"
    assert_index_is_the_walk(incremental)
    journal.forget()
    fresh = journal.read(store)
    assert fresh.by_run is None
    assert_index_is_the_walk(fresh)
    assert fresh.by_run == incremental.by_run


def test_a_call_whose_key_changes_is_reindexed(store: Store) -> None:
    append_calls(store, range(1, 10))
    assert_index_is_the_walk(journal.read(store))
    with store.writing():
        state = journal.read(store)
        moved = state.entries["call_2"].model_copy(update={"status": "failed", "tool_name": "X"})
        journal.append_entries(store, state, [moved])
        assert_index_is_the_walk(state)
    assert_index_is_the_walk(journal.read(store))
    journal.forget()
    assert_index_is_the_walk(journal.read(store))


def test_a_call_id_inside_another_is_indexed_as_its_own(store: Store) -> None:
    """The index keeps a key's only callId as a plain str: "call_1" must not be taken as
    indexed because it is a substring of "call_12"."""
    same = entry(0)
    with store.writing():
        state = journal.read(store)
        journal.append_entries(store, state, [same.model_copy(update={"call_id": "call_12"})])
        assert [c for c, _ in state.runs_by_key(journal.run_key(same))] == ["call_12"]
        journal.append_entries(store, state, [same.model_copy(update={"call_id": "call_1"})])
        assert [c for c, _ in state.runs_by_key(journal.run_key(same))] == ["call_12", "call_1"]
    assert_index_is_the_walk(journal.read(store))


def test_the_run_index_finds_whole_hashes_only() -> None:
    """A key's 8 bytes can also appear across two neighbouring hashes: that is no match."""
    index = journal.RunIndex()
    index.add(0x1122334455667788, "call_1")
    index.add(0x99AABBCCDDEEFF00, "call_2")
    index.add(0x1122334455667788, "call_3")
    straddling = int.from_bytes(bytes(index.hashes[4:12]), "little")
    assert index.find(straddling) == []
    assert index.find(0x1122334455667788) == ["call_1", "call_3"]
    assert index.find(0x99AABBCCDDEEFF00) == ["call_2"]
    assert index.find(0) == []
