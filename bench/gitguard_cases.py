"""gitguard's own rows: the Python API in-process, and the CLI as an agent hook runs it.

gitguard is imported lazily, inside each case: when the package or its API is
missing or broken, these rows say "skipped" and the anchors still run.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import resource
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.cases import CaseContext, Measurement, Skip, case, per_call, timed_once
from bench.probes import Editor, IndexProbe
from bench.shell import du_bytes, run

GG_FIRST = "gitguard: first snapshot"
GG_PER_CALL = "gitguard: per call (no daemon)"
GG_CLI_PER_CALL = "gitguard CLI: per call (no daemon)"

_PROJECT = Path(__file__).resolve().parents[1]


def _guard_class() -> Any:
    try:
        return importlib.import_module("gitguard.api").Guard
    except Exception as exc:  # noqa: BLE001 - any failure to import means "skip this row"
        raise Skip(f"gitguard.api not usable: {type(exc).__name__}: {exc}") from exc


@case(GG_FIRST, group="gitguard", target="< 300 ms, < 5 MB", first=True)
def first_snapshot(ctx: CaseContext) -> Measurement:
    guard_class = _guard_class()
    git_dir = ctx.repo / ".git"
    probe = IndexProbe(ctx.repo)
    before = du_bytes(git_dir)  # before init: the store it creates counts too
    guard = guard_class.init(ctx.repo)
    try:
        ms = timed_once(lambda: guard.checkpoint(kind="manual", step_id="s0"))
        grown = du_bytes(git_dir) - before
        # The first checkpoint makes no private stat index: the second scan copies the
        # user's index into the store. Shown beside the row's value, which stays the first's.
        guard.checkpoint(kind="manual", step_id="s1")
        store_after_second = du_bytes(guard.store.root)
    finally:
        guard.close()
    probe.check()
    note = ("checkpoint() timed; bytes: du .git before init vs after, store included;"
            f" store after a 2nd checkpoint {store_after_second / 1e6:.2f} MB"
            " (the private stat index arrives at the 2nd scan)")
    return Measurement((ms,), grown, note, probe.note())


@case(GG_PER_CALL, group="gitguard", target="<= git status")
def api_per_call(ctx: CaseContext) -> Measurement:
    guard = _guard_class().init(ctx.repo)
    try:
        guard.checkpoint(kind="manual", step_id="s0")
        editor = Editor(ctx.repo)
        begins: list[float] = []
        ends: list[float] = []

        def step(_: int) -> None:
            rel = editor.pick()
            entry: Any = None

            def begin() -> None:
                nonlocal entry
                entry = guard.begin_call("write_file", {"path": rel}, writes=[rel])

            begins.append(timed_once(begin))
            editor.touch(rel)
            ends.append(timed_once(lambda: guard.end_call(entry.call_id, "succeeded", "ok")))

        measured = per_call(ctx, step, grows=ctx.repo / ".git")
        note = (f"in-process; median begin_call {statistics.median(begins[1:]):.1f} ms,"
                f" end_call {statistics.median(ends[1:]):.1f} ms")
        return dataclasses.replace(measured, note=note)
    finally:
        guard.close()


def _cli(ctx: CaseContext, *args: str) -> bytes:
    path = os.pathsep.join(p for p in (str(_PROJECT), os.environ.get("PYTHONPATH")) if p)
    argv = [sys.executable, "-m", "gitguard", *args]
    return run(argv, cwd=ctx.repo, env={"PYTHONPATH": path})


@case(GG_CLI_PER_CALL, group="gitguard", target="<= git status")
def cli_per_call(ctx: CaseContext) -> Measurement:
    try:
        _cli(ctx, "--help")
    except RuntimeError as exc:
        raise Skip(f"`python -m gitguard` not usable: {exc}") from exc
    _cli(ctx, "init", "--no-hooks", "--no-daemon")
    _cli(ctx, "checkpoint", "--kind", "manual", "--step", "s0", "--json")
    editor = Editor(ctx.repo)
    cpu: dict[str, list[float]] = {"begin": [], "end": []}

    def counted(verb: str, *args: str) -> bytes:
        # user + system CPU of the process and its git children: less load-sensitive
        # than the wall time the row reports
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = _cli(ctx, "call", verb, *args)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu[verb].append((after.ru_utime - before.ru_utime
                          + after.ru_stime - before.ru_stime) * 1000)
        return out

    def step(_: int) -> None:
        rel = editor.pick()
        begun = counted("begin", "--tool", "write_file",
                        "--input", json.dumps({"path": rel}), "--writes", rel, "--json")
        editor.touch(rel)
        counted("end", json.loads(begun)["callId"], "--status", "succeeded", "--result", "ok")

    try:
        measured = per_call(ctx, step, grows=ctx.repo / ".git")
        note = (f"CPU begin {statistics.median(cpu['begin'][1:]):.0f} / end"
                f" {statistics.median(cpu['end'][1:]):.0f} ms (medians, user+sys, git"
                " included); 2 processes: `call begin --json`, edit, `call end`")
        return dataclasses.replace(measured, note=note)
    finally:
        _stop_daemon(ctx)


def _stop_daemon(ctx: CaseContext) -> None:
    """`--no-daemon` should leave none running; stop one if it started anyway."""
    if (ctx.repo / ".git" / "gitguard" / "daemon.pid").exists():
        try:
            _cli(ctx, "daemon", "stop")
        except RuntimeError as exc:
            print(f"warning: could not stop the gitguard daemon in {ctx.repo}: {exc}",
                  file=sys.stderr)
