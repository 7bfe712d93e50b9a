"""What a long-lived process keeps of the history is bounded (issue #21 item 8): the ledger's
newest entries, the index's newest rows, the journals' newest spots. These tests shrink the
windows to a few items and show that a call, a row or an artifact that left them is still
found as before: ended, looked up, refused as a replay, read back; and that a fresh
process, folding the ledger from disk, agrees with the daemon that kept only the window.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitguard.api import Guard
from gitguard.calls import lifecycle
from gitguard.daemon.daemon import Daemon
from gitguard.errors import ReplayRefused
from gitguard.ipc import client
from gitguard.ledger import journal
from gitguard.snapshot import checkpoints
from gitguard.storage import artifact_journal
from gitguard.storage.store import Store
from gitguard.workspace import discover
from tests.helpers.commands import gg

SMALL = 4


@pytest.fixture(autouse=True)
def small_windows(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(journal, "WINDOW", SMALL)
    monkeypatch.setattr(checkpoints, "KEEP", SMALL)
    monkeypatch.setattr(artifact_journal, "KEEP", SMALL)
    journal.forget()
    checkpoints.forget()
    yield
    journal.forget()
    checkpoints.forget()


def edit(guard: Guard, path: str, text: str) -> str:
    entry = guard.begin_call("Edit", {"file_path": path, "text": text}, writes=[path])
    (guard.ws.root / path).write_text(text)
    return guard.end_call(entry.call_id, "succeeded").call_id


def fresh_fold(store: Store) -> dict[str, Any]:
    """The ledger as a process that never saw it folds it: from disk, no window."""
    saved = dict(journal._FOLDED)
    journal.forget()
    try:
        state = journal.read(store)
        return {"entries": {c: e.to_json() for c, e in state.entries.items()},
                "order": list(state.order), "first": dict(state.first_seq),
                "last": state.last_seq, "calls": state.calls,
                "runs": {c: state.run(c) for c in state.runs}}
    finally:
        journal._FOLDED.clear()
        journal._FOLDED.update(saved)


def kept_view(state: journal.LedgerState) -> dict[str, Any]:
    """The same fields of a state that kept only a window (entries read back from disk)."""
    return {"entries": {c: e.to_json() for c, e in state.entries.items()},
            "order": list(state.order), "first": dict(state.first_seq),
            "last": state.last_seq, "calls": state.calls,
            "runs": {c: state.run(c) for c in state.runs}}


def test_an_old_open_call_ends_and_old_calls_are_found(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    shell = guard.begin_call("Bash", {"command": "make build"})
    (repo / "built.txt").write_text("built\n")
    first = edit(guard, "src/a.txt", "a1\n")
    for n in range(3 * SMALL):
        edit(guard, f"src/n{n}.txt", f"{n}\n")
    cached = journal._FOLDED[guard.store.ledger_path][1]
    assert first not in cached.recent and shell.call_id in cached.recent, \
        "finished calls leave the window, open ones stay"
    assert len(cached.recent) <= SMALL + 1
    ended = guard.end_call(shell.call_id, "succeeded")
    # The shell call's window overlapped call_2 ... (declared writes, left the window since):
    # their declared paths are theirs, not the shell call's; built.txt is its own.
    assert [p.path for p in ended.file_patches] == ["built.txt"]
    assert journal.read(guard.store).get(first).file_patches[0].path == "src/a.txt"
    assert kept_view(journal.read(guard.store)) == fresh_fold(guard.store)
    assert guard.diff(first).startswith(b"diff --git a/src/a.txt")   # its patch, read back
    gg(repo, "verify")


def test_a_replay_of_a_call_older_than_the_window_is_still_refused(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    sent = guard.begin_call("send_email", {"to": "a@example.com"}, replay="never")
    guard.end_call(sent.call_id, "succeeded")
    for n in range(3 * SMALL):
        edit(guard, f"src/n{n}.txt", f"{n}\n")
    assert sent.call_id not in journal._FOLDED[guard.store.ledger_path][1].recent
    with pytest.raises(ReplayRefused, match=f"already ran as {sent.call_id} "):
        guard.begin_call("send_email", {"to": "a@example.com"})
    # As a fresh process sees it: the same refusal, from the ledger on disk.
    refused = gg(repo, "call", "begin", "--tool", "send_email", "--input",
                 json.dumps({"to": "a@example.com"}), check=False)
    assert refused.returncode == 4, refused.stderr
    assert f"already ran as {sent.call_id} " in refused.stderr
    again = guard.begin_call("send_email", {"to": "a@example.com"}, force_replay=True)
    assert again.replay_of == sent.call_id


def test_the_replay_guard_equals_a_walk_of_the_whole_ledger(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    for n in range(3 * SMALL):
        entry = guard.begin_call("Bash", {"command": f"echo {n % 3}"},
                                 replay="ask", confirm=True)
        guard.end_call(entry.call_id, "failed" if n % 4 == 0 else "succeeded")
    state = journal.read(guard.store)
    for n in range(4):
        digest = journal.input_hash({"command": f"echo {n}"})
        key = ("s1", "Bash", digest)
        walked = [e for e in state.in_order() if journal.run_key(e) == key]
        assert state.runs_of(key) == walked
        for confirm in (False, True):
            try:
                got: str | None = lifecycle._replay_check(state, ("s1",), "Bash", digest, "auto",
                                                          confirm, False)
            except ReplayRefused:
                got = "refused"
            blocking = [e for e in walked if e.status == "succeeded"]
            expected = None if not blocking else (blocking[-1].call_id if confirm
                                                  else "refused")
            assert got == expected, (n, confirm)


def test_old_checkpoint_rows_and_artifacts_are_read_back(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    first = guard.begin_call("Edit", {"file_path": "src/a.txt"}, writes=["src/a.txt"])
    (repo / "src/a.txt").write_text("a1\n")
    for n in range(3 * SMALL):
        edit(guard, f"src/n{n}.txt", f"{n}\n")
    index = checkpoints.read_index(guard.store)
    assert len(index.recent) == SMALL < index.total == len(index.rows)
    assert first.pre_checkpoint_id is not None
    assert index.find(first.pre_checkpoint_id).checkpoint_id == first.pre_checkpoint_id
    assert index.rows == checkpoints.read_index_full(guard.store).rows
    # The call's input left the journal's kept spots: its end still reads it back (its end
    # snapshot then looks at its declared path only) and records its patch.
    ended = guard.end_call(first.call_id, "succeeded")
    assert [p.path for p in ended.file_patches] == ["src/a.txt"]
    assert json.loads(guard.store.read_artifact(first.input_ref or "")) == \
        {"file_path": "src/a.txt"}
    gg(repo, "verify")


def test_a_fresh_process_agrees_with_the_daemon(repo: Path) -> None:
    ws = discover(repo)
    Store(ws).create()
    daemon = Daemon(ws, logging.getLogger("gitguard.test"))
    daemon.start(serve_socket=False)

    def send(*argv: str) -> dict[str, Any]:
        answer = daemon.handle({"op": f"call.{argv[1]}",
                                "args": client.cli_args(list(argv), str(repo), None)})
        assert answer["exit"] == 0, answer
        return answer

    try:
        begun = send("call", "begin", "--tool", "Bash", "--input",
                     json.dumps({"command": "make"}), "--json")
        long_open = json.loads(begun["stdout"])["callId"]
        for n in range(3 * SMALL):
            path = f"src/n{n}.txt"
            begun = send("call", "begin", "--tool", "Edit", "--input",
                         json.dumps({"file_path": path}), "--writes", path, "--json")
            (repo / path).write_text(f"{n}\n")
            send("call", "end", json.loads(begun["stdout"])["callId"], "--status",
                 "succeeded")
        send("call", "end", long_open, "--status", "succeeded")
        cached = journal._FOLDED[daemon.guard.store.ledger_path][1]
        assert cached.whole is None, "the daemon let go of the whole history"
        assert len(cached.recent) <= SMALL
        assert kept_view(journal.read(daemon.guard.store)) == fresh_fold(daemon.guard.store)
    finally:
        daemon.shutdown()
    listed = json.loads(gg(repo, "ledger", "--json").stdout)
    assert [e["callId"] for e in listed] == [f"call_{n}" for n in range(1, 3 * SMALL + 2)]
    assert listed[0]["status"] == "succeeded"
