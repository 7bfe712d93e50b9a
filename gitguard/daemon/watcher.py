"""Event sources for the daemon: watchdog's observer over the workspace, or a script.

The watcher is a producer only: the observer's dispatch thread turns filesystem events
into `Raw` items on a queue and never touches git (pygit2 objects belong to the one
worker that drains the queue). Only watchdog's public API is used (`InotifyObserver`,
`schedule` with an `event_filter`, a `FileSystemEventHandler`, `EventsLostEvent`): a
watchdog release that rewrites its internals (7.1.1 did) must not make the daemon deaf.
The filter asks the kernel for content and name changes only (create, modify,
close-write, attrib, delete, move): no open, close-nowrite or access events; with
those an idle 100k-file repository overflowed the inotify queue continuously.

Ordering is what makes the daemon exact, and it is why the whole workspace is ONE
recursive schedule. Every write a client made before it sent a request has already
queued its inotify event in the kernel; one watch group carries its events, in kernel
order, through one emitter to one dispatch thread. So before a snapshot the worker
plants a *barrier*: it creates a file named by a new token in the store's barrier
directory (inside the workspace, so watched), or, in a linked worktree whose store lies
outside the workspace, sets a unique access time on the `.git` file; when that event
comes out of the queue, every earlier change has come out before it. Several
schedules (one per directory that is not ignored) would spare the ignored trees their
watches, but each schedule has its own emitter thread and events of different schedules
overtake each other: a barrier would then prove nothing. The price, measured in
`make bench` (watcher rows): `.git` and ignored directories are watched too (their
events are dropped on the dispatch thread, before the queue), and a new ignored tree
(`npm install`) costs watchdog CPU while it is written. A barrier is a created file, not
a rename: watchdog holds a moved-from event up to 0.5 s to pair it.

An overflow comes out in order too (`on_events_lost`, after watchdog rebuilt its
watches); the worker then rescans. A directory the kernel refused a watch for (the
inotify watch limit) is found by asking the kernel which inodes this process watches
(`/proc/self/fdinfo`), and is scanned at call boundaries instead. At start, a tree over
the limit cannot be scheduled at all: the daemon then does not run (`WatchLimit`).
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import queue
import re
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from watchdog import events as wd_events
from watchdog.observers.inotify import InotifyObserver

from gitguard.calls.attribution import EventKind
from gitguard.errors import WatcherUnusable

RawKind = EventKind | Literal["overflow", "barrier"]
BARRIER_PREFIX = ".gg-barrier-"
BARRIER_BATCH = 64          # barrier files removed together (Barriers._create)


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
    in: what happens below them is dropped before the worker's queue (`IgnoredTrees`). No
    snapshot holds what is in them (`tree_build`, the scan); the event of such a directory
    appearing or going still reaches the worker.

    Asked from the observer's dispatch thread; any other thread that asks opens its own
    repository (pygit2 objects belong to one thread). Tracked directories are read from
    the index once per thread, only when an ignored directory is met; a rule change
    makes the daemon rescan and ask again."""

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
    """Which absolute event paths matter: inside the workspace, outside `.git` and the
    store (our own object and journal writes come back as events on every call)."""

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
        # Outside the tree: a linked worktree's `.git` file carries the token; a worktree
        # with no `.git` at all (GIT_DIR elsewhere: a dotfiles setup) its root directory.
        self.gitfile = root / ".git" if (root / ".git").is_file() else root
        # The one directory watched inside `.git` or the store: nothing else is written there.
        self.dir = store / "barrier"
        self.file_prefix = os.fsencode(self.dir / BARRIER_PREFIX)
        self.current: Path | None = None    # the barrier file of the last token
        self.planted: list[Path] = []       # barrier files not removed yet

    def plant(self, token: int) -> None:
        if self.in_tree:
            self._create(self.dir / f"{BARRIER_PREFIX}{token}")
            return
        # A linked worktree: the store is outside the watch. The access time of the
        # `.git` file carries the token (ns, in the future so relatime never moves it).
        mtime = os.stat(self.gitfile).st_mtime_ns
        os.utime(self.gitfile, ns=(_atime_for(token), mtime), follow_symlinks=False)

    def _create(self, target: Path) -> None:
        """A new file named by the token: one create event (mknod opens nothing). Not a
        rename: watchdog holds a moved-from event up to 0.5 s while it waits for its pair,
        and a barrier behind it would wait as long. The files are removed in batches, not
        one per barrier: watchdog's reader waits up to 1 ms for more of a burst (a delete
        then a create), which doubled a barrier's round trip (make bench, watcher rows)."""
        if len(self.planted) >= BARRIER_BATCH:
            for old in self.planted:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(old)
            self.planted = []
        try:
            os.mknod(target, 0o600 | stat.S_IFREG)
        except FileExistsError:
            os.utime(target)                # the same token again: an attrib event
        self.current = target
        self.planted.append(target)

    def clear(self) -> None:
        """At start: the barrier files a killed daemon could not remove."""
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(self.dir):
                if name.startswith(BARRIER_PREFIX):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.dir / name)

    def remove(self) -> None:
        """At stop: leave no barrier file behind."""
        for old in self.planted:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(old)
        self.planted, self.current = [], None

    def token_of(self, path: bytes, directory: bool) -> int | None:
        if self.in_tree:
            if path.startswith(self.file_prefix) and not directory:
                tail = path[len(self.file_prefix):]
                return int(tail) if tail.isdigit() else None
            return None
        if path == os.fsencode(self.gitfile).rstrip(b"/"):
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
    """One recursive watchdog schedule over the workspace (see the module docstring)."""

    def __init__(self, root: Path, store: Path, sink: queue.SimpleQueue[Any],
                 skip_names: tuple[bytes, ...] = (),
                 ignored: Callable[[bytes], bool] | None = None) -> None:
        self.root = root
        self.sink = sink
        self.filter = PathFilter(root, skip_names)
        self.barriers = Barriers(root, store)
        self.drop = IgnoredTrees(self.filter.prefix, ignored or (lambda _directory: False))
        self.audit = WatchAudit(self.filter.prefix)
        self._observer: Any = None

    def start(self) -> None:
        """Schedule the workspace and start the observer; every watch exists on return.
        Raises `WatcherUnusable` when the kernel refuses the tree (the watch limit)."""
        if self.barriers.in_tree:
            self.barriers.dir.mkdir(mode=0o700, exist_ok=True)
            self.barriers.clear()
        observer = InotifyObserver(generate_full_events=True)
        try:
            observer.schedule(_Handler(self), str(self.root), recursive=True,
                              event_filter=list(_EVENT_TYPES))
            observer.start()
        except OSError as exc:
            _halt(observer)
            if exc.errno in WATCH_LIMIT_ERRNOS:
                raise WatcherUnusable(
                    f"the inotify watch limit is reached: the kernel refused watches for "
                    f"{self.root} (errno {errno.errorcode.get(exc.errno or 0, exc.errno)})",
                    "raise fs.inotify.max_user_watches (sysctl), or free watches other "
                    "programs hold; until then the hooks work in-process") from exc
            raise
        self._observer = observer

    def stop(self) -> None:
        observer, self._observer = self._observer, None
        if observer is not None:
            _halt(observer)
        self.barriers.remove()

    def plant_barrier(self, token: int) -> None:
        self.barriers.plant(token)

    def rewatch(self) -> None:
        """Ignore rules changed: which trees are dropped is asked again (every directory
        is watched; what changed meanwhile in a tree no longer ignored, the rescan finds)."""
        self.drop.refresh()

    def watch_count(self) -> int:
        return inotify_watches(os.getpid())

    def unwatched(self) -> dict[bytes, str]:
        return self.audit.unwatched()

    def dispatch(self, event: Any) -> None:
        """Runs on the observer's dispatch thread, in kernel order: classify, drop what
        no snapshot holds, enqueue."""
        if event.is_synthetic:
            return      # a moved or moved-in directory is one event for all below it
        now = time.time()
        directory = bool(event.is_directory)
        src = os.fsencode(event.src_path)
        if isinstance(event, _BARRIER_EVENTS):
            token = self.barriers.token_of(src, directory)
            if token is not None:
                self.sink.put(Raw("barrier", token=token, at=now))
                return
        if isinstance(event, wd_events.FileSystemMovedEvent):
            dest = os.fsencode(event.dest_path)
            if src:
                self._put("move_from", src, now, directory)
            if dest:
                self._put("move_to", dest, now, directory)
            return
        kind = _KINDS.get(type(event))
        if kind is not None:
            self._put(kind, src, now, directory)

    def _put(self, kind: EventKind, path: bytes, at: float, directory: bool) -> None:
        if path.endswith(b"/.git") and kind in ("create", "move_to") \
                and path.startswith(self.filter.prefix):
            # A repository or linked worktree appeared in a directory (`git worktree add
            # .claude/worktrees/x`): from now on what happens in it is its own.
            self.drop.forget(path[len(self.filter.prefix):-len(b"/.git")])
        rel = self.filter.relative(path)
        if rel is None or self.drop.below(rel):
            return
        if directory and kind in ("create", "move_to"):
            self.audit.appeared(rel)
        self.sink.put(Raw(kind, rel, at, directory=directory))

    def overflowed(self) -> None:
        """Events were lost; watchdog has rebuilt its watches (which may now differ)."""
        self.audit.recheck_all()
        self.sink.put(Raw("overflow", at=time.time()))


def _halt(observer: Any) -> None:
    """Stop an observer whether or not it started (its inotify reader starts at schedule)."""
    observer.stop()
    if observer.is_alive():
        observer.join(timeout=10)


# What the daemon asks watchdog for (the filter also sets the kernel's event mask), and
# the kind each event is on the worker's queue (moves become two items; losses one).
_KINDS: dict[type[wd_events.FileSystemEvent], EventKind] = {
    wd_events.FileCreatedEvent: "create", wd_events.DirCreatedEvent: "create",
    wd_events.FileModifiedEvent: "write", wd_events.FileClosedEvent: "close",
    wd_events.FileAttribEvent: "attrib", wd_events.FileDeletedEvent: "delete",
    wd_events.DirDeletedEvent: "delete"}
_EVENT_TYPES = (*_KINDS, wd_events.FileMovedEvent, wd_events.DirMovedEvent,
                wd_events.DirAttribEvent, wd_events.EventsLostEvent)
_BARRIER_EVENTS = (wd_events.FileCreatedEvent, wd_events.FileAttribEvent,
                   wd_events.DirAttribEvent)


class _Handler(wd_events.FileSystemEventHandler):
    """watchdog's public handler class: every event goes to the source, an overflow too."""

    def __init__(self, source: WatchdogSource) -> None:
        super().__init__()
        self.source = source

    def dispatch(self, event: Any) -> None:
        if isinstance(event, wd_events.EventsLostEvent):
            self.source.overflowed()
        else:
            self.source.dispatch(event)


class IgnoredTrees:
    """What happens below an ignored directory is dropped on the dispatch thread: no
    snapshot holds it, and the worker's queue stays free for what does (an `npm install`
    writes tens of thousands of files). The ignored directory's own event is kept: the
    worker decides about it, as about any path. Which directories are ignored is asked
    once per directory (git's rules, through `IgnoredDirs`) and remembered until the
    rules change.

    A directory holding a `.git` (a nested repository, or a linked worktree nested in
    this one: Claude Code's `.claude/worktrees/NAME`) is dropped the same way: it is its
    own workspace, which no snapshot of this one holds (`tree_build`, git status) and
    whose changes are no call's or user's here."""

    def __init__(self, prefix: bytes, ignored: Callable[[bytes], bool]) -> None:
        self.prefix = prefix
        self.ignored = ignored
        self.memo: dict[bytes, bool] = {}

    def refresh(self) -> None:
        refresh = getattr(self.ignored, "refresh", None)
        if refresh is not None:
            refresh()
        self.memo = {}

    def forget(self, directory: bytes) -> None:
        """`directory` changed kind (a `.git` appeared in it): ask about it again."""
        self.memo.pop(directory, None)

    def below(self, rel: bytes) -> bool:
        """Whether `rel` lies inside an ignored directory or a nested repository (strictly
        below it)."""
        end = rel.find(b"/")
        while end != -1:
            directory = rel[:end]
            known = self.memo.get(directory)
            if known is None:
                if len(self.memo) > 100_000:
                    self.memo = {}
                full = self.prefix + directory
                known = self.memo[directory] = (bool(self.ignored(full))
                                                or os.path.lexists(full + b"/.git"))
            if known:
                return True
            end = rel.find(b"/", end + 1)
        return False


class WatchAudit:
    """Which directories have no inotify watch: the kernel's own list of this process's
    watches (`/proc/self/fdinfo`, an `ino:` per watch) against the directories that
    appeared. watchdog skips a directory it cannot watch (the watch limit) without a
    word a program can read; this asks the kernel instead. Read only when directories
    appeared since the last look (a new tree, or every directory after an overflow)."""

    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix
        self.lock = threading.Lock()
        self.pending: list[bytes] = []
        self.failed: dict[bytes, str] = {}
        self.outer: dict[bytes, str] = {}
        self.everything = False

    def appeared(self, rel: bytes) -> None:
        with self.lock:
            self.pending.append(rel)

    def recheck_all(self) -> None:
        with self.lock:
            self.everything = True

    def unwatched(self) -> dict[bytes, str]:
        """The directories without a watch, outermost only (a scan of one covers those
        below). Called by the worker after a barrier, so every appearance before it is in."""
        with self.lock:
            pending, self.pending = self.pending, []
            everything, self.everything = self.everything, False
        if everything:
            pending, self.failed = _directories(self.prefix), {}
        failed = {rel: why for rel, why in self.failed.items()
                  if os.path.isdir(self.prefix + rel)}
        if pending:
            watched = watched_inodes(os.getpid())
            for rel in pending:
                try:
                    found = os.lstat(self.prefix + rel)
                except OSError:
                    continue        # gone again: nothing there to miss
                if stat.S_ISDIR(found.st_mode) and (found.st_dev, found.st_ino) not in watched:
                    failed[rel] = "no inotify watch (the inotify watch limit is reached)"
        if failed != self.failed or everything or pending:
            self.failed = failed
            self.outer = {d: why for d, why in failed.items()
                          if not any(a in failed for a in _ancestors(d))}
        return self.outer


def _directories(prefix: bytes) -> list[bytes]:
    """Every directory below the workspace root (workspace-relative), `.git` left out."""
    found: list[bytes] = []
    for base, dirnames, _ in os.walk(prefix.rstrip(b"/")):
        dirnames[:] = [d for d in dirnames if d != b".git"]
        found.extend(base[len(prefix):] + b"/" + d if len(base) >= len(prefix) else d
                     for d in dirnames)
    return found


def watched_inodes(pid: int) -> set[tuple[int, int]]:
    """(st_dev, st_ino) of every inotify watch the process holds, from /proc."""
    found: set[tuple[int, int]] = set()
    fdinfo = Path(f"/proc/{pid}/fdinfo")
    try:
        entries = list(fdinfo.iterdir())
    except OSError:
        return found
    for entry in entries:
        try:
            text = entry.read_text()
        except OSError:
            continue
        for ino, sdev in _WATCH_LINE.findall(text):
            # The kernel's dev_t is major << 20 | minor; stat() encodes it another way.
            dev = int(sdev, 16)
            found.add((os.makedev(dev >> 20, dev & 0xFFFFF), int(ino, 16)))
    return found


_WATCH_LINE = re.compile(r"^inotify wd:\S+ ino:([0-9a-f]+) sdev:([0-9a-f]+)", re.MULTILINE)


def _ancestors(path: bytes) -> list[bytes]:
    parts = path.split(b"/")
    return [b"/".join(parts[:i]) for i in range(1, len(parts))]


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
