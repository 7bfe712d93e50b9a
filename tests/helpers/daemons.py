"""Helpers for tests that run a real daemon process: start, stop, poll, compare trees."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gitguard.ipc import client
from tests.helpers.commands import gg


def store_of(repo: Path) -> Path:
    return repo / ".git" / "gitguard"


def alive(pid: int) -> bool:
    """A live process (a zombie left for init to reap does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_for(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def request(repo: Path, op: str, **args: Any) -> dict[str, Any]:
    return client.request(str(store_of(repo)), op, args)


@contextmanager
def running_daemon(repo: Path) -> Iterator[int]:
    """A real daemon for the test, stopped afterwards whatever happened; no process left."""
    gg(repo, "daemon", "start")
    pid = client.pid_of(str(store_of(repo)))
    assert pid is not None and alive(pid)
    try:
        yield pid
    finally:
        gg(repo, "daemon", "stop")
        assert not (store_of(repo) / client.PID_NAME).exists()
        wait_for("the daemon process to end", lambda: not alive(pid), timeout=30)


@contextmanager
def daemon_if(repo: Path, on: bool) -> Iterator[None]:
    """running_daemon when `on`, else nothing: one test body for both modes."""
    if not on:
        yield
        return
    with running_daemon(repo):
        yield


def full_scan_tree(repo: Path, tmp: Path) -> str:
    """The workspace tree as git itself sees it, with a throwaway index (gitguard not used)."""
    tmp.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_INDEX_FILE": str(tmp / "scan.index")}
    subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True, capture_output=True)
    return subprocess.run(["git", "write-tree"], cwd=repo, env=env, check=True,
                          capture_output=True, text=True).stdout.strip()
