"""The randomized kill loop: random agent sessions killed with SIGKILL at random fault points.

200 trials in `make test`; `make soak` sets GITGUARD_SOAK_TRIALS=10000. The driver
(tests/crash/killtrial.py) runs the trials in forked children while this process verifies
each finished trial, so both cores work. Every trial must satisfy, after resume:
resume succeeds and answers the same twice; every acknowledged ledger event, call and
checkpoint is there; the journals before resume are prefixes of the journals after;
no user file differs from what the session itself wrote; the user's git state is
untouched; no call is left open and an interrupted one is uncertain; no non-idempotent
call ran twice without --force-replay and each one that may have run is refused again;
`verify` finds no problem.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gitguard import verify
from gitguard.api import Guard
from gitguard.errors import GitguardError, ReplayRefused
from gitguard.ledger import fold
from gitguard.ledger.replay import BLOCKING_STATUSES, effective_policy, verdict
from gitguard.models import ToolLedgerEntry
from gitguard.storage import durable
from tests.helpers.crashkit import scratch_root, user_git_state, workspace_files

ROOT = Path(__file__).resolve().parents[2]
OPEN = ("planned", "approved", "started")


class Violations(Exception):
    pass


def read_acks(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def journal_bytes(repo: Path) -> dict[str, bytes]:
    root = repo / ".git" / "gitguard"
    found = {}
    for name in ("ledger.jsonl", "checkpoints/index.jsonl", "trace.jsonl", "sessions.jsonl"):
        path = root / name
        found[name] = path.read_bytes()[:durable.read_jsonl(path).good_bytes] \
            if path.exists() else b""
    return found


def expected_statuses(acks: list[dict[str, Any]]) -> dict[str, set[str]]:
    """The statuses each acknowledged call may have after resume."""
    allowed: dict[str, set[str]] = {}
    for ack in acks:
        call = ack.get("callId")
        if ack["op"] == "begin":
            allowed[call] = {"uncertain"}
        elif ack["op"] in ("ending", "reconciling"):
            allowed[call] = {"uncertain", ack["status"]}
        elif ack["op"] in ("end", "reconcile"):
            allowed[call] = {ack["status"]}
    return allowed


def no_unforced_replays(guard: Guard) -> list[str]:
    """Walk the ledger's events: a call that repeats a blocking one must say it was forced."""
    found = []
    live: dict[str, Any] = {}
    for record in fold.expanded(durable.read_jsonl(guard.store.ledger_path).records):
        entry = record.get("entry")
        if entry is None:
            continue
        if entry["status"] == "planned":
            for other in live.values():
                same = (other["sessionId"], other["toolName"], other["inputHash"]) == (
                    entry["sessionId"], entry["toolName"], entry["inputHash"])
                if same and other["status"] in BLOCKING_STATUSES:
                    prior = ToolLedgerEntry.model_validate(other)
                    policy = effective_policy(prior, entry["replayPolicy"])
                    forced = (entry.get("note") or "").startswith("forced replay")
                    if policy != "auto" and not forced:
                        found.append(f"{entry['callId']} replays {other['callId']} unforced")
        live[entry["callId"]] = entry
    return found


def _unprobed(answer: dict[str, Any]) -> dict[str, Any]:
    """A resume's answer without the time its probes last ran."""
    calls = [{k: v for k, v in c.items() if k != "probedAt"} for c in answer["calls"]]
    return {**answer, "calls": calls}


def check_trial(line: dict[str, Any]) -> list[str]:
    repo, acks = Path(line["repo"]), read_acks(Path(line["acks"]))
    problems = [f"the session crashed: {a['error']}" for a in acks if a["op"] == "crash"]
    if line["signal"] not in (0, signal.SIGKILL) or line["exit"] not in (0, None):
        problems.append(f"the child ended with signal {line['signal']} exit {line['exit']}")
    if line["signal"] == 0 and (not acks or acks[-1]["op"] != "done"):
        problems.append("the child exited without finishing its session")
    expected_files = dict(line["files"])
    expected_files.update({a["path"]: a["sha256"] for a in acks if a["op"] == "file"})
    if workspace_files(repo) != expected_files:
        problems.append("a user file differs from what the session wrote")
    before = journal_bytes(repo)
    guard = Guard.open(repo)
    try:
        answer = guard.resume().to_json()
    except GitguardError as exc:
        if any(a["op"] in ("begin", "checkpoint") for a in acks) or \
                "nothing to resume" not in exc.message:
            problems.append(f"resume failed: {exc.message}")
        return problems
    after = journal_bytes(repo)
    problems += [f"{name} lost acknowledged bytes" for name in before
                 if not after[name].startswith(before[name])]
    if workspace_files(repo) != expected_files:
        problems.append("resume changed a user file")
    if user_git_state(repo) != line["gitState"]:
        problems.append("the user's git state changed")
    entries = {e.call_id: e for e in guard.ledger()}
    problems += [f"{c} is left {e.status}" for c, e in entries.items() if e.status in OPEN]
    for call, allowed in expected_statuses(acks).items():
        status = entries[call].status if call in entries else "missing"
        if status not in allowed:
            problems.append(f"acknowledged {call} is {status}, expected one of {sorted(allowed)}")
    indexed = {row.checkpoint_id for row in guard.checkpoints()}
    problems += [f"acknowledged checkpoint {a['checkpointId']} is gone" for a in acks
                 if a["op"] == "checkpoint" and a["checkpointId"] not in indexed]
    problems += no_unforced_replays(guard)
    problems += verify.report(guard.store, guard.snap).problems
    # A probe that could not tell runs again at each resume (the remote may answer now):
    # only when it last ran may differ.
    if _unprobed(guard.resume().to_json()) != _unprobed(answer):
        problems.append("a second resume answered differently")
    for entry in entries.values():
        if not verdict(entry).replayable and entry.input_ref:
            tool_input = json.loads(guard.store.read_artifact(entry.input_ref))
            try:
                replayed = guard.begin_call(entry.tool_name, tool_input,
                                            session_id=entry.session_id)
            except ReplayRefused:
                continue
            problems.append(f"{entry.call_id} ({entry.tool_name}) was replayed as "
                            f"{replayed.call_id}")
    guard.close()
    return problems


@pytest.mark.soak
def test_random_kill_loop(capsys: pytest.CaptureFixture[str]) -> None:
    trials = int(os.environ.get("GITGUARD_SOAK_TRIALS", "200"))
    seed = os.environ.get("GITGUARD_SOAK_SEED", "gitguard")
    root = scratch_root()
    driver = subprocess.Popen([sys.executable, "-m", "tests.crash.killtrial", str(root),
                               str(trials), seed], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert driver.stdout is not None
    done, kills, violations = 0, 0, []
    points: Counter[str] = Counter()
    for raw in driver.stdout:
        line = json.loads(raw)
        done += 1
        if line["signal"] == signal.SIGKILL:
            kills += 1
            points[line["point"]] += 1
        problems = check_trial(line)
        if problems:
            violations.append(f"trial {line['trial']} (seed {seed}, {line['point']} armed at op "
                              f"{line['armAt']} of {line['ops']}): " + "; ".join(problems))
        else:
            shutil.rmtree(line["repo"], ignore_errors=True)
            Path(line["acks"]).unlink(missing_ok=True)
    assert driver.wait() == 0
    with capsys.disabled():
        print(f"\nkill loop: trials={done} kills={kills} violations={len(violations)} "
              f"(seed {seed}, {len(points)} distinct fault points hit)")
    if not violations:
        shutil.rmtree(root, ignore_errors=True)
    assert done == trials
    assert violations == [], "\n".join(violations[:20]) + f"\nkept in {root}"
    # A loop that never kills proves nothing.
    assert kills >= trials // 3, f"only {kills} of {trials} trials were killed"
