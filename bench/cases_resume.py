"""Resume's rows: `resume` after a crash at the end of a long run (target: a 10,000-call
ledger in under a second).

The ledger is written through gitguard's own ledger API, as a long agent session leaves
it: three checksummed events per call (planned, started, succeeded), every tenth call a
non-idempotent `npm publish`, and the fold cache the session's own reads keep up to date.
Each sample then begins one more call and leaves it open (the crash), untimed, and times
the resume that marks it uncertain, verifies the workspace and writes the note.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from bench.cases import CaseContext, Measurement, Skip, case, timed_once
from bench.probes import IndexProbe
from bench.shell import run

CALLS = 10_000
ROW = "gitguard: resume, 10,000-call ledger"
ROW_COLD = "gitguard: resume, 10,000-call ledger, no fold cache"
ROW_CLI = "gitguard CLI: resume --json, 10,000-call ledger"
ROW_CLI_DAEMON = "gitguard CLI: resume --json, 10,000-call ledger, daemon running"
_PROJECT = Path(__file__).resolve().parents[1]


def _module(name: str) -> Any:
    """gitguard is imported lazily, as in gitguard_cases: a broken package skips the row."""
    try:
        return importlib.import_module(f"gitguard.{name}")
    except Exception as exc:  # noqa: BLE001 - any failure to import means "skip this row"
        raise Skip(f"gitguard not usable: {type(exc).__name__}: {exc}") from exc


def _long_run(repo: Path) -> Any:
    """A guard on `repo` whose session has CALLS finished calls."""
    ledger, clock, models = _module("ledger.journal"), _module("clock"), _module("models")
    guard = _module("api").Guard.init(repo)
    guard.start_session("bench")
    guard.checkpoint("manual", "step_0", state={"plan": ["long run"]},
                     messages=[{"role": "user", "content": "go"}])
    with guard.store.writing():
        state = ledger.read(guard.store)
        batch: list[Any] = []
        for n in range(1, CALLS + 1):
            publish = n % 10 == 0
            command = "npm publish" if publish else f"pytest tests/test_{n}.py"
            planned = models.ToolLedgerEntry(
                call_id=f"call_{n}", step_id=f"step_{n}", tool_name="Bash",
                input_hash=ledger.input_hash({"command": command}), status="planned",
                risk_level="critical" if publish else "low",
                idempotency="non_idempotent" if publish else "conditional",
                replay_policy="never" if publish else "auto", session_id="bench",
                planned_at=clock.stamp(), summary=command,
                classification_reason=f"`{command}` (bench)")
            batch += [planned,
                      planned.model_copy(update={"status": "started",
                                                 "started_at": clock.stamp()}),
                      planned.model_copy(update={"status": "succeeded",
                                                 "finished_at": clock.stamp()})]
            if len(batch) >= 3000:
                ledger.append_entries(guard.store, state, batch)
                batch = []
        if batch:
            ledger.append_entries(guard.store, state, batch)
    ledger.read(guard.store)    # the session's own reads leave the fold cache behind
    return guard


def _forget() -> None:
    """Drop what this process remembers of earlier reads (gitguard.storage.journal_tail marks)."""
    for name in ("ledger.journal", "snapshot.checkpoints"):
        forget = getattr(_module(name), "forget", None)
        if forget is not None:
            forget()


def _crash_and_resume(ctx: CaseContext, cold: bool) -> Measurement:
    guard = _long_run(ctx.repo)
    fold_cache = _module("ledger.fold").cache_path(guard.store.ledger_path)
    probe = IndexProbe(ctx.repo)
    size = guard.store.ledger_path.stat().st_size
    samples: list[float] = []
    results: list[Any] = []
    try:
        for n in range(ctx.runs + 1):            # the first is a warm-up
            guard.begin_call("send_email", {"to": "ops@example.com", "n": n})
            if cold:      # as a fresh process finds it: no fold cache, no in-process state
                fold_cache.unlink(missing_ok=True)
                _forget()
            ms = timed_once(lambda: results.append(guard.resume()))
            if n:
                samples.append(ms)
            probe.check()
    finally:
        guard.close()
    how = "caches dropped" if cold else "the ledger already read by this process"
    note = (f"in-process, {how}; {CALLS} calls, {size / 1e6:.0f} MB ledger; each sample marks one "
            f"crashed call uncertain ({len(results[-1].uncertain)} uncertain at the end)")
    return Measurement(tuple(samples), None, note, probe.note())


@case(ROW, group="gitguard", target="< 1 s")
def resume_long_ledger(ctx: CaseContext) -> Measurement:
    return _crash_and_resume(ctx, cold=False)


@case(ROW_COLD, group="gitguard", target="< 1 s")
def resume_long_ledger_cold(ctx: CaseContext) -> Measurement:
    return _crash_and_resume(ctx, cold=True)


def _cli_resume(ctx: CaseContext, daemon: bool) -> Measurement:
    """`gitguard resume --json` in a fresh process after each crash, the way a user or an
    agent runtime runs it; with `daemon`, the workspace's daemon runs (it outlives the
    agent) and the thin client forwards the command to it."""
    guard = _long_run(ctx.repo)
    path = os.pathsep.join(p for p in (str(_PROJECT), os.environ.get("PYTHONPATH")) if p)
    env = {"PYTHONPATH": path}
    gitguard = [sys.executable, "-m", "gitguard"]
    argv = [*gitguard, "resume", "--json"]
    samples: list[float] = []
    answers: list[bytes] = []
    try:
        if daemon:
            try:
                run([*gitguard, "daemon", "start"], cwd=ctx.repo, env=env)
            except RuntimeError as exc:
                raise Skip(f"the gitguard daemon does not start here: {exc}") from exc
        for n in range(ctx.runs + 1):
            guard.begin_call("send_email", {"to": "ops@example.com", "n": n})
            ms = timed_once(lambda: answers.append(run(argv, cwd=ctx.repo, env=env)))
            if n:
                samples.append(ms)
        served = (json.loads(run([*gitguard, "daemon", "status", "--json"], cwd=ctx.repo,
                                 env=env)) if daemon else None)
    finally:
        if daemon:
            run([*gitguard, "daemon", "stop"], cwd=ctx.repo, env=env)
        guard.close()
    answer = json.loads(answers[-1])
    how = (f"the daemon answers (pid {served['pid']}), the client imports no pygit2/pydantic"
           if served else "no daemon: the whole CLI in this process")
    return Measurement(tuple(samples), None,
                       f"one process, interpreter start included; {how}; a "
                       f"{len(answers[-1]) / 1e3:.0f} kB answer naming "
                       f"{len(answer['doNotRepeat'])} calls not to repeat")


@case(ROW_CLI, group="gitguard", target="< 1 s")
def resume_long_ledger_cli(ctx: CaseContext) -> Measurement:
    return _cli_resume(ctx, daemon=False)


@case(ROW_CLI_DAEMON, group="gitguard", target="< 1 s")
def resume_long_ledger_cli_daemon(ctx: CaseContext) -> Measurement:
    return _cli_resume(ctx, daemon=True)
