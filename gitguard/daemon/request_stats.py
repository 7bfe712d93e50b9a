"""What each tool-call request cost inside the daemon: wall time, CPU time, fsyncs and
the time spent in them.

The per-call bench row measures a hook's wall time, which on a shared disk swings with
whatever writeback the machine has queued: these figures let a reader tell the daemon's
own work (CPU) from the disk's queue (fsync wait). `daemon status --json` returns the
running totals and the last RECENT requests (`Daemon.status`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gitguard.storage import durable

RECENT = 256


class RequestStats:
    def __init__(self) -> None:
        self.totals: dict[str, float] = {"requests": 0, "wallMs": 0.0, "cpuMs": 0.0,
                                         "workerCpuMs": 0.0, "fsyncs": 0, "fsyncMs": 0.0,
                                         "fsyncBusyMs": 0.0}
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT)

    @contextmanager
    def measured(self, op: str) -> Iterator[None]:
        """Around one request on the worker. `cpuMs` is the process's CPU (the fsync
        thread and the watcher included), `workerCpuMs` the worker thread's; `fsyncMs`
        sums each fsync's time, `fsyncBusyMs` is the time any fsync was in flight
        (concurrent ones count once)."""
        fsyncs, wait_ns, busy_ns = durable.FSYNCS.snapshot()
        cpu, worker = time.process_time_ns(), time.thread_time_ns()
        start = time.perf_counter_ns()
        try:
            yield
        finally:
            wall = time.perf_counter_ns() - start
            cpu, worker = time.process_time_ns() - cpu, time.thread_time_ns() - worker
            after = durable.FSYNCS.snapshot()
            figures: dict[str, float] = {
                "wallMs": wall / 1e6, "cpuMs": cpu / 1e6, "workerCpuMs": worker / 1e6,
                "fsyncs": after[0] - fsyncs, "fsyncMs": (after[1] - wait_ns) / 1e6,
                "fsyncBusyMs": (after[2] - busy_ns) / 1e6}
            self.recent.append({"op": op, **figures})
            self.totals["requests"] += 1
            for key, value in figures.items():
                self.totals[key] += value

    def report(self) -> dict[str, Any]:
        rounded = {k: round(v, 3) for k, v in self.totals.items()}
        return {**rounded, "recent": [{k: (round(v, 3) if isinstance(v, float) else v)
                                       for k, v in row.items()} for row in self.recent]}
