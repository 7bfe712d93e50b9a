"""Concurrent fsyncs (gitguard.storage.fsync_pool, durable.write_then_name, a checkpoint's file and
directory), the fsync counter, and the daemon's per-request cost report."""

from __future__ import annotations

import functools
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from gitguard import verify
from gitguard.api import Guard
from gitguard.storage import durable, fsync_pool
from tests.helpers.commands import gg
from tests.helpers.daemons import request, running_daemon, store_of

NO_DAEMON = {"GITGUARD_NO_DAEMON": "1"}


def test_jobs_run_side_by_side() -> None:
    # Each job waits for the others at a barrier: they all finish only when they all run
    # at once (a single worker would break the barrier at its timeout).
    barrier = threading.Barrier(3, timeout=60)
    waits = [fsync_pool.run(lambda: (barrier.wait(), None)[1]) for _ in range(3)]
    fsync_pool.wait_all(waits)
    assert not barrier.broken


def test_a_failure_reaches_wait_and_wait_all_waits_for_every_job() -> None:
    done: list[int] = []

    def fail() -> None:
        raise OSError(5, "Input/output error")

    release = threading.Event()

    def slow() -> None:
        release.wait(60)
        done.append(1)

    waits = [fsync_pool.run(fail), fsync_pool.run(slow)]
    threading.Timer(0.05, release.set).start()
    with pytest.raises(OSError, match="Input/output error"):
        fsync_pool.wait_all(waits)
    assert done == [1], "wait_all returned before every job ended"


def test_the_counter_counts_every_fsync_and_overlapping_ones_once_in_busy(tmp_path: Path
                                                                          ) -> None:
    files = [tmp_path / f"f{i}" for i in range(3)]
    for file in files:
        file.write_bytes(b"x" * 4096)
    barrier = threading.Barrier(3, timeout=60)

    def sync(file: Path) -> None:
        fd = os.open(file, os.O_RDONLY)
        try:
            barrier.wait()
            durable.fsync(fd)
        finally:
            os.close(fd)

    count, wait_ns, busy_ns = durable.FSYNCS.snapshot()
    fsync_pool.wait_all([fsync_pool.run(functools.partial(sync, f)) for f in files])
    after = durable.FSYNCS.snapshot()
    assert after[0] - count == 3
    assert 0 < after[2] - busy_ns <= after[1] - wait_ns


def test_write_then_name_leaves_the_whole_file_and_counts_two_fsyncs(tmp_path: Path) -> None:
    data = os.urandom(100_000)
    before = durable.FSYNCS.snapshot()[0]
    durable.write_then_name(tmp_path / "ckpt.json", data)
    assert (tmp_path / "ckpt.json").read_bytes() == data
    assert durable.FSYNCS.snapshot()[0] - before == 2       # the file and its directory


def test_a_failed_fsync_leaves_no_file_and_is_raised(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(path: Path) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(durable, "fsync_dir", broken)
    with pytest.raises(OSError, match="Input/output error"):
        durable.write_then_name(tmp_path / "ckpt.json", b"{}")
    assert not (tmp_path / "ckpt.json").exists()


def test_a_checkpoint_row_is_written_only_after_its_file_and_directory_are_durable(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A power cut must never leave an index row naming a torn file: the row's append
    starts only after the file's fsync and its directory's have returned."""
    guard = Guard.init(repo)
    events: list[str] = []
    fsync, fsync_dir, append = durable.fsync, durable.fsync_dir, durable.append_jsonl
    index_path = guard.store.index_path

    def file_synced(fd: int) -> None:
        fsync(fd)
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".json"):
            events.append("file")

    def dir_synced(path: Path) -> None:
        fsync_dir(path)
        if path == guard.store.checkpoints_dir:
            events.append("dir")

    def appended(path: Path, records: Any) -> None:
        if path == index_path:
            events.append("row")
        append(path, records)

    monkeypatch.setattr(durable, "fsync", file_synced)
    monkeypatch.setattr(durable, "fsync_dir", dir_synced)
    monkeypatch.setattr(durable, "append_jsonl", appended)
    for step in range(3):
        (repo / "a.txt").write_text(f"{step}\n")
        events.clear()
        checkpoint = guard.checkpoint(kind="manual", step_id=f"s{step}")
        assert events.index("row") > events.index("file") and \
            events.index("row") > events.index("dir"), events
        assert (guard.store.checkpoints_dir / f"{checkpoint.checkpoint_id}.json").is_file()


def test_a_damaged_checkpoint_file_is_skipped_by_resume_and_named_by_verify(repo: Path
                                                                           ) -> None:
    """SIGKILL after a checkpoint's row (no ledger record names it yet), then its file
    damaged: resume skips it as corrupt and takes the newest complete one, verify names
    it, and the next call begins and ends."""
    guard = Guard.open(repo)
    guard.start_session("s1")
    first = guard.begin_call("Edit", {"file_path": "a.txt"}, writes=["a.txt"])
    (repo / "a.txt").write_text("one\n")
    guard.end_call(first.call_id)
    second = guard.begin_call("Edit", {"file_path": "a.txt"}, writes=["a.txt"])
    (repo / "a.txt").write_text("two\n")
    killed = gg(repo, "call", "end", second.call_id, "--status", "succeeded", check=False,
                env={"GITGUARD_FAULT": "checkpoint.after_index", **NO_DAEMON})
    assert killed.returncode == -9
    index = (store_of(repo) / "checkpoints" / "index.jsonl").read_bytes().splitlines()
    torn_id = json.loads(index[-1])["data"]["checkpointId"]
    torn = store_of(repo) / "checkpoints" / f"{torn_id}.json"
    torn.write_bytes(torn.read_bytes()[:40])
    named = {e.post_checkpoint_id for e in Guard.open(repo).ledger()}
    assert torn_id not in named, "the ledger never names a checkpoint before its row"

    result = json.loads(gg(repo, "resume", "--json", env=NO_DAEMON).stdout)
    assert result["checkpointId"] != torn_id
    assert {"checkpointId": torn_id, "file": None, "reason": "is corrupt: sha256 mismatch"} \
        in result["skipped"]
    assert second.call_id in result["uncertain"]
    problems = verify.report(Guard.open(repo).store, Guard.open(repo).snap).problems
    assert any(torn_id in p for p in problems), "verify names the damaged checkpoint"

    third = json.loads(gg(repo, "call", "begin", "--tool", "Edit", "--input",
                          '{"file_path": "b.txt"}', "--writes", "b.txt", "--json",
                          env=NO_DAEMON).stdout)
    (repo / "b.txt").write_text("three\n")
    ended = json.loads(gg(repo, "call", "end", third["callId"], "--status", "succeeded",
                          "--json", env=NO_DAEMON).stdout)
    assert ended["status"] == "succeeded" and ended["postCheckpointId"] != torn_id


def test_the_daemon_reports_each_call_requests_cost(repo: Path) -> None:
    with running_daemon(repo):
        begun = json.loads(gg(repo, "call", "begin", "--tool", "Edit", "--input",
                              '{"file_path": "a.txt"}', "--writes", "a.txt", "--json").stdout)
        (repo / "a.txt").write_text("new\n")
        gg(repo, "call", "end", begun["callId"], "--status", "succeeded")
        report = request(repo, "status")["result"]["requests"]
        shown = json.loads(gg(repo, "daemon", "status", "--json").stdout)["requests"]
    rows = report["recent"]
    assert [r["op"] for r in rows] == ["call.begin", "call.end"]
    assert report["requests"] == 2 and shown["requests"] == 2
    for row in rows:
        assert row["fsyncs"] >= 1 and row["wallMs"] > 0 and row["cpuMs"] > 0
        assert 0 < row["fsyncBusyMs"] <= row["fsyncMs"] + 1e-3
    # begin: its input, its pre checkpoint (file and directory, then its index row), the ledger
    # line
    assert rows[0]["fsyncs"] >= 2 and rows[1]["fsyncs"] >= 2
    assert report["fsyncs"] == sum(r["fsyncs"] for r in rows)
