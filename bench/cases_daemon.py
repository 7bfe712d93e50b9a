"""The watcher daemon's rows: one tool call as the agent's hook runs it, the snapshot
core in-process, and the daemon's own start-up, watches, memory and idle CPU.

gitguard is imported lazily, inside each case, as in `bench.gitguard_cases`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.cases import CaseContext, Measurement, Skip, case, per_call, timed_once
from bench.probes import Editor, IndexProbe
from bench.shell import du_bytes, run, timed_ms

GG_DAEMON_CALL = "gitguard daemon: per call (hook path)"
GG_DAEMON_CORE_1 = "gitguard daemon: snapshot core, 1 file"
GG_DAEMON_CORE_100 = "gitguard daemon: snapshot core, 100 files"
GG_DAEMON_START = "gitguard daemon: start"

_PROJECT = Path(__file__).resolve().parents[1]
IDLE_SECONDS = 5.0
PER_CALL_RUNS = 15


def _gitguard_argv() -> list[str]:
    """What an agent's hook runs: the console script next to this interpreter."""
    script = Path(sys.executable).with_name("gitguard")
    return [str(script)] if script.exists() else [sys.executable, "-m", "gitguard"]


def _gg(ctx: CaseContext, *args: str) -> bytes:
    path = os.pathsep.join(p for p in (str(_PROJECT), os.environ.get("PYTHONPATH")) if p)
    return run([*_gitguard_argv(), *args], cwd=ctx.repo, env={"PYTHONPATH": path})


def _started(ctx: CaseContext) -> None:
    try:
        _gg(ctx, "init", "--no-hooks", "--no-daemon")
        _gg(ctx, "daemon", "start")
    except RuntimeError as exc:
        raise Skip(f"the gitguard daemon does not start here: {exc}") from exc


def _hook_argv(ctx: CaseContext) -> list[str]:
    """What the installed hooks run: the package's native client when it was built with
    it (a C compiler at install), else the console script."""
    native = _PROJECT / "gitguard" / "nativeclient"
    if os.access(native, os.X_OK) and os.environ.get("GITGUARD_NATIVE") != "0":
        return [str(native), sys.executable]
    return _gitguard_argv()


def _hook(ctx: CaseContext, *args: str) -> bytes:
    path = os.pathsep.join(p for p in (str(_PROJECT), os.environ.get("PYTHONPATH")) if p)
    return run([*_hook_argv(ctx), *args], cwd=ctx.repo, env={"PYTHONPATH": path})


def _served(ctx: CaseContext) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(_gg(ctx, "daemon", "status", "--json"))
    return found


def _stop(ctx: CaseContext) -> None:
    try:
        _gg(ctx, "daemon", "stop")
    except RuntimeError as exc:
        print(f"warning: could not stop the gitguard daemon in {ctx.repo}: {exc}",
              file=sys.stderr)


@case(GG_DAEMON_CALL, group="gitguard", target="<= 25 ms, >= 10x faster than shadow")
def daemon_per_call(ctx: CaseContext) -> Measurement:
    _started(ctx)
    try:
        editor = Editor(ctx.repo)

        def step(_: int) -> None:
            rel = editor.pick()
            begun = _hook(ctx, "call", "begin", "--tool", "Edit", "--input",
                        json.dumps({"file_path": rel}), "--writes", rel, "--json")
            editor.touch(rel)
            _hook(ctx, "call", "end", json.loads(begun)["callId"], "--status", "succeeded",
                "--result", "ok")

        # At least PER_CALL_RUNS samples: the disk's queue moves single calls by 10+ ms.
        runs = max(ctx.runs, PER_CALL_RUNS)
        measured = per_call(dataclasses.replace(ctx, runs=runs), step, grows=ctx.repo / ".git")
        served = _served(ctx)
        bare = statistics.median(timed_ms([sys.executable, "-c", "pass"], cwd=ctx.repo)
                                 for _ in range(5))
        client = _hook_argv(ctx)[0]
        kind = "native client" if client.endswith("nativeclient") else Path(client).name
        note = (f"2 processes ({kind} `call begin`, edit, `call end`); a bare interpreter "
                f"start is {bare:.1f} ms here; served by "
                f"the daemon: {served.get('incremental', 0)} O(changed) trees, "
                f"{served.get('full_scans', 0)} full scan; {runs} samples; "
                + _split(measured.samples_ms, served))
        return Measurement(measured.samples_ms, measured.bytes_added, note, measured.index)
    finally:
        _stop(ctx)


def _split(samples_ms: tuple[float, ...], served: dict[str, Any]) -> str:
    """Per call, medians: the hook's wall time, and inside the daemon (its `requests`
    report: begin + end of each timed call) wall, CPU, fsyncs and the time an fsync was
    in flight; what is left is the two client processes and the socket."""
    rows = [r for r in served.get("requests", {}).get("recent", [])
            if r.get("op") in ("call.begin", "call.end")][-2 * len(samples_ms):]
    if len(rows) != 2 * len(samples_ms):
        return "no per-request figures from the daemon"
    calls = [{k: a[k] + b[k] for k in ("wallMs", "cpuMs", "fsyncs", "fsyncBusyMs")}
             for a, b in zip(rows[::2], rows[1::2], strict=True)]

    def med(key: str) -> float:
        return float(statistics.median(c[key] for c in calls))

    wall, inside = statistics.median(samples_ms), med("wallMs")
    return (f"per call (medians): wall {wall:.1f} ms = daemon {inside:.1f} ms "
            f"(CPU {med('cpuMs'):.1f} ms, {med('fsyncs'):g} fsyncs, "
            f"fsync in flight {med('fsyncBusyMs'):.1f} ms) + clients and socket "
            f"{wall - inside:.1f} ms")


def _core(ctx: CaseContext, files: int) -> Measurement:
    """Barrier, events drained, tree from the previous one, snapshot commit: in-process."""
    try:
        from gitguard.daemon.daemon import Daemon
        from gitguard.storage.store import Store
        from gitguard.workspace import discover
    except Exception as exc:  # noqa: BLE001 - any failure to import means "skip this row"
        raise Skip(f"gitguard.daemon.daemon not usable: {type(exc).__name__}: {exc}") from exc
    ws = discover(ctx.repo)
    Store(ws).create()
    log = logging.getLogger("bench.daemon")
    log.addHandler(logging.NullHandler())
    log.propagate = False
    daemon = Daemon(ws, log)
    probe = IndexProbe(ctx.repo)
    daemon.start(serve_socket=False)
    try:
        engine, snap = daemon.engine, daemon.guard.snap
        editor = Editor(ctx.repo)
        samples: list[float] = []
        before = du_bytes(ctx.repo / ".git")
        for i in range(ctx.runs + 1):
            for _ in range(files):
                editor.edit()

            def snapshot() -> None:
                with daemon.guard.store.writing():
                    tree = engine.tree_now()
                    snap.commit(tree.tree, "bench", {"kind": "bench"})

            ms = timed_once(snapshot)
            probe.check()
            if i:                       # the first one is the warm-up
                samples.append(ms)
        added = (du_bytes(ctx.repo / ".git") - before) // (ctx.runs + 1)
        with daemon.guard.store.writing():
            agreed = engine.resync()
        note = (f"{files} edited file(s) per sample; tree equals a full scan: "
                f"{'yes' if agreed else 'NO'}; {engine.counts['full_scans']} full scan(s)")
        return Measurement(tuple(samples), added, note, probe.note())
    finally:
        daemon.shutdown()


@case(GG_DAEMON_CORE_1, group="gitguard", target="<= 10 ms")
def daemon_core_one(ctx: CaseContext) -> Measurement:
    return _core(ctx, 1)


@case(GG_DAEMON_CORE_100, group="gitguard", target="<= 60 ms")
def daemon_core_hundred(ctx: CaseContext) -> Measurement:
    return _core(ctx, 100)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@case(GG_DAEMON_START, group="gitguard", target="report", first=True)
def daemon_start(ctx: CaseContext) -> Measurement:
    try:
        _gg(ctx, "init", "--no-hooks", "--no-daemon")
    except RuntimeError as exc:
        raise Skip(f"`gitguard init` not usable: {exc}") from exc
    probe = IndexProbe(ctx.repo)
    store = ctx.repo / ".git" / "gitguard"
    before = du_bytes(store)
    ms = timed_once(lambda: _gg(ctx, "daemon", "start"))
    try:
        served = _served(ctx)
        pid = int(served["pid"])
        cpu = _cpu_seconds(pid)
        time.sleep(IDLE_SECONDS)        # a report, not a test: idle means wall time passing
        idle = (_cpu_seconds(pid) - cpu) / IDLE_SECONDS * 100
        served = _served(ctx)
        probe.check()
        note = (f"until it answers (scan included: {served.get('startMs')} ms); "
                f"{served.get('watches')} inotify watches, RSS "
                f"{int(served.get('rssKb', 0)) / 1024:.0f} MiB, idle CPU {idle:.2f}% over "
                f"{IDLE_SECONDS:.0f} s")
        return Measurement((ms,), du_bytes(store) - before, note, probe.note())
    finally:
        _stop(ctx)
