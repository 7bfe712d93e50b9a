"""The watcher's rows (issue 28): what watchdog's public API costs where the daemon's old
watcher reached into watchdog 7.1.0's internals, each row beside that watcher's figure.

The old figures cannot be measured any more (that code is gone, and it is deaf under
watchdog 7.1.1); they are the ones measured for issue 28 on a small repository, 2 cores,
and each row's note quotes them. The new ones are measured here, on the row's repository,
with the real watcher in this process (the daemon's `WatchdogSource`), or a real daemon
for the watch-limit row.
"""

from __future__ import annotations

import os
import queue
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.cases import CaseContext, Measurement, Skip, case
from bench.shell import run

BARRIER_IDLE = "watcher: idle barrier round trip"
BARRIER_MOVED_OUT = "watcher: barrier after a file moved out of the tree"
IGNORED_TREE = "watcher: CPU while a 20k-file ignored node_modules is created"
WATCH_LIMIT = "watcher: at the inotify watch limit"

ROUND_TRIPS = 200
MOVES = 5
PACKAGES, DIRS_PER_PACKAGE, FILES_PER_DIR = 200, 5, 20      # 20,000 files, 1,200 dirs


class _Watcher:
    """The daemon's watcher over a repository, in this process."""

    def __init__(self, repo: Path) -> None:
        try:
            from gitguard.daemon.watcher import IgnoredDirs, WatchdogSource
        except Exception as exc:  # noqa: BLE001 - any failure to import means "skip"
            raise Skip(f"gitguard.daemon.watcher not usable: {exc}") from exc
        store = repo / ".git" / "gitguard"
        store.mkdir(exist_ok=True)
        self.sink: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.source = WatchdogSource(repo, store, self.sink, skip_names=(b".git",),
                                     ignored=IgnoredDirs(repo, repo))
        self.tokens = iter(range(1, 1 << 30))
        self.events = 0

    def __enter__(self) -> _Watcher:
        self.source.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.source.stop()

    def barrier(self) -> float:
        """Plant a barrier, wait until it comes out; its round trip in ms."""
        token = next(self.tokens)
        start = time.perf_counter_ns()
        self.source.plant_barrier(token)
        while True:
            item = self.sink.get(timeout=60)
            if item.kind == "barrier" and item.token >= token:
                return (time.perf_counter_ns() - start) / 1e6
            if item.kind != "barrier":
                self.events += 1


@case(BARRIER_IDLE, group="watcher", target="report (7.1.0 internals: 0.11-0.19 ms)",
      once=True)
def barrier_idle(ctx: CaseContext) -> Measurement:
    with _Watcher(ctx.repo) as watcher:
        watcher.barrier()
        samples = tuple(watcher.barrier() for _ in range(ROUND_TRIPS))
    return Measurement(samples, note=f"{ROUND_TRIPS} barriers, nothing else happening; "
                       "the old watcher's figure: 0.11-0.19 ms")


@case(BARRIER_MOVED_OUT, group="watcher",
      target="report (7.1.0 internals: ~0.2 ms; public API unplanned: ~500 ms)", once=True)
def barrier_moved_out(ctx: CaseContext) -> Measurement:
    listed = run(["git", "ls-files", "-z"], cwd=ctx.repo).split(b"\0")
    files = [ctx.repo / os.fsdecode(p) for p in listed if p and p != b".gitignore"]
    if len(files) < MOVES:
        raise Skip("the repository has too few files to move out")
    with _Watcher(ctx.repo) as watcher:
        watcher.barrier()
        samples = []
        for i, path in enumerate(files[:MOVES]):
            os.rename(path, ctx.scratch / f"{i}-{path.name}")
            samples.append(watcher.barrier())
    return Measurement(tuple(samples), note=(
        f"{MOVES} files each moved out of the workspace, then a barrier: watchdog holds an "
        "unpaired moved-from 0.5 s while it looks for its pair, and the barrier, behind it "
        "in kernel order, waits for it (the deletion must be in the next tree). The old "
        "watcher did not pair moves: ~0.2 ms"))


def _populate(root: Path) -> None:
    script = ("import os, sys\n"
              "root = sys.argv[1]\n"
              f"for p in range({PACKAGES}):\n"
              f"    for d in range({DIRS_PER_PACKAGE}):\n"
              "        path = os.path.join(root, 'node_modules', f'p{p}', f'd{d}')\n"
              "        os.makedirs(path)\n"
              f"        for f in range({FILES_PER_DIR}):\n"
              "            with open(os.path.join(path, f'm{f}.js'), 'w') as fh:\n"
              "                fh.write('module.exports = 1\\n')\n")
    subprocess.run([sys.executable, "-c", script, str(root)], check=True)


@case(IGNORED_TREE, group="watcher",
      target="report (7.1.0 internals: 0.004 s; public API, nothing dropped: 4.35 s)",
      once=True)
def ignored_tree(ctx: CaseContext) -> Measurement:
    gitignore = ctx.repo / ".gitignore"
    gitignore.write_text((gitignore.read_text() if gitignore.exists() else "")
                         + "node_modules/\n")
    run(["git", "add", ".gitignore"], cwd=ctx.repo)
    run(["git", "commit", "-qm", "ignore node_modules"], cwd=ctx.repo)
    with _Watcher(ctx.repo) as watcher:
        watcher.barrier()
        watches_before = watcher.source.watch_count()
        cpu = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter_ns()
        _populate(ctx.repo)
        watcher.barrier()
        wall = (time.perf_counter_ns() - start) / 1e6
        after = resource.getrusage(resource.RUSAGE_SELF)
        watches = watcher.source.watch_count() - watches_before
        queued = watcher.events
    cpu_s = (after.ru_utime + after.ru_stime) - (cpu.ru_utime + cpu.ru_stime)
    shutil.rmtree(ctx.repo / "node_modules")
    files = PACKAGES * DIRS_PER_PACKAGE * FILES_PER_DIR
    return Measurement((cpu_s * 1000,), note=(
        f"the figure is the watcher's CPU in ms (this process: watchdog's threads and the "
        f"drop of what lies below an ignored directory), while another process wrote "
        f"{files:,} files in {PACKAGES * (DIRS_PER_PACKAGE + 1) + 1:,} directories "
        f"({wall:,.0f} ms wall) and a barrier came back after it; {watches:,} new watches; "
        f"{queued} event(s) reached the worker's queue. One schedule over the whole tree "
        "keeps events in kernel order (what makes a barrier exact), so a new ignored tree "
        "is watched too; the old watcher never watched it: 0.004 s"))


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c",
                            "echo 5 > /proc/sys/user/max_inotify_watches"],
                           capture_output=True)
    return probe.returncode == 0


@case(WATCH_LIMIT, group="watcher",
      target="report (7.1.0 internals: part watched, the rest reported and scanned)",
      once=True)
def watch_limit(ctx: CaseContext) -> Measurement:
    """A daemon started in a user namespace whose watch limit is half the tree's
    directories: how long it takes to say no, and what it says."""
    if not _unshare_works():
        raise Skip("needs `unshare --user` (user namespaces) to lower the limit")
    dirs = sum(len(d) for _, d, _ in os.walk(ctx.repo)) + 1
    limit = max(4, dirs // 2)
    gg = [sys.executable, "-m", "gitguard"]
    run([*gg, "init", "--no-hooks", "--no-daemon"], cwd=ctx.repo)
    start = time.perf_counter_ns()
    tried = subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c",
                            f'echo {limit} > /proc/sys/user/max_inotify_watches && exec "$@"',
                            "sh", *gg, "daemon", "start"], cwd=ctx.repo, capture_output=True,
                           text=True)
    ms = (time.perf_counter_ns() - start) / 1e6
    said = next((line for line in tried.stderr.splitlines() if line.startswith("Error:")),
                f"exit {tried.returncode}")
    return Measurement((ms,), note=(
        f"{dirs:,} directories, limit {limit:,}: `daemon start` exited {tried.returncode} "
        f"in {ms:,.0f} ms saying {said!r}; the hooks then guard in-process (watchdog "
        "schedules a tree whole or not at all). Directories made over the limit after a "
        "daemon started are reported and scanned at each call boundary, as before"))
