"""Jobs (fsyncs) run on a few worker threads, so that independent files reach the disk
together: on a journaling file system (ext4, xfs) concurrent fsyncs wait for one journal
commit, where one after the other each waits for its own; without a journal (the bench
machine's ext4) their waits still overlap (gitguard.checkpoints writes a checkpoint file, its
directory and its index row so; the artifact journal's fsync runs beside them).

Workers are started on first use and kept: starting a thread per job makes the caller
wait until the new thread runs, which on a loaded machine cost more than the fsync it
was to hide. A job finds an idle worker or starts one, up to MAX_WORKERS (then it
queues). The pid check starts new workers in a forked child.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable

MAX_WORKERS = 4

_Job = tuple[Callable[[], None], list[BaseException], threading.Event]


class _Pool:
    def __init__(self) -> None:
        self.pid = os.getpid()
        self.jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self.idle = 0           # workers waiting for a job that no submitted job claimed yet
        self.workers = 0
        self.lock = threading.Lock()

    def submit(self, job: _Job) -> None:
        with self.lock:
            if self.idle:
                self.idle -= 1          # that worker takes this job
                start = False
            else:
                start = self.workers < MAX_WORKERS
                self.workers += start
        if start:
            threading.Thread(target=self._work, name="gitguard-fsync", daemon=True).start()
        self.jobs.put(job)

    def _work(self) -> None:
        while True:
            job, failed, done = self.jobs.get()
            try:
                job()
            except BaseException as exc:  # noqa: BLE001 - handed to wait(), raised there
                failed.append(exc)
            finally:
                with self.lock:
                    self.idle += 1
                done.set()


_POOL: _Pool | None = None
_POOL_LOCK = threading.Lock()


def run(job: Callable[[], None]) -> Callable[[], None]:
    """Start `job` on a worker; returns `wait`, which returns once it is done and raises
    what it raised."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL.pid != os.getpid():
            _POOL = _Pool()
        pool = _POOL
    failed: list[BaseException] = []
    done = threading.Event()
    pool.submit((job, failed, done))

    def wait() -> None:
        done.wait()
        if failed:
            raise failed[0]
    return wait


def wait_all(waits: list[Callable[[], None]]) -> None:
    """Wait for every job, then raise the first failure (none is left running)."""
    first: BaseException | None = None
    for wait in waits:
        try:
            wait()
        except BaseException as exc:  # noqa: BLE001 - the first one is raised below
            first = first or exc
    if first is not None:
        raise first
