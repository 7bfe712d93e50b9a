"""The demo chapter of the watcher daemon: live attribution and O(changed) snapshots."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from gitguard.api import Guard
from gitguard.ipc import client, control

Echo = Callable[[str], None]


def chapter_daemon(echo: Echo, repo: Path, guard: Guard) -> None:
    echo("== Watcher daemon: who changed what, and snapshots that cost what changed ==")
    started = control.start(guard.ws)
    store = str(guard.store.root)
    try:
        info = control.status(guard.ws)
        echo(f"daemon started (pid {started.pid}): {info.get('watches')} inotify watches, "
             f"start-up scan {info.get('startMs')} ms, {int(info.get('rssKb', 0)) // 1024} MiB")

        (repo / "NOTES.md").write_text("my notes, edited while the agent is idle\n")
        echo("user: edits NOTES.md between calls")

        with guard.tool_call("Edit", {"file_path": "app.py", "old_string": "Hello, ",
                                      "new_string": "Hi, "}, writes=["app.py"]) as call:
            text = (repo / "app.py").read_text().replace("Hello, ", "Hi, ")
            (repo / "app.py").write_text(text)
        echo(f"agent: {call.call_id} Edit app.py (declared path)")

        command = "echo one > a.txt && echo two > b.txt && echo 3 > VERSION"
        with guard.tool_call("Bash", {"command": command}) as call:
            subprocess.run(["sh", "-c", command], cwd=repo, check=True)
        echo(f"agent: {call.call_id} Bash `{command}` (3 files)")

        command = "sed -i 's/one/ONE/' a.txt"
        with guard.tool_call("Bash", {"command": command}) as call:
            subprocess.run(["sh", "-c", command], cwd=repo, check=True)
            tmp = repo / ".a.txt.swp"       # meanwhile the user's editor saves a.txt too
            tmp.write_text("ONE, and a line the user typed\n")
            os.replace(tmp, repo / "a.txt")
        echo(f"agent: {call.call_id} Bash `{command}` while the user saved a.txt in an editor")

        client.request(store, "flush")
        echo("status (owner, confidence) from the daemon's attribution records:")
        for dirty in guard.status().dirty:
            echo(f"  {dirty.change} {dirty.path:<10} {dirty.owner:<7} ({dirty.confidence})")

        began = time.perf_counter()
        with guard.tool_call("Write", {"file_path": "c.txt", "content": "c\n"},
                             writes=["c.txt"]) as call:
            (repo / "c.txt").write_text("c\n")
        echo(f"agent: {call.call_id} Write c.txt, begin and end through the daemon: "
             f"{(time.perf_counter() - began) * 1000:.1f} ms")
        counts = control.status(guard.ws)
        echo(f"snapshots: {counts.get('incremental', 0)} built from the previous tree and "
             f"the changed paths, {counts.get('full_scans', 0)} full scan (at start); "
             f"{counts.get('records', 0)} attribution records")
    finally:
        control.stop(guard.ws)
    echo("daemon stopped; the stat cache is current, so the CLI alone carries on")
