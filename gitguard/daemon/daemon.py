"""The watcher daemon of one worktree: `gitguard daemon start --foreground` runs this.

Threads: watchdog's (enqueue filesystem events only), the socket server's
(enqueue requests only) and the main thread, the one worker: it owns the pygit2
repository, the dirty set and the attribution tracker, and runs every request to
completion before the next. The store lock is taken only while something is
written, so CLI commands keep working beside the daemon.

Requests (one JSON object per connection, see `gitguard.ipc.client`), listed with their
handlers in OPS at the end of this module:

* `call.begin`, `call.end`, `hook`: a command line, run through the same click
  command as the CLI (same output, same exit code) against the daemon's Guard; the
  plain `call begin`/`call end` lines hooks send skip click's parser
  (`gitguard.cli.call_parser`, the same option table; byte-for-byte the same answers);
* `api.begin_call`, `api.end_call`: the Python API's calls (`ipc/api_client.py`);
* `hook.claude_code`, `hook.git`: `gitguard.integrations.*.handle`, imported lazily;
* `resume`, `explain`: those command lines (`gitguard.daemon.recovery_requests`);
* `ping`, `status`, `stop`, `flush`, `rescan`, `resync`;
* `pack`: pack gitguard's loose objects now (tests; the daemon packs by itself);
* `restore.begin`, `restore.end` around gitguard's own writes to the working tree.
"""

from __future__ import annotations

import base64
import contextlib
import faulthandler
import functools
import logging
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import pygit2

from gitguard import jsontext, nativeclient, store_discovery
from gitguard.api import Guard
from gitguard.calls import lifecycle
from gitguard.cli import call_parser, entry
from gitguard.daemon import recovery_requests
from gitguard.daemon.client_context import client_context
from gitguard.daemon.engine import Engine, Item, Job
from gitguard.daemon.request_stats import RequestStats
from gitguard.daemon.server import SocketServer
from gitguard.daemon.watcher import IgnoredDirs, Source, WatchdogSource
from gitguard.errors import GitguardError, WatcherUnusable
from gitguard.git import packing
from gitguard.ipc import control
from gitguard.ledger import journal
from gitguard.models import ToolLedgerEntry
from gitguard.snapshot.daemon_snapshotter import DaemonSnapshotter
from gitguard.snapshot.snapshotter import Snapshotter
from gitguard.storage.store import Store
from gitguard.workspace import NON_GIT_STORE, Workspace, discover

DEBOUNCE_S = 0.3            # user changes are recorded once the workspace is quiet this long
PACK_CHECK_S = 30.0         # how often (at most) loose objects are counted when idle
PACK_EVERY = 32             # ... and after this many calls and hooks (~6 objects each)
IDLE_WAKE_S = 5.0           # an idle daemon wakes this rarely (idle CPU stays near zero)
BACKOFF_S = 5.0             # after failed idle work (store locked for long, disk full, ...)
SYNC_AFTER_S = 0.05         # attribution rows are fsynced once requests pause this long
SYNC_MAX_S = 1.0            # or at the latest this long after the first unsynced row
RESTORE_MAX_S = 300.0       # a restore that never says it ended stops being exempt
PACKER_JOIN_S = 60.0        # shutdown waits this long for a pack being written
PACK_WINDOW = 1 << 20       # libgit2's pack windows (_bound_pack_maps)
PACK_WINDOWS_MAPPED = 2 << 20
PACKER_NICE = 10            # the packer thread's (and its git's) nice value, on Linux


class DaemonGuard(Guard):
    """The daemon's long-lived Guard: trees from the engine, call windows to the tracker."""

    engine: Engine
    # `call end` leaves the loose-object check to the daemon (`Daemon.step`): once per
    # PACK_EVERY requests instead of 17 directory listings and two file reads per call.
    packs_in_background = True

    def attach(self, engine: Engine) -> None:
        snap = DaemonSnapshotter(self.store, self.settings)
        snap.__dict__["repo"] = engine.repo     # one repository object, one thread
        snap.engine = engine
        self.snap = snap
        self.engine = engine

    def begin_call(self, tool: str, tool_input: Mapping[str, Any], **options: Any
                   ) -> ToolLedgerEntry:
        self.settle_windows()
        entry = lifecycle.begin(self, tool, tool_input, **options)
        self._bookkeeping(self.engine.opened, entry, dict(tool_input))
        return entry

    def end_call(self, call_id: str, status: str = "succeeded",
                 result: str | bytes | None = None) -> ToolLedgerEntry:
        # One store lock for the call's records and its attribution rows (the lock is
        # reentrant): not a second flock and journal check per call end.
        with self.store.lock.held():
            entry = lifecycle.end(self, call_id, status, result)
            self._bookkeeping(self.engine.closed, entry)
        return entry

    def background_call(self, call_id: str, task_id: str) -> None:
        super().background_call(call_id, task_id)
        self.engine.tracker.to_background(call_id)

    def settle_windows(self) -> None:
        if self.engine.tracker.windows:
            self.engine.settle_windows(journal.read(self.store))

    def _bookkeeping(self, step: Any, *args: Any) -> None:
        """The call is in the ledger: attribution trouble must not make it look failed.
        What was not recorded is found again by a rescan, as unknown."""
        try:
            step(*args)
        except Exception:  # noqa: BLE001 - logged; the rescan is the recovery
            self.engine.log.exception("attribution bookkeeping failed")
            self.engine.rescan_reason, self.engine.lost = "attribution bookkeeping failed", True

    def close(self) -> None:
        """The daemon keeps its repository open between requests."""


class Daemon:
    def __init__(self, ws: Workspace, log: logging.Logger, source: Source | None = None,
                 sink: queue.SimpleQueue[Item] | None = None) -> None:
        self.ws = ws
        self.log = log
        self.sink: queue.SimpleQueue[Item] = sink or queue.SimpleQueue()
        self.guard = DaemonGuard(ws)
        self.guard.store.create_missing = False
        self.abandoned = False      # the worktree or the store is gone: exit, write nothing
        plain = Snapshotter(self.guard.store, self.guard.settings)
        skip = (b".git",) if ws.is_git else (b".git", os.fsencode(NON_GIT_STORE))
        self.source = source or WatchdogSource(
            ws.root, ws.store_dir, self.sink, skip_names=skip,
            ignored=(IgnoredDirs(ws.root, ws.root, self.guard.settings.skip_dirs)
                     if ws.is_git else None))
        self.engine = Engine(self.guard.store, plain, self.source, self.sink, log)
        self.guard.attach(self.engine)
        self.server: SocketServer | None = None
        self.stopping = False
        self.started_at = time.time()
        self.start_ms = 0.0
        self.request_stats = RequestStats()
        self.last_pack_check = 0.0
        self.calls_since_pack = 0
        self.packer: threading.Thread | None = None
        self.backoff_until = 0.0
        self.code = _code_stamp()   # the gitguard it runs: an upgrade replaces the files
        self._mine_memo: dict[str, tuple[tuple[str, str] | None, bool]] = {}

    # --- life -------------------------------------------------------------------------
    def start(self, serve_socket: bool = True) -> None:
        began = time.perf_counter()
        self.engine.start()
        self.start_ms = (time.perf_counter() - began) * 1000
        if serve_socket:
            self.server = SocketServer(self.ws.store_dir, self.sink, self.handle, self.log,
                                       on_death=self.server_died)
            self.server.start()
        self.log.info("watching %s (start-up scan and watches: %.0f ms, %d inotify watches)",
                      self.ws.root, self.start_ms, self.source.watch_count())

    def server_died(self) -> None:
        """The socket's loop died (a bug): stop, so the process exits and releases its pid
        file and lock, and the next hook starts a fresh daemon instead of meeting a deaf
        one. Called on the I/O thread."""
        self.stopping = True
        self.sink.put(Job(lambda: None))        # wake the worker

    def run(self) -> None:
        """The worker loop, until `stop` (request or signal), or until the watcher proves
        deaf: a daemon that cannot hear stops rather than make every call wait."""
        while not self.stopping:
            self.step(self._timeout())
            if self.engine.deaf is not None:
                self.log.warning("%s: stopping; the hooks work in-process until a daemon "
                                 "hears again", self.engine.deaf)
                control.mark_unusable(self.ws.store_dir, self.engine.deaf)
                self.stopping = True

    def step(self, timeout: float | None) -> None:
        engine = self.engine
        try:
            item = engine.deferred.popleft() if engine.deferred else self.sink.get(
                timeout=timeout)
        except queue.Empty:
            self.idle()
            return
        if isinstance(item, Job):
            try:
                item.fn()       # a request answers its client itself (SocketServer._run)
            except Exception:  # noqa: BLE001 - one bad request must not end the daemon
                self.log.exception("request failed")
            since = engine.pending_since()
            if since is not None and time.monotonic() - since >= SYNC_MAX_S:
                self.idle()     # calls back to back: a batch of rows, fsynced once
            if self.calls_since_pack >= PACK_EVERY:
                self.pack()
        else:
            engine.absorb(item)

    def _timeout(self) -> float:
        engine = self.engine
        now = time.monotonic()
        if now < self.backoff_until:
            return self.backoff_until - now
        if engine.pending_since() is not None:
            return SYNC_AFTER_S
        if engine.tracker.outside or engine.rescan_reason:
            return max(0.0, engine.last_event + DEBOUNCE_S - now)
        return IDLE_WAKE_S

    def idle(self) -> None:
        """Quiet for a moment: rescan if one is due, record the user's changes, pack."""
        engine = self.engine
        if not (self.ws.root.is_dir() and self.ws.store_dir.is_dir()):
            # `git worktree remove` (or rm -rf): nothing left to guard, and writing now
            # would bring the store back.
            self.log.info("the worktree or its store is gone; stopping")
            self.stopping = self.abandoned = True
            return
        if _code_stamp() != self.code:
            # pip replaced the package under this process, which would go on running the
            # old code (and, after a change of framing, answer no client). Stop as `daemon
            # stop` does; the next hook starts the new version.
            self.log.info("gitguard was upgraded or reinstalled (%s changed); stopping so "
                          "that the next hook starts the new version", _CODE_FILE)
            self.stopping = True
            return
        try:
            engine.sync_records()
            if engine.rescan_reason:
                engine.rescan(engine.rescan_reason)
            if engine.tracker.outside and time.monotonic() - engine.last_event >= DEBOUNCE_S:
                engine.flush_user()
            if (time.monotonic() - self.last_pack_check >= PACK_CHECK_S
                    and self.calls_since_pack):
                self.pack()
        except Exception:  # noqa: BLE001 - logged; retried later instead of spinning
            self.log.exception("idle work failed; retrying in %.0f s", BACKOFF_S)
            self.backoff_until = time.monotonic() + BACKOFF_S

    def pack(self) -> None:
        """The cheap check of `call end`, on a thread of its own: pack once enough is loose.
        git writes the pack without the store lock (packing.pack_gitguard_objects), so the
        calls go on meanwhile."""
        self.last_pack_check = time.monotonic()
        self.calls_since_pack = 0
        if self.packer is not None and self.packer.is_alive():
            return
        self.packer = threading.Thread(target=self._pack_logged, name="gitguard-pack",
                                       daemon=True)
        self.packer.start()

    def _pack_logged(self) -> None:
        _yield_cpu()
        try:
            stats = self._pack(force=False)
        except Exception:  # noqa: BLE001 - housekeeping: the next check tries again
            self.log.exception("packing failed")
            return
        if stats.get("objects"):
            # libgit2 keeps every pack it opened mapped, deleted ones too: their disk space
            # and the pages it read stay held until the repository lets go (it reopens
            # what it needs).
            self.sink.put(Job(self._let_go))

    def _let_go(self) -> None:
        """After a pack, on the worker: the repository's maps and caches, and the free
        memory the C allocator keeps inside its heaps (glibc returns only a heap's top
        otherwise: in-process, 1-2 MiB of RSS every 1,000 calls)."""
        self.engine.repo.free()
        _trim_malloc()

    def pack_now(self) -> dict[str, Any]:
        self._wait_for_packer()
        stats = self._pack(force=True)
        self._let_go()              # on the worker thread already (see _pack_logged)
        return stats

    def _wait_for_packer(self) -> None:
        if self.packer is not None:
            self.packer.join(PACKER_JOIN_S)

    def _pack(self, force: bool) -> dict[str, Any]:
        # A Store of its own: its own flock, which the worker's calls wait for only while
        # packs.json changes (a lock held by the same Store object is re-entrant).
        store = Store(self.ws, self.guard.settings)
        store.create_missing = False
        stats = (packing.pack_gitguard_objects(store) if force else
                 packing.maybe_pack(store, pygit2.Repository(str(self.ws.git_dir))))
        if stats is not None and stats.objects:
            self.log.info("packed %d gitguard object(s) (%d loose before)", stats.objects,
                          stats.loose_before)
        return stats.to_json() if stats is not None else {"objects": 0}

    def shutdown(self) -> None:
        """Finish the requests already taken, record everything, leave no socket behind."""
        self.stopping = True
        if self.server is not None:
            self.server.refuse_new()
            while self.server.busy() or self.engine.deferred:
                self.step(0.05)
            self.server.stop()
        self._wait_for_packer()
        if self.abandoned:
            self.source.stop()
        else:
            self.engine.stop()
        self.log.info("stopped")

    # --- requests -----------------------------------------------------------------------
    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """One request's answer, as OPS says. An exception goes to the socket server's
        error boundary (error_boundary.to_wire)."""
        op = str(request.get("op", ""))
        args = request.get("args") or {}
        if not isinstance(args, dict):
            return {"fallback": True, "reason": "the request's args are not an object"}
        if op == "cli":     # a command line as typed (the native client sends every one)
            found = entry.forwarded(args)       # client.FORWARDED says which ones run here
            if isinstance(found, str):
                return {"fallback": True, "reason": found}
            op, args = found
        known = OPS.get(op)
        if known is None:
            return {"fallback": True, "reason": f"unknown op {op!r}"}
        if not known.call:
            return known.handler(self, op, args)
        try:
            with self.request_stats.measured(op):   # wall, CPU, fsyncs: `status` reports them
                self.calls_since_pack += 1      # a hook's calls end here too: no pack of its own
                return known.handler(self, op, args)
        finally:
            # The whole history a request read (resume, status, a call older than the
            # window) is kept for the next such request, until calls go on: then only
            # what the next call needs stays (ledger/journal.py).
            journal.trim()

    def ping(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "workspace": str(self.ws.root)}

    def status(self) -> dict[str, Any]:
        unwatched = self.engine.unwatched_now()     # as of now, not of the last call
        counts = dict(self.engine.counts)
        return {"pid": os.getpid(), "workspace": str(self.ws.root),
                "uptimeS": round(time.time() - self.started_at, 1),
                "startMs": round(self.start_ms, 1), "watches": self.source.watch_count(),
                "unwatched": [os.fsdecode(d) for d in unwatched],
                **_memory_kb(), "cpuS": round(time.process_time(), 3),
                "dirty": len(self.engine.dirty), "openWindows": sorted(self.engine.tracker.windows),
                "snapshotMode": self.engine.git_mode or "incremental", **counts,
                "requests": self.request_stats.report()}

    def request_stop(self) -> dict[str, Any]:
        self.stopping = True
        return {"stopping": os.getpid()}

    def flush(self) -> dict[str, Any]:
        """Record every change seen so far (rollback calls this before reading records)."""
        with self.guard.store.writing():
            self.engine.tree_now()
            self.engine.record(self.engine.tracker.flush_user())
        self.engine.sync_records()      # what a rollback decides on is durable first
        return {"records": self.engine.counts["records"]}

    def restore_begin(self) -> dict[str, Any]:
        """gitguard itself is about to write into the working tree (rollback, a conflict
        resolution): a full scan, everything seen so far recorded, and the writes that
        follow are nobody's (the restore is in the ledger). Ends at `restore.end`, or
        by itself after RESTORE_MAX_S should the restorer die."""
        tree = self.engine.rescan("before a restore")
        with self.guard.store.writing():
            self.engine.record([])
        self.engine.sync_records()
        self.engine.suspended_until = time.monotonic() + RESTORE_MAX_S
        return {"tree": tree.tree}

    def restore_end(self) -> dict[str, Any]:
        with self.guard.store.writing():
            tree = self.engine.tree_now()       # the restore's events, unattributed
            self.engine.suspended_until = 0.0
            self.engine.recorded_tree = tree.tree
            self.engine.sync_records()
            self.engine.save_state()
        return {"tree": tree.tree}

    def rescan(self) -> dict[str, Any]:
        return {"tree": self.engine.rescan("requested").tree}

    def resync(self) -> dict[str, Any]:
        with self.guard.store.writing():
            agreed = self.engine.resync()
        return {"agreed": agreed, "tree": self.engine.tree.tree if self.engine.tree else None}

    def _mine(self, cwd: str) -> bool:
        """Whether `discover` finds this daemon's store from cwd. Remembered per directory
        while the client's own look-up (a few stats, no repository opened) gives the same
        answer: a repository created or removed in between changes that answer."""
        key = store_discovery.find_store(cwd)
        known = self._mine_memo.get(cwd)
        if known is not None and known[0] == key:
            return known[1]
        try:
            mine = discover(Path(cwd)).store_dir == self.ws.store_dir
        except GitguardError:
            mine = False
        if len(self._mine_memo) > 1000:
            self._mine_memo.clear()
        self._mine_memo[cwd] = (key, mine)
        return mine

    def run_cli(self, args: dict[str, Any]) -> dict[str, Any]:
        """The click command line, in-process, with the client's cwd, env and stdin."""
        from gitguard.cli import main

        argv, cwd = args.get("argv"), args.get("cwd")
        if not isinstance(argv, list) or not isinstance(cwd, str) or not os.path.isdir(cwd):
            return {"fallback": True, "reason": "another workspace"}
        raw = args.get("stdin")     # bytes from the native client, base64 text in JSON
        stdin = raw if isinstance(raw, bytes) else base64.b64decode(raw) if raw else b""
        env = args.get("env") if isinstance(args.get("env"), dict) else None
        words = [str(a) for a in argv]
        # `call begin`/`call end` in the shapes hooks send skip click (~3-5 ms a request);
        # anything else, help and every usage error included, is click's
        # (tests/daemon/test_daemon_calls_match_cli.py compares the two byte for byte).
        parsed = call_parser.parse(words)
        with client_context(cwd, env, stdin) as (out, err):
            # In the client's environment: its GIT_DIR and GIT_WORK_TREE say whose it is.
            if not self._mine(cwd):
                return {"fallback": True, "reason": "another workspace"}
            if parsed is not None:
                code = call_parser.run(parsed, lambda: self.guard)
            else:
                code = main.run(["-C", cwd, *words], self._open_guard)
        return {"exit": code, "stdout": out.getvalue().decode("utf-8", "surrogateescape"),
                "stderr": err.getvalue().decode("utf-8", "surrogateescape")}

    def _open_guard(self, path: str) -> Guard:
        if self._mine(path):
            return self.guard
        return Guard.open(path)

    def run_api(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        """The Python API's begin_call and end_call (gitguard.ipc.api_client): the entry as JSON."""
        kwargs = args.get("kwargs") or {}
        cwd = str(args.get("cwd", self.ws.root))
        if not os.path.isdir(cwd):
            return {"fallback": True, "reason": "another workspace"}
        env = args.get("env") if isinstance(args.get("env"), dict) else None
        with client_context(cwd, env, b""):
            if not self._mine(cwd):
                return {"fallback": True, "reason": "another workspace"}
            if op == "api.begin_call":
                entry = self.guard.begin_call(kwargs.pop("tool"), kwargs.pop("tool_input"),
                                              **kwargs)
            else:
                result = kwargs.get("result")
                if kwargs.pop("result_b64", False) and isinstance(result, str):
                    kwargs["result"] = base64.b64decode(result)
                entry = self.guard.end_call(**kwargs)
        return {"exit": 0, "entry": entry.to_json()}

    def run_hook(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        """The integrations' handlers, if this gitguard has them; else the caller falls back."""
        import importlib

        name = "claude_code" if op == "hook.claude_code" else "git_hooks"
        try:
            module = importlib.import_module(f"gitguard.integrations.{name}")
            handle = module.handle
        except (ImportError, AttributeError):
            return {"fallback": True, "reason": f"gitguard.integrations.{name} is not available"}
        if op == "hook.claude_code":
            result = handle(self.guard, dict(args.get("payload") or {}))
            return {"exit": 0, "result": result, "stderr": "", "stdout": jsontext.dumps(result)}
        code, output = handle(self.guard, str(args.get("name")),
                              [str(a) for a in args.get("args") or []],
                              base64.b64decode(args.get("stdin") or ""))
        return {"exit": code, "stdout": output, "stderr": ""}

    def forward_cli(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        """A command line a client forwarded (client.FORWARDED), run as the CLI runs it."""
        return self.run_cli(args)


Handler = Callable[[Daemon, str, dict[str, Any]], dict[str, Any]]


class Op(NamedTuple):
    handler: Handler
    call: bool          # a tool call's request: timed for `status`, counted toward packing


def _result(method: Callable[[Daemon], Any]) -> Handler:
    """A request the daemon answers with what one of its methods returns."""
    return lambda daemon, op, args: {"exit": 0, "result": method(daemon)}


# What the daemon answers: every op, its handler, and whether it is a tool call's.
# Anything else is answered `fallback` (the client does the work itself).
OPS: dict[str, Op] = {
    "call.begin": Op(Daemon.forward_cli, call=True),
    "call.end": Op(Daemon.forward_cli, call=True),
    "hook": Op(Daemon.forward_cli, call=True),
    "resume": Op(recovery_requests.handle, call=False),
    "explain": Op(recovery_requests.handle, call=False),
    "api.begin_call": Op(Daemon.run_api, call=True),
    "api.end_call": Op(Daemon.run_api, call=True),
    "hook.claude_code": Op(Daemon.run_hook, call=True),
    "hook.git": Op(Daemon.run_hook, call=True),
    "ping": Op(_result(Daemon.ping), call=False),
    "status": Op(_result(Daemon.status), call=False),
    "stop": Op(_result(Daemon.request_stop), call=False),
    "flush": Op(_result(Daemon.flush), call=False),
    "rescan": Op(_result(Daemon.rescan), call=False),
    "resync": Op(_result(Daemon.resync), call=False),
    "pack": Op(_result(Daemon.pack_now), call=False),
    "restore.begin": Op(_result(Daemon.restore_begin), call=False),
    "restore.end": Op(_result(Daemon.restore_end), call=False),
}


# The package's __init__.py: pip replaces it (a new inode) whenever it installs gitguard.
_CODE_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "__init__.py")


def _code_stamp() -> tuple[int, int, int] | None:
    """Which file the package's `__init__.py` is now (inode, mtime, size); None if gone."""
    try:
        found = os.stat(_CODE_FILE)
    except OSError:
        return None
    return found.st_ino, found.st_mtime_ns, found.st_size


def _yield_cpu() -> None:
    """This thread, and the git it starts, yield the CPU to the calls (Linux: a thread's
    nice value is its own, and a child inherits its creator's)."""
    if sys.platform.startswith("linux"):    # elsewhere PRIO_PROCESS names a process
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), PACKER_NICE)


def _memory_kb() -> dict[str, int]:
    """Resident memory: all of it, what the process allocated (anonymous) and the file
    pages it maps (its libraries, the packs libgit2 reads), which the kernel can drop."""
    found = {"rssKb": 0}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "RssAnon:", "RssFile:")):
                name = "rssKb" if line.startswith("VmRSS:") else f"rss{line[3:7]}Kb"
                found[name] = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return found


def install_signals(daemon: Daemon) -> None:
    """SIGTERM and SIGINT stop the daemon cleanly: the worker finishes what it holds."""
    def stop(signum: int, frame: object) -> None:
        daemon.stopping = True
        daemon.sink.put(Job(lambda: None))      # wake the worker

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def _trim_malloc() -> None:
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, where there is one (elsewhere the allocator is left alone).
    Through ctypes because Python has no call for it; what it saves is in _let_go (1-2 MiB
    of RSS every 1,000 calls). tests/test_kept_library_uses.py fails if glibc's symbol goes
    missing here, so the saving cannot vanish silently."""
    try:
        import ctypes

        found: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return found


def _bound_pack_maps() -> None:
    """libgit2 maps packs in windows of 32 MiB and keeps up to 8 GiB of them mapped: over a
    long session the pages it touched in the packs (yours and gitguard's, which grow) stayed
    resident. Measured through the socket on the 1k bench repository, pack pages in the
    daemon's RSS after 1,000 and 6,000 calls: 2.5 and 10.1 MiB; with windows of 1 MiB and
    at most 8 MiB mapped 2.3 and 8.2; at most 2 MiB, 1.6 and 2.5. An object read maps its
    window again when it must."""
    pygit2.settings.mwindow_size = PACK_WINDOW
    pygit2.settings.mwindow_mapped_limit = PACK_WINDOWS_MAPPED


def _log_fatal_errors(log_path: Path) -> None:
    """A crash in C (libgit2, a fatal signal) kills the process before logging can write
    a word, and the daemon's stderr is a pipe its starter closed: faulthandler writes the
    Python stack of every thread to daemon.log instead. The file stays open (faulthandler
    holds it) until the process ends; O_APPEND keeps its lines after the logger's."""
    faulthandler.enable(file=log_path.open("ab"), all_threads=True)


def serve_foreground(ws: Workspace, source: Source | None = None) -> int:
    """Run the daemon in this process until SIGTERM, SIGINT or a `stop` request (or until
    its watcher proves deaf). `source`: the watcher (a test passes one made deaf)."""
    Store(ws).create()
    with control.daemon_lock(ws.store_dir) as stale:
        log = control.open_log(ws.store_dir)
        _log_fatal_errors(ws.store_dir / control.LOG_NAME)
        if stale is not None and stale != os.getpid():
            log.warning("recovered: the previous daemon (pid %d) was gone without stopping "
                        "(killed?); its stale pid file and socket are replaced", stale)
        if nativeclient.remove_old(ws.store_dir):
            log.info("removed the hook client an older gitguard built into the store "
                     "(it speaks an older framing); the hooks that named it start Python")
        _bound_pack_maps()
        daemon = Daemon(ws, log, source=source)
        install_signals(daemon)
        try:
            daemon.start()
        except WatcherUnusable as exc:
            log.warning("the daemon does not serve: %s", exc.message)
            control.mark_unusable(ws.store_dir, exc.message)
            daemon.source.stop()
            raise
        except Exception:
            log.exception("the daemon failed to start")
            daemon.source.stop()
            raise
        control.clear_unusable(ws.store_dir)
        try:
            daemon.run()
        finally:
            daemon.shutdown()
    return 0
