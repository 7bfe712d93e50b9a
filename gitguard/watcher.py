"""Event sources for the daemon: a watchdog observer over the workspace, or a script.

The watcher is a producer only: its threads turn filesystem events into `Raw`
items on a queue and never touch git (pygit2 objects belong to the one worker
that drains the queue). The observer is scheduled with an event filter so the
kernel is not even asked for open/close-nowrite/access events: with watchdog's
defaults an idle 100k-file repository overflowed the inotify queue continuously.

Ordering is what makes the daemon exact. Every write a client made before it
sent a request has already queued its inotify event in the kernel, and one
recursive watch delivers events in kernel order through one FIFO. So before a
snapshot the worker plants a *barrier*: it creates a uniquely named file in the
store (inside the workspace, so watched), or, in a linked worktree whose store
lies outside the workspace, sets a unique access time on the `.git` file; when
that event comes out of the queue, every earlier change has come out before it.

Watchdog reports a kernel queue overflow only as a log warning; a logging handler
catches it and enqueues an `overflow` item, after which the worker rescans.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from watchdog.events import FileSystemEvent, FileSystemEventHandler

from gitguard.attribution import EventKind

RawKind = EventKind | Literal["overflow", "barrier"]
BARRIER_PREFIX = ".gg-barrier-"
_WATCHDOG_LOGGERS = ("watchdog.observers.inotify_c", "watchdog.observers.inotify")


@dataclass(frozen=True)
class Raw:
    """One item on the worker's queue: a workspace-relative path (bytes) and what happened."""

    kind: RawKind
    path: bytes = b""
    at: float = 0.0
    token: int = 0
    directory: bool = False


class Source(Protocol):
    """Where the worker's events come from (the real watcher or a test script)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def plant_barrier(self, token: int) -> None: ...

    def watch_count(self) -> int: ...


class PathFilter:
    """Which absolute event paths matter: inside the workspace, outside `.git` and the store.
    Ignore rules need git and are applied by the worker, not here."""

    def __init__(self, root: Path, skip_names: tuple[bytes, ...]) -> None:
        self.prefix = os.fsencode(root).rstrip(b"/") + b"/"
        self.skip_names = frozenset(skip_names) | {b".git"}

    def relative(self, path: bytes) -> bytes | None:
        if not path.startswith(self.prefix):
            return None
        rel = path[len(self.prefix):]
        parts = rel.split(b"/")
        if not rel or parts[0] in self.skip_names or b".git" in parts:
            return None
        return rel


class Barriers:
    """Plants and recognises barrier events for a workspace."""

    def __init__(self, root: Path, store: Path) -> None:
        self.root = root
        self.store = store
        self.in_tree = store.resolve().is_relative_to(root.resolve())
        self.gitfile = root / ".git"
        self.file_prefix = os.fsencode(store / BARRIER_PREFIX)

    def plant(self, token: int) -> None:
        if self.in_tree:
            path = self.store / f"{BARRIER_PREFIX}{token}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
            os.unlink(path)
            return
        # A linked worktree: the store is outside the watch. The access time of the
        # `.git` file carries the token (ns, in the future so relatime never moves it).
        mtime = os.stat(self.gitfile).st_mtime_ns
        os.utime(self.gitfile, ns=(_atime_for(token), mtime), follow_symlinks=False)

    def token_of(self, path: bytes, directory: bool) -> int | None:
        if self.in_tree:
            if path.startswith(self.file_prefix) and not directory:
                tail = path[len(self.file_prefix):]
                return int(tail) if tail.isdigit() else None
            return None
        if path == os.fsencode(self.gitfile):
            try:
                atime = os.stat(self.gitfile).st_atime_ns
            except OSError:
                return None
            return _token_from(atime)
        return None


_ATIME_BASE = 4_000_000_000 * 10**9    # year 2096: tokens live far above any real atime


def _atime_for(token: int) -> int:
    return _ATIME_BASE + token


def _token_from(atime: int) -> int | None:
    return atime - _ATIME_BASE if atime > _ATIME_BASE else None


class _OverflowLog(logging.Handler):
    """Watchdog's only overflow signal is a warning in its log."""

    def __init__(self, sink: queue.SimpleQueue[Raw]) -> None:
        super().__init__(logging.WARNING)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" in record.getMessage().lower():
            self.sink.put(Raw("overflow", at=time.time()))


class WatchdogSource:
    """A recursive inotify watch on the workspace through watchdog."""

    def __init__(self, root: Path, store: Path, sink: queue.SimpleQueue[Raw],
                 skip_names: tuple[bytes, ...] = ()) -> None:
        self.root = root
        self.sink = sink
        self.filter = PathFilter(root, skip_names)
        self.barriers = Barriers(root, store)
        self._observer: Any = None
        self._log = _OverflowLog(sink)

    def start(self) -> None:
        from watchdog import events as ev
        from watchdog.observers.inotify import InotifyObserver

        # No open, close-nowrite or access events: only what changes content or names.
        wanted = [ev.FileCreatedEvent, ev.DirCreatedEvent, ev.FileModifiedEvent,
                  ev.FileClosedEvent, ev.FileAttribEvent, ev.DirAttribEvent,
                  ev.FileDeletedEvent, ev.DirDeletedEvent, ev.FileMovedEvent, ev.DirMovedEvent]
        for name in _WATCHDOG_LOGGERS:
            logging.getLogger(name).addHandler(self._log)
        observer = InotifyObserver()
        observer.schedule(_Handler(self), str(self.root), recursive=True, event_filter=wanted)
        observer.start()
        self._observer = observer

    def stop(self) -> None:
        for name in _WATCHDOG_LOGGERS:
            logging.getLogger(name).removeHandler(self._log)
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=10)
            self._observer = None

    def plant_barrier(self, token: int) -> None:
        self.barriers.plant(token)

    def watch_count(self) -> int:
        return inotify_watches(os.getpid())

    def dispatch(self, event: Any) -> None:
        """Runs on watchdog's thread: classify, filter, enqueue. Never touches git."""
        now = time.time()
        src = os.fsencode(event.src_path)
        kind = event.event_type
        if kind in ("attrib", "created", "closed"):
            token = self.barriers.token_of(src, event.is_directory)
            if token is not None:
                self.sink.put(Raw("barrier", token=token, at=now))
                return
        directory = bool(event.is_directory)
        if kind == "moved":
            self._put("move_from", src, now, directory)
            self._put("move_to", os.fsencode(event.dest_path), now, directory)
        elif kind == "attrib" and directory:
            return      # a directory's own mode or times: no file changed
        elif kind in _KINDS:
            self._put(_KINDS[kind], src, now, directory)

    def _put(self, kind: EventKind, path: bytes, now: float, directory: bool) -> None:
        rel = self.filter.relative(path)
        if rel is not None:
            self.sink.put(Raw(kind, rel, now, directory=directory))


_KINDS: dict[str, EventKind] = {"created": "create", "modified": "write", "closed": "close",
                                "attrib": "attrib", "deleted": "delete"}


class _Handler(FileSystemEventHandler):
    """watchdog calls `dispatch(event)` on its observer thread."""

    def __init__(self, source: WatchdogSource) -> None:
        self.source = source

    def dispatch(self, event: FileSystemEvent) -> None:
        self.source.dispatch(event)


class ScriptedSource:
    """A deterministic event source for tests: the test says what the kernel would have."""

    def __init__(self, sink: queue.SimpleQueue[Raw]) -> None:
        self.sink = sink
        self.clock = itertools.count(1)
        self.epoch = time.time()
        self.started = threading.Event()

    def start(self) -> None:
        self.started.set()

    def stop(self) -> None:
        self.started.clear()

    def plant_barrier(self, token: int) -> None:
        self.sink.put(Raw("barrier", token=token, at=self.epoch + next(self.clock) / 1000))

    def watch_count(self) -> int:
        return 0

    def emit(self, kind: RawKind, path: str = "", directory: bool = False) -> None:
        """Queue what the kernel would report; times increase by a millisecond per event."""
        at = self.epoch + next(self.clock) / 1000
        self.sink.put(Raw(kind, os.fsencode(path), at, directory=directory))


def inotify_watches(pid: int) -> int:
    """Inotify watches a process holds, from /proc (each watch is one `inotify wd:` line)."""
    total = 0
    fdinfo = Path(f"/proc/{pid}/fdinfo")
    try:
        entries = list(fdinfo.iterdir())
    except OSError:
        return 0
    for entry in entries:
        try:
            text = entry.read_text()
        except OSError:
            continue
        total += text.count("inotify wd:")
    return total
