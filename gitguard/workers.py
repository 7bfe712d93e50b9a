"""Kept worker threads: jobs that overlap a wait (the disk, another job) without a thread
started for each.

Starting a thread makes the caller wait until the new thread runs: 0.24 ms for a
ThreadPoolExecutor of one and 0.56 ms for four (create, one job each, shut down; measured
on the 2-core bench machine when quiet, several times that under load). A rollback of
100 files started eleven. A pool here keeps its workers (daemon threads) for the life of
the process: a job takes an idle worker, or starts one while the pool is below its limit,
or waits in the queue. A forked child starts its own workers (the pid check).

`tasks()` has no limit, so a job that waits for another job (a rollback's apply waits
for its writes) never waits behind a worker that waits for it. gitguard.storage.fsync_pool's fsync
pool has one.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Generic, TypeVar

_T = TypeVar("_T")


class Job(Generic[_T]):
    """A submitted call's outcome."""

    __slots__ = ("_fn", "_done", "_value", "_error")

    def __init__(self, fn: Callable[[], _T]) -> None:
        self._fn = fn
        self._done = threading.Event()
        self._value: _T | None = None
        self._error: BaseException | None = None

    def _run(self) -> Callable[[], None]:
        """Run it; returns what makes its outcome visible (the pool first marks its worker
        idle, so a job submitted right after this one's result() reuses that worker)."""
        try:
            value = self._fn()
        except BaseException as exc:  # noqa: BLE001 - handed to result(), raised there
            error = exc

            def failed() -> None:
                self._error = error
                self._done.set()
            return failed

        def succeeded() -> None:
            self._value = value
            self._done.set()
        return succeeded

    def wait(self) -> None:
        """Until it has ended, whatever it raised."""
        self._done.wait()

    def result(self) -> _T:
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]   # set when no error


class Pool:
    def __init__(self, name: str, limit: int | None = None) -> None:
        self.name = name
        self.limit = limit
        self.pid = os.getpid()
        self.jobs: queue.SimpleQueue[Job[object]] = queue.SimpleQueue()
        self.idle = 0           # workers waiting for a job that no submitted job claimed yet
        self.workers = 0
        self.lock = threading.Lock()

    def submit(self, fn: Callable[[], _T]) -> Job[_T]:
        job = Job(fn)
        with self.lock:
            if self.idle:
                self.idle -= 1          # that worker takes this job
                start = False
            else:
                start = self.limit is None or self.workers < self.limit
                self.workers += start
        if start:
            threading.Thread(target=self._work, name=self.name, daemon=True).start()
        self.jobs.put(job)  # type: ignore[arg-type]   # the queue holds jobs of any result
        return job

    def _work(self) -> None:
        while True:
            job = self.jobs.get()
            settle = job._run()
            with self.lock:
                self.idle += 1
            settle()


_POOLS: dict[str, Pool] = {}
_POOLS_LOCK = threading.Lock()


def pool(name: str, limit: int | None = None) -> Pool:
    """This process's pool of that name, made on first use (again in a forked child)."""
    with _POOLS_LOCK:
        found = _POOLS.get(name)
        if found is None or found.pid != os.getpid():
            found = _POOLS[name] = Pool(name, limit)
        return found


def tasks() -> Pool:
    """The pool for gitguard's own overlapped work (no limit: see the module's note)."""
    return pool("gitguard-work")


def submit(fn: Callable[[], _T]) -> Job[_T]:
    return tasks().submit(fn)


class Scope:
    """Jobs submitted through it have all ended when the with-block ends, by a raise too,
    as with a ThreadPoolExecutor's: nothing outlives the lock or the files it was given."""

    def __init__(self) -> None:
        self._jobs: list[Job[object]] = []

    def submit(self, fn: Callable[[], _T]) -> Job[_T]:
        job = submit(fn)
        self._jobs.append(job)  # type: ignore[arg-type]
        return job

    def close(self) -> None:
        for job in self._jobs:
            job.wait()

    def __enter__(self) -> Scope:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
