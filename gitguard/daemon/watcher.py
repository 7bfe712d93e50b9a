"""Event sources for the daemon: watchdog's inotify layer over the workspace, or a script.

The watcher is a producer only: its thread turns filesystem events into `Raw`
items on a queue and never touches git (pygit2 objects belong to the one worker
that drains the queue). The kernel is asked for content and name changes only
(create, modify, close-write, attrib, delete, move): no open, close-nowrite or
access events; with watchdog's defaults an idle 100k-file repository overflowed
the inotify queue continuously.

We use watchdog below its observer: its inotify reader thread (`InotifyFD`) and
its recursive watch bookkeeping (`InotifyWatchGroup`: watches for new and moved
directories, paths of moved watches), with our own sink in place of the observer's
move grouper, emitter and dispatcher threads. Two reasons, both measured: events
arrive in kernel order on one thread, the overflow marker included (watchdog's
observer reports an overflow only as a log warning, from another thread, ahead of
events the kernel queued before it); and an event costs about 65 us of CPU instead
of 158 us through the observer's three hand-offs (10,000 writes, 2 cores).

Ordering is what makes the daemon exact. Every write a client made before it
sent a request has already queued its inotify event in the kernel, and one
recursive watch delivers events in kernel order through one FIFO. So before a
snapshot the worker plants a *barrier*: it renames the store's one barrier file to a
new unique name (inside the workspace, so watched), or, in a linked worktree whose store
lies outside the workspace, sets a unique access time on the `.git` file; when
that event comes out of the queue, every earlier change has come out before it.
An overflow comes out in order too; the worker then rescans.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import itertools
import os
import queue
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from gitguard.calls.attribution import EventKind

RawKind = EventKind | Literal["overflow", "barrier"]
BARRIER_PREFIX = ".gg-barrier-"


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

    def unwatched(self) -> dict[bytes, str]: ...

    def rewatch(self) -> None: ...


WATCH_LIMIT_ERRNOS = frozenset({errno.ENOSPC, errno.EMFILE})


class IgnoredDirs:
    """Which directories git ignores, or are named in skip_dirs, and hold no tracked file
    in: never watched (an ignored `node_modules` of 20k files cost ~800 watches and ~4 s
    of CPU to watch). No snapshot holds what is in them (`tree_build`, the scan); the
    event of such a directory appearing or going still comes from its parent's watch.

    Asked from the thread that starts the watch and from watchdog's reader thread (new
    directories): each thread opens its own repository (pygit2 objects belong to one
    thread). Tracked directories are read from the index once per thread, only when an
    ignored directory is met; a directory git ignores is not snapshotted either, and a
    rule change makes the daemon rescan."""

    def __init__(self, root: Path, repository: Path, skip_dirs: Iterable[str] = ()) -> None:
        self.prefix = os.fsencode(root).rstrip(b"/") + b"/"
        self.repository = repository
        self.skip_dirs = frozenset(skip_dirs)
        self.local = threading.local()
        self.generation = 0         # bumped when ignore rules change: tracked dirs reread

    def refresh(self) -> None:
        self.generation += 1

    def __call__(self, directory: bytes) -> bool:
        if not directory.startswith(self.prefix):
            return False
        try:
            rel = directory[len(self.prefix):].decode()
        except UnicodeDecodeError:
            return False
        repo = self._repo()
        if repo is None:
            return False
        if rel.rpartition("/")[2] not in self.skip_dirs and not repo.path_is_ignored(rel + "/"):
            return False
        return rel not in self._tracked_dirs(repo)

    def _repo(self) -> Any:
        if not hasattr(self.local, "repo"):
            import pygit2

            try:
                self.local.repo = pygit2.Repository(str(self.repository))
            except pygit2.GitError:
                self.local.repo = None
        return self.local.repo

    def _tracked_dirs(self, repo: Any) -> set[str]:
        if getattr(self.local, "generation", None) != self.generation:
            self.local.generation = self.generation
            repo.index.read(False)
            self.local.__dict__.pop("tracked", None)
        if not hasattr(self.local, "tracked"):
            dirs: set[str] = set()
            for entry in repo.index:
                parts = entry.path.split("/")[:-1]
                dirs.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
            self.local.tracked = dirs
        tracked: set[str] = self.local.tracked
        return tracked


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

    def unwatched(self, directory: bytes) -> bool:
        """Directories never watched: `.git` (any depth) and the store. Our own object and
        journal writes would otherwise come back as events on every call."""
        if not directory.startswith(self.prefix):
            return False
        parts = directory[len(self.prefix):].split(b"/")
        return parts[0] in self.skip_names or b".git" in parts


class Barriers:
    """Plants and recognises barrier events for a workspace."""

    def __init__(self, root: Path, store: Path) -> None:
        self.root = root
        self.store = store
        self.in_tree = store.resolve().is_relative_to(root.resolve())
        self.gitfile = root / ".git"
        # The one directory watched inside `.git` or the store: nothing else is written there.
        self.dir = store / "barrier"
        self.file_prefix = os.fsencode(self.dir / BARRIER_PREFIX)
        self.current: Path | None = None    # the one barrier file, named by the last token

    def plant(self, token: int) -> None:
        if self.in_tree:
            self._rename_to(self.dir / f"{BARRIER_PREFIX}{token}")
            return
        # A linked worktree: the store is outside the watch. The access time of the
        # `.git` file carries the token (ns, in the future so relatime never moves it).
        mtime = os.stat(self.gitfile).st_mtime_ns
        os.utime(self.gitfile, ns=(_atime_for(token), mtime), follow_symlinks=False)

    def _rename_to(self, target: Path) -> None:
        """One file renamed to each new token's name: the moved-to event carries the token
        in its name, as a created file's would, but no inode is made and none removed
        (two per tool call before: create then unlink, each a directory update)."""
        if self.current is None:
            self.current = self._leftover()
        if self.current == target:
            os.utime(target)                # an attrib event of the same name
            return
        if self.current is not None:
            try:
                os.rename(self.current, target)
                self.current = target
                return
            except FileNotFoundError:
                pass                        # removed behind our back: make another
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        self.current = target

    def _leftover(self) -> Path | None:
        """A barrier file an earlier daemon left (killed, it could not remove it)."""
        try:
            names = sorted(n for n in os.listdir(self.dir) if n.startswith(BARRIER_PREFIX))
        except FileNotFoundError:
            return None
        return self.dir / names[0] if names else None

    def remove(self) -> None:
        """At stop: leave no barrier file behind."""
        if self.current is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.current)
            self.current = None

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


class WatchdogSource:
    """A recursive inotify watch on the workspace through watchdog's inotify layer."""

    def __init__(self, root: Path, store: Path, sink: queue.SimpleQueue[Any],
                 skip_names: tuple[bytes, ...] = (),
                 ignored: Callable[[bytes], bool] | None = None) -> None:
        self.root = root
        self.sink = sink
        self.filter = PathFilter(root, skip_names)
        self.barriers = Barriers(root, store)
        self.ignored = ignored or (lambda _directory: False)
        self._fd: Any = None
        self._group: Any = None
        # Directories the kernel refused a watch for (the inotify watch limit): workspace-
        # relative path -> why. Written by whichever thread adds watches, read by the worker.
        self._failed: dict[bytes, str] = {}
        self._outer: dict[bytes, str] | None = {}
        self._failed_lock = threading.Lock()

    def watch_failed(self, directory: bytes, exc: OSError) -> None:
        """A directory stays unwatched: the worker scans it at every call boundary."""
        rel = self.filter.relative(directory)
        if rel is None:
            return
        with self._failed_lock:
            self._failed[rel] = f"inotify_add_watch: {exc.strerror or exc}"
            self._outer = None

    def unwatched(self) -> dict[bytes, str]:
        """The unwatched directories, outermost only (a scan of one covers those below)."""
        with self._failed_lock:
            if self._outer is None:
                failed = self._failed
                self._outer = {d: why for d, why in failed.items()
                               if not any(a in failed for a in _ancestors(d))}
            return self._outer

    def start(self) -> None:
        from watchdog.observers.inotify_c import InotifyConstants as C
        from watchdog.observers.inotify_c import InotifyFD, Mask

        # watchdog's recursive registration races a new directory's own create event and
        # then re-adds the same callback for a watch it holds, with a RuntimeWarning that
        # says it overwrote it with itself: nothing is lost, so the daemon log stays quiet.
        warnings.filterwarnings("ignore", r"Callback with id .* already exists",
                                RuntimeWarning, r"watchdog\.observers\.inotify")
        mask = Mask(C.IN_CREATE | C.IN_MODIFY | C.IN_CLOSE_WRITE | C.IN_ATTRIB | C.IN_DELETE
                    | C.IN_MOVED_FROM | C.IN_MOVED_TO | C.IN_DELETE_SELF)
        if self.barriers.in_tree:
            self.barriers.dir.mkdir(mode=0o700, exist_ok=True)
        fd = InotifyFD()
        fd.start()
        try:
            self._group = _group_class()(fd, os.fsencode(self.root), event_mask=mask,
                                         is_recursive=True, source=self)
        except BaseException:
            fd.stop()
            fd.join()
            raise
        self._fd = fd

    def stop(self) -> None:
        if self._group is not None:
            self._group.deactivate()
            self._group = None
        if self._fd is not None:
            self._fd.stop()
            self._fd.join(timeout=10)
            self._fd = None
        self.barriers.remove()

    def plant_barrier(self, token: int) -> None:
        self.barriers.plant(token)

    def rewatch(self) -> None:
        """Ignore rules changed: watch the directories no longer ignored (those already
        watched keep their watch; the walk runs again, as after an overflow)."""
        group = self._group
        if group is None:
            return
        refresh = getattr(self.ignored, "refresh", None)
        if refresh is not None:
            refresh()
        with group._lock:
            group._add_all_callbacks(group.path)

    def watch_count(self) -> int:
        return inotify_watches(os.getpid())

    def overflowed(self) -> None:
        self.sink.put(Raw("overflow", at=time.time()))

    def dispatch(self, event: Any, path: bytes) -> None:
        """Runs on watchdog's reader thread, in kernel order: classify, filter, enqueue."""
        now = time.time()
        directory = bool(event.is_directory)
        if event.is_create or event.is_attrib or event.is_close_write or event.is_moved_to:
            token = self.barriers.token_of(path, directory)
            if token is not None:
                self.sink.put(Raw("barrier", token=token, at=now))
                return
        if event.is_attrib and directory:
            return      # a directory's own mode or times: no file changed
        kind = _kind(event)
        if kind is None:
            return
        rel = self.filter.relative(path)
        if rel is not None:
            self.sink.put(Raw(kind, rel, now, directory=directory))


def _ancestors(path: bytes) -> list[bytes]:
    parts = path.split(b"/")
    return [b"/".join(parts[:i]) for i in range(1, len(parts))]


def _kind(event: Any) -> EventKind | None:
    if event.is_create:
        return "create"
    if event.is_modify:
        return "write"
    if event.is_close_write:
        return "close"
    if event.is_attrib:
        return "attrib"
    if event.is_delete:
        return "delete"
    if event.is_moved_from:
        return "move_from"
    if event.is_moved_to:
        return "move_to"
    return None


class _Sink:
    """Takes the place of watchdog's move grouper inside a watch group: every event goes
    straight to the source; a moved-from event is remembered by cookie so the group can
    move the watches of a renamed directory."""

    def __init__(self, source: WatchdogSource) -> None:
        self.source = source
        self.moved_from: collections.OrderedDict[int, Any] = collections.OrderedDict()

    def put_event(self, pathed: Any) -> None:
        event = pathed.ev
        if event.is_moved_from:
            self.moved_from[event.cookie] = pathed
            if len(self.moved_from) > 1024:
                self.moved_from.popitem(last=False)
        elif event.is_moved_to:
            self.moved_from.pop(event.cookie, None)
        self.source.dispatch(event, pathed.path)

    def get_queued_moved_from_event(self, cookie: int) -> Any:
        return self.moved_from.get(cookie)

    def discard_pending_events(self) -> None:
        self.moved_from.clear()

    def read_event(self) -> None:
        return None

    def close(self) -> None:
        self.moved_from.clear()


def _group_class() -> Any:
    """watchdog's recursive watch group, feeding our sink and reporting overflows in order."""
    from dataclasses import dataclass as _dataclass
    from dataclasses import field

    from watchdog.observers.inotify import InotifyWatchGroup

    @_dataclass
    class Group(InotifyWatchGroup):
        source: WatchdogSource | None = field(default=None)

        def __post_init__(self) -> None:
            assert self.source is not None
            self._move_event_grouper = _Sink(self.source)  # type: ignore[assignment]
            super().__post_init__()

        def on_queue_overflow(self) -> None:
            assert self.source is not None
            self.source.overflowed()
            super().on_queue_overflow()

        def _add_all_callbacks(self, path: bytes) -> None:
            """watchdog's recursive walk, minus `.git` and the store (plus the barrier
            directory, which lives there); also run after an overflow and for new or
            moved-in directories."""
            assert self.source is not None
            source = self.source
            unwatched = source.filter.unwatched

            def skipped(directory: bytes) -> bool:
                return unwatched(directory) or (directory != self.path
                                                and source.ignored(directory))

            if skipped(path):
                return
            self._add_callback(path)
            if path == self.path and source.barriers.in_tree:
                self._add_callback(os.fsencode(source.barriers.dir))
            if not os.path.isdir(path):
                return
            for top, dirnames, _ in os.walk(path):
                dirnames[:] = [d for d in dirnames if not skipped(os.path.join(top, d))]
                for name in dirnames:
                    full = os.path.join(top, name)
                    if not os.path.islink(full):
                        self._add_callback(full)

        def _add_callback(self, path: bytes) -> None:
            """watchdog's, except that a directory the kernel refuses a watch for (the
            watch limit: ENOSPC) is reported, not passed over in silence: the daemon
            then scans it at call boundaries and says so. A directory that vanished
            or cannot be read is passed over as before; the root's failure is raised."""
            assert self.source is not None
            try:
                wd = self._inotify_fd.add_callback(path, self.event_mask, self._callback,
                                                   self._id)
            except OSError as exc:
                if path == self.path:
                    raise
                if exc.errno in WATCH_LIMIT_ERRNOS:
                    self.source.watch_failed(path, exc)
                return
            self._active_callbacks_by_path[path] = wd
            self._active_callbacks_by_watch[wd] = path

    return Group


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

    def unwatched(self) -> dict[bytes, str]:
        return {}

    def rewatch(self) -> None:
        return None

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
