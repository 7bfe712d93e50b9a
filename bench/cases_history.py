"""A long session through the daemon: does a call cost the same at call 10,000 as at call
100, and does the daemon's memory stay put from 1k to 20k calls?

Each call is what the hooks send (`call begin`, a one-file edit, `call end`, as the CLI's
requests on the daemon's socket), sent from this process so that 20,000 of them take
minutes, not the hour 40,000 client processes would. Run once, on the first size given:
a session's history does not depend on the repository's size.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from typing import Any

from bench.cases import CaseContext, Measurement, Skip, case
from bench.cases_daemon import _served, _started, _stop
from bench.probes import Editor, IndexProbe
from bench.shell import du_bytes

GG_HISTORY = "gitguard daemon: a long session (per call at 10,000 vs 100; RSS 1k -> 20k)"
CALLS = int(os.environ.get("GITGUARD_BENCH_HISTORY_CALLS", "20000"))
WINDOW = 100        # calls timed around call 100 and call 10,000
RSS_AT = (1_000, 10_000, 20_000)
RSS_GROWTH_MIB = 10.0
TIME_RATIO = 1.2


@case(GG_HISTORY, group="gitguard", once=True,
      target=f"RSS growth <= {RSS_GROWTH_MIB:g} MiB from 1k to 20k calls; "
             f"per call at 10,000 <= {TIME_RATIO:g}x at 100")
def daemon_history(ctx: CaseContext) -> Measurement:
    try:
        from gitguard.ipc import client
    except Exception as exc:  # noqa: BLE001 - any failure to import means "skip this row"
        raise Skip(f"gitguard.ipc.client not usable: {type(exc).__name__}: {exc}") from exc
    _started(ctx)
    store = str(ctx.repo / ".git" / "gitguard")
    cwd = str(ctx.repo)
    try:
        editor = Editor(ctx.repo)
        probe = IndexProbe(ctx.repo)

        def send(*argv: str) -> dict[str, Any]:
            """What `gitguard call begin|end ARGS` sends the daemon."""
            answer = client.request(store, f"call.{argv[1]}",
                                    client.cli_args(list(argv), cwd, None))
            if answer.get("exit") != 0:
                raise RuntimeError(f"gitguard {' '.join(argv[:2])}: {answer}")
            return answer

        def one_call() -> None:
            rel = editor.pick()
            begun = send("call", "begin", "--tool", "Edit", "--input",
                         json.dumps({"file_path": rel}), "--writes", rel, "--json")
            editor.touch(rel)
            call_id = json.loads(begun["stdout"])["callId"]
            send("call", "end", call_id, "--status", "succeeded", "--result", "ok")

        early: list[float] = []
        late: list[float] = []
        rss: dict[int, float] = {}
        anon: dict[int, float] = {}
        before = du_bytes(ctx.repo / ".git")
        calls = max(CALLS, 3 * WINDOW)      # GITGUARD_BENCH_HISTORY_CALLS=300: a quick look
        late_at = min(10_000, calls - WINDOW // 2)
        for n in range(1, calls + 1):
            start = time.perf_counter_ns()
            one_call()
            ms = (time.perf_counter_ns() - start) / 1e6
            if 100 - WINDOW // 2 < n <= 100 + WINDOW // 2:
                early.append(ms)
            elif late_at - WINDOW // 2 < n <= late_at + WINDOW // 2:
                late.append(ms)
            if n in RSS_AT or n == calls:
                served = _served(ctx)
                rss[n] = int(served.get("rssKb", 0)) / 1024
                anon[n] = int(served.get("rssAnonKb", 0)) / 1024
        probe.check()
        ratio = statistics.median(late) / statistics.median(early)
        growth = rss[calls] - rss[min(rss)]
        grew = "; ".join(f"after {n:,}: {mib:.0f} MiB" for n, mib in sorted(rss.items()))
        note = (f"per call at 100: {statistics.median(early):.1f} ms, at {late_at:,}: "
                f"{statistics.median(late):.1f} ms ({ratio:.2f}x: "
                f"{'met' if ratio <= TIME_RATIO else 'MISSED'}); daemon RSS {grew}; growth "
                f"from {min(rss):,} to {calls:,}: {growth:.1f} MiB "
                f"({'met' if growth <= RSS_GROWTH_MIB else 'MISSED'}; anonymous memory "
                f"{anon[calls] - anon[min(anon)]:+.1f} MiB); {WINDOW} calls timed "
                f"around each point")
        added = (du_bytes(ctx.repo / ".git") - before) // calls
        return Measurement(tuple(late), added, note, probe.note())
    finally:
        _stop(ctx)
