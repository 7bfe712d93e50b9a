"""The recovery note after a real crash: "Last completed step" is the newest step whose
calls all finished (or where the agent saved its own state), never a step with an
interrupted call nor a call's auto-named pre checkpoint; the note lists the calls from
that point on plus every uncertain one, not the whole session."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from gitguard.ledger import journal
from gitguard.storage.store import Store
from gitguard.workspace import discover
from tests.helpers.commands import gg
from tests.helpers.daemons import wait_for


def _finished(repo: Path, step: str, command: str) -> str:
    began = gg(repo, "call", "begin", "--tool", "Bash", "--step", step, "--input",
               json.dumps({"command": command}), "--json")
    call_id = str(json.loads(began.stdout)["callId"])
    gg(repo, "call", "end", call_id, "--status", "succeeded")
    return call_id


def _killed_run(repo: Path, step: str) -> None:
    """`gitguard run` of a long command, killed (SIGKILL, its whole group) once its call
    is in the ledger: the agent's process died mid-call."""
    store = Store(discover(repo))
    before = len(journal.read(store).order)
    proc = subprocess.Popen([sys.executable, "-m", "gitguard", "run", "--step", step, "--",
                             "sleep", "600"], cwd=repo, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for("the call to start", lambda: any(
            e.status == "started" for e in journal.read(store).in_order()[before:]))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _resume(repo: Path) -> dict[str, Any]:
    done = gg(repo, "resume", "--json", check=False)
    assert done.returncode in (0, 5), done.stdout + done.stderr
    return dict(json.loads(done.stdout))


def test_two_killed_calls_of_a_step_do_not_complete_it(repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    _finished(repo, "step_1", "ls")
    _killed_run(repo, "step_2")
    _killed_run(repo, "step_2")
    out = _resume(repo)
    assert out["lastCompletedStep"] == "step_1"
    assert "Last completed step: step_1.\n" in out["recoveryNote"]
    assert len(out["uncertain"]) == 2


def test_a_step_with_one_finished_and_one_killed_call_is_not_completed(repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    _finished(repo, "step_1", "ls")
    _finished(repo, "step_2", "ls src")
    _killed_run(repo, "step_2")
    assert _resume(repo)["lastCompletedStep"] == "step_1"


def test_no_finished_call_is_no_completed_step_whatever_the_pre_checkpoint_says(
        repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    _killed_run(repo, "step_2")
    _killed_run(repo, "step_2")
    out = _resume(repo)
    assert out["lastCompletedStep"] is None
    assert "Last completed step: none yet.\n" in out["recoveryNote"]


def test_reconciled_calls_complete_their_step(repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    _finished(repo, "step_1", "ls")
    _killed_run(repo, "step_2")
    uncertain = _resume(repo)["uncertain"]
    gg(repo, "reconcile", uncertain[0], "--status", "succeeded")
    assert _resume(repo)["lastCompletedStep"] == "step_2"


def test_the_note_lists_the_calls_since_the_last_completed_step(repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    for number in range(1, 24):
        _finished(repo, f"step_{number}", f"ls -{'l' * number}")
    _finished(repo, "step_24", "ls src")
    _finished(repo, "step_24", "ls build")
    _killed_run(repo, "step_25")
    out = _resume(repo)
    note = out["recoveryNote"]
    assert out["lastCompletedStep"] == "step_24"
    assert [c["stepId"] for c in out["calls"]] == ["step_24", "step_24", "step_25"]
    assert "ran `ls src`" in note and "ran `ls build`" in note and "ls -l`" not in note
    assert "23 earlier call(s) finished before these" in note
    assert out["uncertain"] == [out["calls"][-1]["callId"]]


def test_the_agents_saved_state_is_the_point_when_it_is_newer(repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    _finished(repo, "step_1", "ls")
    _finished(repo, "step_2", "ls src")
    (repo / "state.json").write_text('{"plan": "next"}')
    gg(repo, "checkpoint", "--step", "plan_saved", "--state-file", "state.json")
    _killed_run(repo, "step_3")
    out = _resume(repo)
    assert out["lastCompletedStep"] == "plan_saved"
    assert [c["stepId"] for c in out["calls"]] == ["step_3"]


def test_the_ledger_only_note_finds_the_same_step(repo: Path) -> None:
    """The hook's fallback note (no checkpoint to resume from) applies the same rule."""
    from gitguard.api import Guard
    from gitguard.integrations.session_context import ledger_note

    gg(repo, "init", "--no-hooks", "--no-daemon")
    _finished(repo, "step_1", "ls")
    _finished(repo, "step_2", "ls src")
    _killed_run(repo, "step_2")
    guard = Guard.open(repo)
    session = journal.read(guard.store).in_order()[-1].session_id
    note = ledger_note(guard, session)
    assert "Last completed step: step_1.\n" in note


def test_a_post_checkpoint_completes_a_step_that_made_no_call(repo: Path) -> None:
    """Issue 30 item 3: `checkpoint --kind post --step step_1`, then two calls of step_2
    killed mid-call: step_1 completed (it made no call, and none of its calls is open)."""
    gg(repo, "init", "--no-hooks", "--no-daemon")
    gg(repo, "checkpoint", "--kind", "post", "--step", "step_1")
    _killed_run(repo, "step_2")
    _killed_run(repo, "step_2")
    out = _resume(repo)
    assert out["lastCompletedStep"] == "step_1"
    assert "Last completed step: step_1.\n" in out["recoveryNote"]
    assert [c["stepId"] for c in out["calls"]] == ["step_2", "step_2"]


def test_a_post_checkpoint_does_not_complete_a_step_with_an_interrupted_call(
        repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    gg(repo, "checkpoint", "--kind", "post", "--step", "step_1")
    _killed_run(repo, "step_2")
    gg(repo, "checkpoint", "--kind", "post", "--step", "step_2")
    assert _resume(repo)["lastCompletedStep"] == "step_1"


def test_a_later_finished_step_wins_over_an_earlier_post_checkpoint(repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    gg(repo, "checkpoint", "--kind", "post", "--step", "step_1")
    _finished(repo, "step_2", "ls")
    _killed_run(repo, "step_3")
    out = _resume(repo)
    assert out["lastCompletedStep"] == "step_2"
    assert [c["stepId"] for c in out["calls"]] == ["step_2", "step_3"]
