"""The daemon's worker: the one thread that owns the pygit2 repository.

It drains the watcher's queue into a dirty set and the attribution `Tracker`,
builds each snapshot tree from the previous tree and the dirty paths
(`tree_build`), and writes attribution records. A full scan (git status against
the stat index, which it also brings up to date) runs only at start, after an
overflow, when ignore or attribute rules change, and on request (before a
restore).

`daemon.state` remembers the last tree whose changes are all recorded: at the next
start, whatever differs from it and from the newest checkpoint changed while nobody
watched and is `unknown`.

Known limits: changes to `.git/info/exclude` or a global excludes file are not
watched (`gitguard daemon` rescans on request); ignored directories with no tracked
file are not watched at all (their events would be dropped here anyway); directories
the kernel refuses a watch for (the inotify watch limit) are scanned at every call
boundary instead, so a change there is seen late (at the next boundary) and owned by
whatever windows are open then; a call window stays open until the call ends or the
ledger says it stopped running.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import itertools
import json
import logging
import os
import queue
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pygit2

from gitguard.calls import attribution_log, background
from gitguard.calls.attribution import (
    USER,
    FsEvent,
    Tracker,
    Verdict,
    expectations,
    is_declared_only,
    is_shell,
)
from gitguard.calls.delegation import is_delegation
from gitguard.daemon.watcher import Raw, Source
from gitguard.errors import StoreError, WatcherUnusable
from gitguard.git import pack_writer
from gitguard.git.objects import TreeResult, as_tree, blob_at
from gitguard.git.tree_build import (
    IncrementalTree,
    NeedsFullScan,
    converting_attributes,
    needs_git_filters,
)
from gitguard.ipc.control import UNWATCHED_FILE
from gitguard.ledger import journal
from gitguard.ledger.replay import never_ran
from gitguard.models import ToolLedgerEntry
from gitguard.snapshot import checkpoints
from gitguard.snapshot.daemon_snapshotter import diff_trees
from gitguard.snapshot.snapshotter import Snapshotter
from gitguard.storage.store import Store
from gitguard.workspace import NON_GIT_STORE, safe_relpath

RULE_FILES = frozenset({b".gitignore", b".gitattributes"})
REPLANT_S = 0.5             # a silent queue this long: plant another barrier
# Nothing at all out of the queue this long after a barrier was planted: the watcher is
# deaf (a barrier round trip takes well under a millisecond when it hears). A daemon that
# cannot hear must never be a slow daemon: at start it does not serve, later it stops.
# Later is given longer: a flood the machine is slow to read (an overflow rebuilding
# every watch under load) is not deafness, and a daemon that stops costs every hook.
START_DEAF_S = 2.0
DEAF_S = 10.0


@dataclass
class Job:
    """Work for the worker thread from another thread (a request answers its own client)."""

    fn: Callable[[], Any]


Item = Raw | Job


class Engine:
    def __init__(self, store: Store, snap: Snapshotter, source: Source,
                 sink: queue.SimpleQueue[Item], log: logging.Logger,
                 barrier_timeout: float = 30.0, deaf_after: float = DEAF_S) -> None:
        self.store = store
        self.ws = store.ws
        self.snap = snap              # plain Snapshotter: full scans through git
        self.repo = snap.repo
        self.source = source
        self.sink = sink
        self.log = log
        self.barrier_timeout = barrier_timeout
        self.deaf_after = deaf_after
        self.deaf: str | None = None            # why the watcher cannot be trusted to hear
        self.tracker = Tracker()
        self.dirty: set[bytes] = set()
        self.tree: IncrementalTree | None = None
        self.recorded_tree: str | None = None   # verdicts are written up to this tree
        self.git_mode: str | None = None        # why snapshots go through git, if they must
        self.rescan_reason: str | None = "start"
        self.lost = False                       # events were lost: rescan finds `unknown`s
        self.suspended_until = 0.0              # a restore runs until then (monotonic)
        self.deferred: collections.deque[Job] = collections.deque()
        self.tokens = itertools.count(1)
        self.ignored_memo: dict[bytes, bool] = {}
        self.last_event = 0.0
        self.unsynced_since: float | None = None  # attribution rows not fsynced since then
        self.state_since: float | None = None     # daemon.state behind recorded_tree since
        self.counts: collections.Counter[str] = collections.Counter()
        self.state_path = store.root / "daemon.state"
        self.reported_unwatched: list[bytes] = []
        self.held: set[str] = set()     # changed paths whose verdict an open window owes
        self.rules_changed = False      # .gitignore/.gitattributes changed since the scan
        self.fanouts = pack_writer.Fanouts(self.repo, store)    # at start and in idle time
        if not self.ws.is_git and self.repo.workdir is None:
            self.repo.workdir = str(self.ws.root)   # ignore rules need a work tree

    # --- start and stop ---------------------------------------------------------------
    def start(self) -> None:
        """Watch first, then scan: a change made during the scan is seen either way."""
        with contextlib.suppress(FileNotFoundError):
            (self.store.root / UNWATCHED_FILE).unlink()   # an earlier daemon's
        self.source.start()
        if not self.sync(START_DEAF_S):
            self.source.stop()
            raise WatcherUnusable(
                f"the watcher cannot be trusted: {self.deaf or self.rescan_reason}",
                "the hooks work in-process meanwhile; daemon.log says more, and "
                "`gitguard daemon start` tries again")
        with self.store.writing():
            baselines = self._baselines()
            self.lost = bool(baselines)
            # Windows first: a change the start finds that an open call declared is its.
            self._reopen_windows()
            self._full_scan("start", baselines)
            self._unwatched()       # said at once, not at the first call
        self.fanouts.check()
        # What start built lives as long as the daemon: out of the cyclic GC's reach, a
        # full (gen-2) pass, ~1 per 5 snapshots of 100 files, no longer walks it
        # (0.7-7.7 ms CPU per such snapshot measured at 100k files).
        gc.collect()
        gc.freeze()

    def stop(self) -> None:
        """Record everything seen, leave the stat index matching the workspace."""
        try:
            with self.store.writing():
                self.tree_now()
                self.record(self.tracker.flush_user())
                self.resync()
                self.sync_records()
        finally:
            self.source.stop()

    # --- the event queue ----------------------------------------------------------------
    def sync(self, deaf_after: float | None = None) -> bool:
        """Plant a barrier and absorb every event queued before it; False when it did not
        come (the next tree is a full scan, its changes unknown).

        A barrier planted while the kernel queue is full is dropped (the kernel queues an
        overflow marker instead), so after an overflow, and whenever the queue has been
        silent for a while, another barrier is planted; any of them coming out will do.
        Events coming out slowly (a flood ahead of the barrier) is a busy watcher, given
        `barrier_timeout`; nothing coming out for `deaf_after` is a deaf one (`deaf`)."""
        first = self._plant()
        if first is None:
            return False
        deaf_after = self.deaf_after if deaf_after is None else deaf_after
        now = time.monotonic()
        deadline, deaf_at, replant = (now + self.barrier_timeout, now + deaf_after,
                                      now + REPLANT_S)
        while True:
            now = time.monotonic()
            try:
                item = self.sink.get(timeout=max(0.0, min(deadline, deaf_at, replant) - now))
            except queue.Empty:
                now = time.monotonic()
                if now >= deaf_at:
                    self.deaf = (f"no event came out of the watcher within "
                                 f"{deaf_after:.0f} s of a barrier")
                    self._give_up("the barrier event did not arrive (the watcher is deaf)")
                    return False
                if now >= deadline:
                    self._give_up("the barrier event did not arrive")
                    return False
                if self._plant() is None:
                    return False
                replant = time.monotonic() + REPLANT_S
                continue
            if isinstance(item, Job):
                self.deferred.append(item)
                continue
            deaf_at = time.monotonic() + deaf_after     # it hears
            if item.kind == "barrier":
                if item.token >= first:
                    return True
            else:
                self.absorb(item)
                if item.kind == "overflow" and self._plant() is None:
                    return False

    def _plant(self) -> int | None:
        token = next(self.tokens)
        try:
            self.source.plant_barrier(token)
        except OSError as exc:
            self._give_up(f"cannot plant a barrier: {exc}")
            return None
        return token

    def drain(self) -> None:
        """Absorb whatever is queued now, without waiting (idle time)."""
        while True:
            try:
                item = self.sink.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, Job):
                self.deferred.append(item)
            elif item.kind != "barrier":
                self.absorb(item)

    def absorb(self, raw: Raw) -> None:
        self.counts["events"] += 1
        self.last_event = time.monotonic()
        if raw.kind == "overflow":
            self.log.warning("the kernel event queue overflowed: rescanning, changes of this "
                             "interval are unknown")
            self.rescan_reason, self.lost = "overflow", True
            return
        if raw.kind == "barrier":
            return
        name = raw.path.rsplit(b"/", 1)[-1]
        if name in RULE_FILES:
            self.rescan_reason = self.rescan_reason or f"{os.fsdecode(raw.path)} changed"
            self.rules_changed = True
        if self._is_ignored(raw.path):
            return
        self.dirty.add(raw.path)
        if time.monotonic() < self.suspended_until:
            return      # gitguard's own writes (a restore): in the tree, nobody's change
        # A new directory's files come as events of their own; a directory that went
        # (deleted, moved away) is one event for everything below it.
        if not raw.directory or raw.kind in ("delete", "move_from"):
            self.tracker.observe(FsEvent(os.fsdecode(raw.path), raw.kind, raw.at))

    def _is_ignored(self, path: bytes) -> bool:
        """Untracked and ignored by git: neither snapshotted nor attributed."""
        known = self.ignored_memo.get(path)
        if known is not None:
            return known
        # Tracked (in the last tree) first: still ours to snapshot whatever the rules say,
        # and a lookup in the parsed trees costs a tenth of libgit2's ignore check.
        if self.tree is not None and self.tree.tracked(path):
            ignored = False
        else:
            try:
                ignored = bool(self.repo.path_is_ignored(path.decode()))
            except UnicodeDecodeError:
                ignored = False
        if len(self.ignored_memo) > 100_000:
            self.ignored_memo.clear()
        self.ignored_memo[path] = ignored
        return ignored

    def _give_up(self, why: str) -> None:
        """Events may be missing or late: a rescan decides, and its changes are unknown."""
        self.log.warning("%s: falling back to a full scan", why)
        self.rescan_reason, self.lost = why, True

    # --- snapshots ----------------------------------------------------------------------
    def tree_now(self) -> TreeResult:
        """The workspace tree now. Callers hold the store lock (the stat index may change).

        Directories the kernel would not watch (the inotify watch limit) are scanned here,
        at every call boundary: what changed in them since the last tree is fed to the
        tracker as seen now, so a call ending owns what it wrote there (or shares it)."""
        self.sync()
        unwatched = self._unwatched()
        before = self.tree.tree if self.tree is not None else None
        self.dirty.update(unwatched)
        result = self._advance()
        if unwatched and before is not None and before != result.tree:
            self._observe_unwatched(before, result.tree, unwatched)
        return result

    def _advance(self) -> TreeResult:
        if self.rescan_reason is not None or self.tree is None or self.git_mode is not None:
            return self._full_scan(self.rescan_reason or self.git_mode or "first tree")
        try:
            result = self.tree.advance(self.dirty)
        except NeedsFullScan as exc:
            return self._full_scan(str(exc))
        self.counts["incremental"] += 1
        self.dirty.clear()
        return result

    def unwatched_now(self) -> list[bytes]:
        """The directories without a watch, after every event queued so far is absorbed
        (a directory made since the last call included)."""
        self.sync()
        return self._unwatched()

    def _unwatched(self) -> list[bytes]:
        """The directories without a watch that hold what we snapshot; said once in the log
        and in `daemon.unwatched` (which `daemon status` and `status` read) when they change."""
        found = self.source.unwatched()
        if not found:
            return []
        dirs = sorted(d for d in found if not self._is_ignored(d + b"/"))
        if dirs != self.reported_unwatched:
            self.reported_unwatched = dirs
            why = found[dirs[0]] if dirs else ""
            names = [os.fsdecode(d) for d in dirs]
            self.log.warning(
                "%d director%s not watched (%s; the inotify watch limit, "
                "fs.inotify.max_user_watches, is reached): their changes are found by a "
                "scan at each call's start and end. First: %s", len(names),
                "y is" if len(names) == 1 else "ies are", why, ", ".join(names[:5]))
            self._write_unwatched(names, why)
        return dirs

    def _observe_unwatched(self, before: str, after: str, dirs: list[bytes]) -> None:
        now = time.time()
        tops = [os.fsdecode(d) + "/" for d in dirs]
        for change in diff_trees(self.repo, before, after):
            if any(change.path.startswith(top) for top in tops):
                self.counts["unwatched_changes"] += 1
                self.tracker.observe(FsEvent(change.path, "write", now))
                self.tracker.observe(FsEvent(change.path, "close", now))

    def _write_unwatched(self, names: list[str], why: str) -> None:
        path = self.store.root / UNWATCHED_FILE
        tmp = path.with_name(f".{path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps({"count": len(names), "why": why, "first": names[:20]}))
        os.replace(tmp, path)

    def rescan(self, why: str) -> TreeResult:
        with self.store.writing():
            self.sync()
            return self._full_scan(why)

    def _full_scan(self, why: str, baselines: list[str] | None = None) -> TreeResult:
        # When events were lost, everything not yet recorded is in doubt; at start, what
        # changed since every tree we know of (ours, and the newest checkpoint's).
        known = self.recorded_tree or (self.tree.tree if self.tree else None)
        olds = baselines or ([known] if known else [])
        result = self.snap.write_tree()
        self.counts["full_scans"] += 1
        if self.lost and olds:
            doubtful = set.intersection(*({c.path for c in diff_trees(self.repo, old,
                                                                      result.tree)}
                                          for old in olds))
            if why == "start":
                # Changes made before this daemon watched. One an open call declared (a
                # daemon started by the call's own hook, while the call ran) goes to that
                # call's window and gets its verdict when the window closes.
                verdicts = self.tracker.unwatched(doubtful, time.time())
                self.held |= doubtful - {v.path for v in verdicts}
            else:
                verdicts = self.tracker.lost(doubtful, time.time())
            self.persist(verdicts)
            self.recorded_tree = result.tree
        elif self.recorded_tree is None:
            self.recorded_tree = result.tree
        if why != "start" and why != self.git_mode:
            self.log.info("full scan (%s): tree %s", why, result.tree[:12])
        self.tree = IncrementalTree(self.repo, str(self.ws.root),
                                    self.snap.settings.untracked_size_cap, result.tree,
                                    result.skipped, store_names=_store_names(self),
                                    store=self.store, skip_dirs=self.snap.settings.skip_dirs)
        self.ignored_memo.clear()
        if self.rules_changed:
            # A directory no longer ignored needs the watch it was spared; the events of
            # what changed in it meanwhile are gone, the scan above found it.
            self.rules_changed = False
            self.source.rewatch()
        self.git_mode = needs_git_filters(self.repo, self._converting_attributes())
        self.dirty.clear()
        self.rescan_reason, self.lost = None, False
        return result

    def resync(self) -> bool:
        """Bring the stat index up to date with a full scan; True when it agreed with the
        incremental tree (a disagreement means a change was missed: it becomes unknown)."""
        mine = self.tree_now()
        full = self.snap.write_tree()
        if full.tree == mine.tree:
            return True
        paths = [c.path for c in diff_trees(self.repo, mine.tree, full.tree)]
        self.log.warning("incremental tree differed from a full scan at %s", paths[:10])
        self.persist(self.tracker.lost(paths, time.time()))
        assert self.tree is not None
        self.tree.tree = full.tree
        return False

    def _converting_attributes(self) -> list[str]:
        return converting_attributes(self.ws.root, self.ws.git_dir, self.snap.scan_index())

    # --- call windows and records ----------------------------------------------------
    def opened(self, entry: ToolLedgerEntry, tool_input: dict[str, Any]) -> None:
        """A call began (its pre snapshot is taken): user changes so far are recorded. A
        delegation opens no window: its subagent's calls open their own, and a change none
        of them can have made stays the user's."""
        if is_delegation(entry.tool_name):
            return
        declared = entry.declared_writes
        expect = expectations(tool_input, declared, lambda p: safe_relpath(self.ws, p))
        flushed = self.tracker.open(entry.call_id, declared,
                                    is_declared_only(entry.tool_name, tool_input, declared),
                                    expect, shell=is_shell(entry.tool_name))
        self.record(flushed)

    def closed(self, entry: ToolLedgerEntry) -> None:
        """A call ended (its post snapshot is taken): record who changed what in its window."""
        window = self.tracker.windows.get(entry.call_id)
        final: dict[str, bytes | None] = {}
        if window is not None and self.tree is not None:
            root = as_tree(self.repo, self.tree.tree)
            for path in window.expected:
                final[path] = blob_at(self.repo, root, path)
        self.record(self.tracker.close(entry.call_id, final))

    def flush_user(self) -> None:
        """Idle time: record the user's changes (needs the store lock for the tree)."""
        if not self.tracker.outside:
            return
        with self.store.writing():
            self.tree_now()
            self.record(self.tracker.flush_user())

    def settle_windows(self, state: journal.LedgerState) -> None:
        """Windows of calls no longer running close. A call that never ran (denied) owns
        nothing: what its window saw is the user's. One that did not positively finish
        (marked uncertain) cannot be told from the user: its changes are ambiguous. One
        ended by a process the daemon did not serve keeps what it saw."""
        for call_id in list(self.tracker.windows):
            entry = state.lookup(call_id)
            if entry is not None and entry.status == "started":
                continue
            verdicts = self.tracker.close(call_id, {})
            if entry is not None and never_ran(entry):
                verdicts = [Verdict(v.path, USER, "window", v.at) for v in verdicts]
            elif entry is None or entry.status == "uncertain":
                verdicts = [v if v.owner == USER else Verdict(v.path, v.owner, "ambiguous", v.at)
                            for v in verdicts]
            self.record(verdicts)

    def record(self, verdicts: list[Verdict]) -> None:
        """Persist the verdicts for what really changed since the last recorded tree: a
        file touched and put back, or rewritten with the same bytes, is nobody's change.
        A verdict on a directory (deleted, moved away) covers the files below it."""
        if self.tree is None:
            return
        # User changes still pending are recorded too: the recorded tree moves past them.
        verdicts = [*self.tracker.flush_user(), *verdicts]
        current = self.tree.tree
        changed = [c.path for c in diff_trees(self.repo, self.recorded_tree or current, current)]
        by_path = {v.path: v for v in verdicts}
        kept: list[Verdict] = []
        # A change another open window also saw gets its verdict when that window closes,
        # after the recorded tree has moved past it (overlapping calls): held till then.
        seen_open = {p for w in self.tracker.windows.values() for p in w.seen}
        for path in [*changed, *sorted(self.held - set(changed))]:
            verdict = by_path.get(path) or _nearest_parent(by_path, path)
            if verdict is not None:
                kept.append(Verdict(path, verdict.owner, verdict.confidence, verdict.at))
            # Another open window saw it too: its verdict is owed when that one closes (a
            # write made while both ran is ambiguous for both, not the last one's).
            if path in seen_open or any(parent in seen_open for parent in _parents(path)):
                self.held.add(path)
            else:
                self.held.discard(path)
        self.recorded_tree = current
        # daemon.state follows in idle time too (`sync_records`): two file creations and
        # renames per tool call fewer. A daemon killed before then leaves it older, as
        # with unsynced rows: the next start's scan is checked against the checkpoints.
        self.state_since = self.state_since or time.monotonic()
        if self.persist(kept, sync=False):
            self.unsynced_since = self.unsynced_since or time.monotonic()

    def _reopen_windows(self) -> None:
        running = background.call_ids(self.store)
        for entry in journal.read(self.store).in_order():
            if entry.status == "started":
                self.opened(entry, _input_of(self.store, entry))
                if entry.call_id in running:
                    self.tracker.to_background(entry.call_id)

    def persist(self, verdicts: Iterable[Verdict], sync: bool = True) -> int:
        written = attribution_log.append(self.store, verdicts, sync)
        self.counts["records"] += len(written)
        return len(written)

    def sync_records(self) -> None:
        """The daemon's idle time (and stop): the rows of the calls since are fsynced, then
        daemon.state may say they are recorded. A killed daemon loses no row (they are
        written); a power cut may lose the newest, and then daemon.state is older too, so
        the next start finds their paths again (unknown, or the checkpoints' witness)."""
        if self.unsynced_since is not None:
            attribution_log.fsync(self.store)
            self.unsynced_since = None
        if self.state_since is not None:
            self.save_state()
        self.fanouts.check()

    def pending_since(self) -> float | None:
        """Since when rows or daemon.state have waited for `sync_records`, if they do."""
        waiting = [t for t in (self.unsynced_since, self.state_since) if t is not None]
        return min(waiting) if waiting else None

    # --- daemon.state -------------------------------------------------------------------
    def _baselines(self) -> list[str]:
        """Trees whose changes are known: the last one the daemon recorded up to, and the
        newest checkpoint's (calls made through the CLI while no daemon ran)."""
        found: list[str] = []
        try:
            tree = json.loads(self.state_path.read_text())["tree"]
            if isinstance(self.repo.get(tree), pygit2.Tree):
                found.append(str(tree))
        except (OSError, ValueError, KeyError, TypeError):
            pass
        row = checkpoints.read_index(self.store).latest()
        if row is not None:
            with contextlib.suppress(KeyError):
                found.append(self.snap.tree_of(row.snapshot_commit))
        return found

    def save_state(self) -> None:
        self.state_since = None
        if self.recorded_tree is None:
            return
        # Not fsynced: it only has to survive the daemon being killed, not a power cut.
        tmp = self.state_path.with_name(f".{self.state_path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # store files are 0600
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(json.dumps({"tree": self.recorded_tree}))
            os.replace(tmp, self.state_path)
        except BaseException:
            tmp.unlink(missing_ok=True)     # a full disk left an empty temp file behind
            raise


def _parents(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:depth]) for depth in range(1, len(parts))]


def _nearest_parent(by_path: dict[str, Verdict], path: str) -> Verdict | None:
    while "/" in path:
        path = path.rsplit("/", 1)[0]
        if path in by_path:
            return by_path[path]
    return None


def _input_of(store: Store, entry: ToolLedgerEntry) -> dict[str, Any]:
    if entry.input_ref is None:
        return {}
    try:
        value = json.loads(store.read_artifact(entry.input_ref))
    except (OSError, ValueError, StoreError):
        return {}
    return value if isinstance(value, dict) else {}


def _store_names(engine: Engine) -> tuple[bytes, ...]:
    return (b".git",) if engine.ws.is_git else (b".git", os.fsencode(NON_GIT_STORE))


