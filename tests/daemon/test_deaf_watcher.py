"""A daemon that cannot hear is never a slow daemon (issue 28): at start it does not serve
when its own barrier does not come back, later it stops when one does not; `status` and
`daemon status` say why, and the hooks work in-process without starting another daemon
for a while. The watcher is made deaf on purpose: the real watchdog observer, with every
event dropped before the worker's queue (as watchdog 7.1.1 under the old watcher did)."""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
from pathlib import Path
from typing import Any

import pytest

from gitguard.daemon.daemon import Daemon, serve_foreground
from gitguard.daemon.engine import Item, Job
from gitguard.daemon.watcher import WatchdogSource
from gitguard.errors import WatcherUnusable
from gitguard.ipc import client, control
from gitguard.workspace import discover
from tests.helpers.commands import gg


class DeafSource(WatchdogSource):
    """The real watcher, deaf from the moment `deaf` is set (at once by default)."""

    def __init__(self, *args: Any, hears_until_told: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deaf = threading.Event()
        if not hears_until_told:
            self.deaf.set()

    def dispatch(self, event: Any) -> None:
        if not self.deaf.is_set():
            super().dispatch(event)


def _source(repo: Path, sink: queue.SimpleQueue[Item], **kwargs: Any) -> DeafSource:
    ws = discover(repo)
    return DeafSource(ws.root, ws.store_dir, sink, skip_names=(b".git",), **kwargs)


def test_a_deaf_watcher_refuses_to_serve_and_says_why(repo: Path) -> None:
    gg(repo, "init", "--no-daemon")
    ws = discover(repo)
    sink: queue.SimpleQueue[Item] = queue.SimpleQueue()
    with pytest.raises(WatcherUnusable) as refused:
        serve_foreground(ws, source=_source(repo, sink))
    assert "no event came out of the watcher within 2 s" in refused.value.message
    assert control.running_pid(ws.store_dir) is None
    assert not (ws.store_dir / client.SOCKET_NAME).exists()
    log = (ws.store_dir / control.LOG_NAME).read_text()
    assert "the daemon does not serve" in log

    shown = gg(repo, "daemon", "status", "--json", check=False)
    assert shown.returncode == 6
    assert "no event came out" in json.loads(shown.stdout)["unusable"]["why"]
    assert "could not serve" in gg(repo, "daemon", "status", check=False).stdout
    assert "could not serve" in gg(repo, "status").stdout
    assert json.loads(gg(repo, "status", "--json").stdout)["daemon"]["unusable"]

    # A hook now works in-process and starts no daemon (each would find the same).
    begin = gg(repo, "call", "begin", "--tool", "Write", "--writes", "a.txt", "--json",
               "--input", json.dumps({"file_path": "a.txt", "content": "a\n"}))
    call_id = json.loads(begin.stdout)["callId"]
    (repo / "a.txt").write_text("a\n")
    gg(repo, "hook", "claude-code", input=json.dumps({
        "hook_event_name": "PostToolUse", "session_id": "s1", "cwd": str(repo),
        "tool_name": "Bash", "tool_input": {"command": "true"}, "tool_use_id": "t1",
        "tool_response": {}}).encode(), check=False)
    starters = [pid for pid in filter(str.isdigit, os.listdir("/proc"))
                if _is_daemon_start(pid, repo)]
    assert starters == [], "a hook started a daemon although the last one could not hear"
    end = gg(repo, "call", "end", call_id, "--status", "succeeded", "--json")
    assert [p["path"] for p in json.loads(end.stdout)["filePatches"]] == ["a.txt"]
    assert control.running_pid(ws.store_dir) is None

    # An explicit start tries at once; a daemon that hears clears the record.
    gg(repo, "daemon", "start")
    try:
        assert control.unusable(ws.store_dir) is None
    finally:
        gg(repo, "daemon", "stop")


def _is_daemon_start(pid: str, repo: Path) -> bool:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"daemon" in words and os.fsencode(repo) in words


def test_a_watcher_that_goes_deaf_later_stops_the_daemon(repo: Path) -> None:
    """The barrier of a call does not come back: that call's tree is a full scan (still
    exact), and the daemon stops instead of making the next call wait as long."""
    gg(repo, "init", "--no-daemon")
    ws = discover(repo)
    sink: queue.SimpleQueue[Item] = queue.SimpleQueue()
    source = _source(repo, sink, hears_until_told=True)
    daemon = Daemon(ws, logging.getLogger("gitguard.test"), source=source, sink=sink)
    daemon.engine.deaf_after = 0.5          # not the 10 s a real daemon allows
    daemon.start(serve_socket=False)
    try:
        source.deaf.set()
        (repo / "unheard.txt").write_text("written while the watcher is deaf\n")
        trees: list[str] = []
        sink.put(Job(lambda: trees.append(daemon.engine.tree_now().tree)))
        daemon.run()                        # returns: the watcher proved deaf
        assert daemon.stopping and daemon.engine.deaf is not None
        assert trees and trees[0] == daemon.engine.snap.write_tree().tree, "full scan"
        assert "no event came out" in (control.unusable(ws.store_dir) or {}).get("why", "")
    finally:
        daemon.shutdown()
