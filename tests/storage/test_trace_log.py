"""Observability: trace events with durations, the per-session summary, following the
trace, and the store's file modes checked by `gitguard verify`."""

from __future__ import annotations

import json
import os
import selectors
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gitguard.api import Guard
from tests.helpers.commands import gg


def one_call(repo: Path, guard: Guard, name: str = "a.txt") -> str:
    entry = guard.begin_call("Write", {"file_path": name}, writes=[name])
    (repo / name).write_text("agent wrote this\n")
    guard.end_call(entry.call_id, "succeeded", "wrote it")
    return entry.call_id


def test_every_step_is_a_trace_event_with_a_duration(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    call_id = one_call(repo, guard)
    failed = guard.begin_call("Bash", {"command": "make"})
    guard.end_call(failed.call_id, "failed", "make: *** [all] Error 2")
    guard.checkpoint("manual", "step_2", messages=[{"role": "user", "content": "hello"}])
    events = json.loads(gg(repo, "trace", "--json").stdout)
    names = [e["name"] for e in events]
    # The second call began right after the first ended: the first's post checkpoint is
    # its pre (gitguard.snapshot.shared_checkpoint), so no checkpoint is written and none traced for
    # it.
    assert names == ["session.start", "checkpoint.pre", "tool.start", "checkpoint.post",
                     "tool.end", "tool.start", "checkpoint.post", "tool.end",
                     "checkpoint.manual"]
    assert events[5]["data"]["checkpointId"] == events[3]["data"]["checkpointId"]
    timed = [e for e in events if e["type"] in ("checkpoint", "tool")]
    assert all(e["durationMs"] > 0 for e in timed)
    end = next(e for e in events if e["name"] == "tool.end")
    assert end["data"]["callId"] == call_id and end["data"]["toolMs"] >= 0
    assert end["data"]["bytes"] > len("wrote it"), "the patch counts too"
    assert events[-1]["data"]["bytes"] > 0 and events[-1]["data"]["files"] == 0

    summary = json.loads(gg(repo, "trace", "--summary", "--json").stdout)
    assert [s["sessionId"] for s in summary] == ["s1"]
    row = summary[0]
    assert (row["calls"], row["failed"], row["checkpoints"]) == (2, 1, 4)
    assert row["snapshotMs"] > 0 and row["overheadMs"] > 0
    assert row["bytesStored"] == sum(e["data"].get("bytes", 0) for e in events)
    human = gg(repo, "trace", "--summary").stdout
    assert "in tools" in human and "snapshots" in human and human.splitlines()[1].startswith("s1")
    lines = gg(repo, "trace", "--session", "s1").stdout.splitlines()
    assert len(lines) == len(events) and "checkpoint.manual" in lines[-1]


def test_trace_follow_prints_events_as_they_happen(repo: Path) -> None:
    guard = Guard.open(repo)
    one_call(repo, guard, "first.txt")
    proc = subprocess.Popen([sys.executable, "-m", "gitguard", "trace", "--follow", "--json"],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ)
    seen: list[dict[str, Any]] = []
    pending = b""

    def read_until(name: str, call_id: str) -> None:
        """Poll the follower's output (30 s at most) until it shows `name` for `call_id`."""
        nonlocal pending
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if selector.select(timeout=0.5):
                pending += os.read(fd, 65536)
            *lines, pending = pending.split(b"\n")
            seen.extend(json.loads(line) for line in lines if line)
            if any(e["name"] == name and e["data"].get("callId") == call_id for e in seen):
                return
        raise AssertionError(f"no {name} for {call_id} within 30 s: {seen}")

    try:
        read_until("tool.end", "call_1")      # what was there before following began
        call_id = one_call(repo, guard, "second.txt")
        read_until("tool.end", call_id)       # what happened while following
        assert [e["name"] for e in seen].count("tool.start") == 2
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_store_files_are_private_and_verify_checks_it(repo: Path) -> None:
    guard = Guard.open(repo)
    one_call(repo, guard)
    guard.checkpoint(state={"x": 1}, messages=[{"content": "m"}])
    store = repo / ".git" / "gitguard"
    for path in [store, *store.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), f"{path} is {mode:o}"
    gg(repo, "verify")
    artifact = next((store / "artifacts").iterdir())
    artifact.chmod(0o644)
    (store / "checkpoints").chmod(0o755)
    proc = gg(repo, "verify", check=False)
    assert proc.returncode == 1
    assert f"{artifact} is 0644, should be 0600 (fix: chmod 600 {artifact})" in proc.stdout
    assert f"{store / 'checkpoints'} is 0755, should be 0700" in proc.stdout
    artifact.chmod(0o600)
    (store / "checkpoints").chmod(0o700)
    gg(repo, "verify")


def test_plain_directory_store_is_private(tmp_path: Path) -> None:
    work = tmp_path / "plain"
    work.mkdir()
    gg(work, "init")
    objects = work / ".agent-runtime" / "objects.git"
    assert stat.S_IMODE(objects.stat().st_mode) == 0o700
    gg(work, "verify")


def test_a_trace_event_built_directly_equals_the_models_dump() -> None:
    """`trace.event_json` skips the model for plain scalar data: the same JSON either way,
    and anything else still goes through the model."""
    from gitguard.models import TraceEvent
    from gitguard.storage import durable, trace_log

    cases: list[tuple[float | None, dict[str, object]]] = [
        (12.34567, {"callId": "call_1", "files": 2, "ok": True, "toolMs": 3.25, "none": None}),
        (None, {}),
        (1.0, {"paths": ["a", "b"], "where": Path("x/y")}),
        (float("nan"), {"n": float("inf")}),
    ]
    for duration, data in cases:
        fast = trace_log.event_json("tool", "tool.end", session_id="s1", duration_ms=duration,
                                    data=dict(data))
        slow = TraceEvent(at=fast["at"], type="tool", name="tool.end", session_id="s1",
                          duration_ms=None if duration is None else round(duration, 3),
                          data=dict(data)).to_json()
        assert durable.canonical_json(fast) == durable.canonical_json(slow)   # NaN != NaN
