"""Jobs (fsyncs) run on a few worker threads, so that independent files reach the disk
together: on a journaling file system (ext4, xfs) concurrent fsyncs wait for one journal
commit, where one after the other each waits for its own; without a journal (the bench
machine's ext4) their waits still overlap (a checkpoint's file and its directory are
fsynced so; the artifact journal's fsync runs beside them).

Workers are kept (gitguard.workers): starting a thread per job makes the caller wait
until the new thread runs, which on a loaded machine cost more than the fsync it was to
hide. At most MAX_WORKERS fsyncs run at once; more wait in the queue.
"""

from __future__ import annotations

from collections.abc import Callable

from gitguard import workers

MAX_WORKERS = 4


def run(job: Callable[[], None]) -> Callable[[], None]:
    """Start `job` on a worker; returns `wait`, which returns once it is done and raises
    what it raised."""
    return workers.pool("gitguard-fsync", MAX_WORKERS).submit(job).result


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
