"""Kept worker threads (gitguard.workers): reuse, results and failures, the Scope's wait,
nested waits without a limit, the fsync pool's limit, and a forked child's own pool."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from gitguard import fileops, workers
from gitguard.storage import fsync_pool


def test_a_job_returns_its_value_and_workers_are_kept() -> None:
    names: set[str] = set()

    def who() -> str:
        names.add(threading.current_thread().name)
        return "done"

    before = workers.tasks().workers       # earlier tests may have left idle workers
    assert [workers.submit(who).result() for _ in range(40)] == ["done"] * 40
    # One after the other, every job finds a worker an earlier one left idle.
    assert workers.tasks().workers == max(before, 1)
    assert names == {"gitguard-work"}


def test_a_failure_is_raised_by_result_not_lost() -> None:
    def fail() -> None:
        raise OSError(5, "Input/output error")

    job = workers.submit(fail)
    job.wait()                          # wait() does not raise
    with pytest.raises(OSError, match="Input/output error"):
        job.result()


def test_scope_waits_for_every_job_when_its_block_raises() -> None:
    done: list[int] = []
    release = threading.Event()

    def slow() -> None:
        release.wait(60)
        done.append(1)

    with pytest.raises(RuntimeError, match="plan failed"), workers.Scope() as scope:
        scope.submit(slow)
        threading.Timer(0.05, release.set).start()
        raise RuntimeError("plan failed")
    assert done == [1], "the block's raise left a job running"


def test_a_job_that_waits_for_jobs_it_submits_never_starves() -> None:
    # Eight levels, each waiting for the next: with a limit below eight this would hang.
    def level(depth: int) -> int:
        if depth == 0:
            return 0
        return workers.submit(lambda: level(depth - 1)).result() + 1

    assert workers.submit(lambda: level(8)).result() == 8


def test_the_fsync_pool_runs_at_most_its_limit_at_once() -> None:
    running = 0
    peak = 0
    lock = threading.Lock()

    def job() -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.02)
        with lock:
            running -= 1

    fsync_pool.wait_all([fsync_pool.run(job) for _ in range(3 * fsync_pool.MAX_WORKERS)])
    assert 1 < peak <= fsync_pool.MAX_WORKERS


def test_in_threads_keeps_the_order_and_raises_after_every_slice_ended() -> None:
    items = list(range(37))
    assert fileops.in_threads(lambda x: x * x, items) == [x * x for x in items]
    ended: list[int] = []

    def maybe_fail(x: int) -> int:
        if x == 0:
            raise ValueError("first slice failed")
        time.sleep(0.001)
        ended.append(x)
        return x

    with pytest.raises(ValueError, match="first slice failed"):
        fileops.in_threads(maybe_fail, items)
    # The calling thread's slice failed at once; the other slices still ran to their end.
    assert sorted(ended) == [x for x in items if x >= -(-len(items) // fileops.THREADS)]


def test_a_forked_child_starts_workers_of_its_own() -> None:
    assert workers.submit(lambda: 1).result() == 1      # the parent's worker exists
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                                       # the child: the parent's worker
        try:                                           # thread does not exist here
            signal.alarm(30)                           # a hang ends the child, not the run
            value = workers.submit(lambda: 41).result() + 1
            os.write(write, str(value).encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        answer = os.read(read, 16)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert answer == b"42"
