"""Starting, stopping and finding the daemon of a worktree.

One daemon per worktree: it holds an exclusive flock on `<store>/daemon.lock` for
its whole life, so "is one running?" is "is the lock held?". The kernel drops the
lock when the process dies, even by SIGKILL, so a pid file left behind by a killed
daemon is recognised as stale (and never mistaken for a live one, even if its pid
was reused). The socket file a killed daemon leaves refuses connections: clients
fall back, and the next daemon replaces it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitguard.errors import GitguardError
from gitguard.ipc import client
from gitguard.storage import durable
from gitguard.storage.store import Store
from gitguard.workspace import Workspace

UNWATCHED_FILE = "daemon.unwatched"   # what the running daemon cannot watch (JSON)

LOG_NAME = "daemon.log"
LOG_LIMIT = 1024 * 1024
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Started:
    pid: int
    already: bool
    stale_pid: int | None = None


def paths(store_dir: Path) -> tuple[Path, Path, Path]:
    return (store_dir / client.LOCK_NAME, store_dir / client.PID_NAME, store_dir / LOG_NAME)


def running_pid(store_dir: Path) -> int | None:
    """The live daemon's pid, or None. A pid file without the lock held is stale."""
    lock, pid_file, _ = paths(store_dir)
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                return client.pid_of(str(store_dir)) or -1
            raise
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def stale_pid(store_dir: Path) -> int | None:
    if running_pid(store_dir) is not None:
        return None
    return client.pid_of(str(store_dir))


def start(ws: Workspace, timeout: float = START_TIMEOUT_S) -> Started:
    """Start a background daemon and wait until it answers (its start-up scan is done).

    A daemon of another gitguard version (it answers in another framing: the package was
    upgraded under it) is stopped and replaced; until then every hook ran in-process."""
    Store(ws).create()
    store_dir = ws.store_dir
    pid = running_pid(store_dir)
    if pid is not None and _foreign(store_dir):
        stop(ws)
        pid = running_pid(store_dir)
    if pid is not None:
        return Started(pid, already=True)
    stale = stale_pid(store_dir)
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitguard", "-C", str(ws.root), "daemon", "start",
         "--foreground"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True, close_fds=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if client.alive(str(store_dir)):
            return Started(running_pid(store_dir) or proc.pid, already=False, stale_pid=stale)
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            proc.stderr and proc.stderr.close()
            now = running_pid(store_dir)
            if now is not None:         # another start won the race
                return Started(now, already=True)
            raise GitguardError(f"the daemon did not start: {_last_error(err, store_dir)}",
                                f"see {store_dir / LOG_NAME}")
        time.sleep(0.02)
    raise GitguardError(f"the daemon did not answer within {timeout:.0f} s",
                        f"see {store_dir / LOG_NAME}; `gitguard daemon stop` ends it")


def _foreign(store_dir: Path) -> bool:
    try:
        client.request(str(store_dir), "ping", timeout=5.0, take_timeout=5.0)
    except client.Foreign:
        return True
    except (client.Unreachable, client.Broken):
        return False
    return False


def _last_error(stderr: str, store_dir: Path) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("Error:")]
    if lines:
        return lines[-1].removeprefix("Error: ")
    try:
        tail = (store_dir / LOG_NAME).read_text(errors="replace").splitlines()
    except OSError:
        tail = []
    return tail[-1] if tail else "it exited at once"


def mark_unusable(store_dir: Path, why: str) -> None:
    """A daemon that cannot hear says so for `status`, and the hooks stop starting one
    (each would spend seconds finding the same) for client.UNUSABLE_RETRY_S."""
    durable.atomic_write(store_dir / client.UNUSABLE_NAME,
                         json.dumps({"why": why, "at": time.time()}).encode())


def unusable(store_dir: Path) -> dict[str, Any] | None:
    """What the last daemon that could not serve said, while it still holds."""
    try:
        found = json.loads((store_dir / client.UNUSABLE_NAME).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def clear_unusable(store_dir: Path) -> None:
    (store_dir / client.UNUSABLE_NAME).unlink(missing_ok=True)


def stop(ws: Workspace, timeout: float = STOP_TIMEOUT_S) -> int | None:
    """Ask the daemon to stop (SIGTERM if it does not answer); wait until it is gone."""
    store_dir = ws.store_dir
    pid = running_pid(store_dir)
    if pid is None:
        _remove_stale(store_dir)
        return None
    try:
        client.request(str(store_dir), "stop", timeout=timeout)
    except (client.Unreachable, client.Broken):
        if pid > 0:
            _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while running_pid(store_dir) is not None:
        if time.monotonic() > deadline:
            raise GitguardError(f"the daemon (pid {pid}) did not stop within {timeout:.0f} s",
                                f"see {store_dir / LOG_NAME}; kill it with `kill {pid}`")
        time.sleep(0.02)
    return pid


def _signal(pid: int, sig: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, sig)


def _remove_stale(store_dir: Path) -> None:
    lock, pid_file, _ = paths(store_dir)
    pid_file.unlink(missing_ok=True)
    (store_dir / client.SOCKET_NAME).unlink(missing_ok=True)


RUNNING, NOT_ANSWERING, NOT_RUNNING = "running", "not answering", "not running"
STATUS_TAKE_S = 3.0     # `daemon status` is quick even when the daemon is deaf or hung
STATUS_ANSWER_S = 5.0


def status(ws: Workspace) -> dict[str, Any]:
    """What the daemon says of itself, with `state`: RUNNING (it holds the lock and
    answered), NOT_ANSWERING (it holds the lock and did not answer within a few seconds:
    hooks work in-process meanwhile) or NOT_RUNNING."""
    store_dir = ws.store_dir
    pid = running_pid(store_dir)
    value: dict[str, Any] = {"running": pid is not None, "pid": pid,
                             "state": NOT_RUNNING if pid is None else RUNNING,
                             "socket": str(store_dir / client.SOCKET_NAME),
                             "log": str(store_dir / LOG_NAME), "stalePid": stale_pid(store_dir)}
    if pid is not None:
        try:
            value.update(client.request(str(store_dir), "status", timeout=STATUS_ANSWER_S,
                                        take_timeout=STATUS_TAKE_S).get("result", {}))
        except (client.Unreachable, client.Broken) as exc:
            value["state"], value["error"] = NOT_ANSWERING, str(exc)
    else:
        value["unusable"] = unusable(store_dir)
    return value


@contextmanager
def daemon_lock(store_dir: Path) -> Iterator[int | None]:
    """Hold the daemon lock for the daemon's life. Yields the stale pid found, if any."""
    lock, pid_file, _ = paths(store_dir)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, durable.FILE_MODE)
    try:
        # `running_pid` holds the lock shared for an instant: retry briefly before refusing.
        deadline = time.monotonic() + 0.5
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() > deadline:
                    other = client.pid_of(str(store_dir))
                    raise GitguardError(f"a daemon already runs for this worktree (pid {other})",
                                        "`gitguard daemon status` shows it") from None
                time.sleep(0.01)
        stale = client.pid_of(str(store_dir))
        durable.atomic_write(pid_file, f"{os.getpid()}\n".encode())
        try:
            yield stale
        finally:
            pid_file.unlink(missing_ok=True)
    finally:
        os.close(fd)


def open_log(store_dir: Path) -> logging.Logger:
    path = store_dir / LOG_NAME
    if path.exists() and path.stat().st_size > LOG_LIMIT:
        os.replace(path, path.with_name(LOG_NAME + ".1"))
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, durable.FILE_MODE)
    os.close(fd)
    log = logging.getLogger(f"gitguard.daemon.{os.getpid()}")
    log.setLevel(logging.INFO)
    log.propagate = False
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log.addHandler(handler)
    # watchdog's own warnings go to the same log (its debug chatter does not).
    watchdog_log = logging.getLogger("watchdog")
    watchdog_log.setLevel(logging.WARNING)
    watchdog_log.addHandler(handler)
    return log
