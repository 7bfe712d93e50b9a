"""What `gitguard gc` compacts: the trace into a compressed segment, the ledger's
artifacts into one bundle, the pruned-checkpoint record into ranges. Each compacted form
reads back exactly what the loose form held, and a crash between its two steps leaves
both forms readable."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from gitguard import verify
from gitguard.api import Guard
from gitguard.errors import CorruptRecord
from gitguard.snapshot import checkpoints
from gitguard.storage import (
    artifact_bundle,
    artifact_journal,
    dir_compaction,
    durable,
    sealing,
    trace_log,
    trace_view,
)
from tests.helpers.commands import gg
from tests.helpers.storage import GC_ENV, calls


def artifacts_of(guard: Guard) -> dict[str, bytes]:
    refs = [r for e in guard.ledger()
            for r in (e.input_ref, e.result_ref, *(p.patch_ref for p in e.file_patches)) if r]
    return {r: guard.store.read_artifact(r) for r in refs}


def test_gc_compacts_trace_and_artifacts_and_reads_back_the_same(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    calls(repo, guard, 6)
    events = [e.to_json() for e in trace_log.read(guard.store)]
    stored = artifacts_of(guard)
    assert len(stored) == 18
    loaded = {r.checkpoint_id: guard.load_checkpoint(r.checkpoint_id).to_json()
              for r in guard.checkpoints()}
    trees = {c: guard.snap.tree_of(v["snapshotCommit"]) for c, v in loaded.items()}
    gg(repo, "gc", env=GC_ENV)
    fresh = Guard.open(repo)
    store = fresh.store
    # The kept checkpoints gc rewrote are stored compressed and load as they did, but for
    # the new snapshot commit (same tree).
    rewritten = [r for r in fresh.checkpoints() if r.file != f"{r.checkpoint_id}.json"]
    assert rewritten
    for row in rewritten:
        assert (store.checkpoints_dir / row.file).read_bytes()[:1] != b"{"
        now = fresh.load_checkpoint(row.checkpoint_id).to_json()
        was = loaded[row.checkpoint_id]
        assert {**now, "snapshotCommit": None} == {**was, "snapshotCommit": None}
        assert fresh.snap.tree_of(now["snapshotCommit"]) == trees[row.checkpoint_id]
    # The trace: every event still there, in order, now from the segment; gc's own after.
    after = [e.to_json() for e in trace_log.read(store)]
    assert after[:len(events)] == events
    assert [e["name"] for e in after[len(events):]] == ["gc.pack", "gc.pack", "gc.run"]
    assert trace_log.read_segment(store).records == after[:len(events) + 1]
    assert [e["name"] for e in durable.read_jsonl(store.trace_path).records] == ["gc.pack",
                                                                                 "gc.run"]
    shown = json.loads(gg(repo, "trace", "--json").stdout)
    assert shown == after
    followed = trace_view.follow(store, poll_seconds=0.01)
    assert [next(followed).to_json() for _ in after] == after
    # The artifacts: one bundle, each reads back byte for byte, verify accepts it.
    names = sorted(p.name for p in store.artifacts_dir.iterdir())
    assert len(names) == 1 and artifact_bundle.is_bundle(names[0])
    assert artifacts_of(fresh) == stored
    assert fresh.diff("call_3") == guard.diff("call_3")
    assert verify.problems(store, fresh.snap) == []
    # More calls and a second gc: one bundle again, one segment, all still readable.
    fresh.start_session("s2")
    calls(repo, fresh, 3, start=6)
    more = artifacts_of(fresh)
    before_second = [e.to_json() for e in trace_log.read(store)]
    gg(repo, "gc", env=GC_ENV)
    again = Guard.open(repo)
    assert [p.name for p in again.store.artifacts_dir.iterdir()
            if artifact_bundle.is_bundle(p.name)] != names
    assert len(list(again.store.artifacts_dir.iterdir())) == 1
    assert artifacts_of(again) == more
    assert [e.to_json() for e in trace_log.read(again.store)][:len(before_second)] == before_second
    gg(repo, "verify")


def test_a_crash_between_segment_and_truncation_shows_each_event_once(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    calls(repo, guard, 2)
    store = guard.store
    live = store.trace_path.read_bytes()
    events = trace_log.read_records(store)
    with store.writing():
        assert trace_log.compact(store, "2000-01-01") == 0
    assert store.trace_path.read_bytes() == b""
    store.trace_path.write_bytes(live)          # as if killed before trace.jsonl was emptied
    assert trace_log.read_records(store) == events
    calls(repo, guard, 1, start=2)              # appends after the absorbed bytes count
    grown = trace_log.read_records(store)
    assert grown[:len(events)] == events and len(grown) > len(events)
    with store.writing():
        trace_log.compact(store, "2000-01-01")
    assert trace_log.read_records(store) == grown
    # Old events go by the cutoff, from the segment as from the live file.
    with store.writing():
        dropped = trace_log.compact(store, grown[3]["at"])
    assert trace_log.read_records(store) == [r for r in grown if r["at"] >= grown[3]["at"]]
    assert dropped == sum(1 for r in grown if r["at"] < grown[3]["at"])


def test_a_damaged_segment_or_bundle_is_reported_not_misread(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    calls(repo, guard, 2)
    gg(repo, "gc", env=GC_ENV)
    store = Guard.open(repo).store
    raw = bytearray(store.trace_segment_path.read_bytes())
    raw[-3] ^= 0xFF
    store.trace_segment_path.write_bytes(bytes(raw))
    with pytest.raises(CorruptRecord, match="trace.segment"):
        trace_log.read(store)
    bundle = artifact_bundle.bundles(store.artifacts_dir)[0]
    data = bytearray(bundle.read_bytes())
    data[-3] ^= 0xFF
    bundle.write_bytes(bytes(data))
    fresh = Guard.open(repo)
    with pytest.raises(CorruptRecord, match="bundle"):
        fresh.store.read_artifact("artifacts/input_call_1.json")


def test_a_crash_after_the_bundle_leaves_files_and_bundle_both_readable(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    calls(repo, guard, 3)
    store = guard.store
    stored = artifacts_of(guard)
    copies = Path(str(store.artifacts_dir) + ".copy")
    shutil.copytree(store.artifacts_dir, copies)
    journals = artifact_journal.journals(store.artifacts_dir)
    journaled = {n: d for path in journals for n, d in artifact_journal.read(path).items()}
    names = sorted(journaled)
    with store.writing():
        artifact_bundle.rebundle(store.artifacts_dir, names, [], journaled, journals)
    assert [p.name for p in store.artifacts_dir.iterdir() if p.name.startswith("journal")] == []
    for path in copies.iterdir():                # the journal comes back: killed before unlink
        shutil.copy2(path, store.artifacts_dir / path.name)
    assert artifacts_of(Guard.open(repo)) == stored
    with store.writing():                        # the next gc finishes the move
        artifact_bundle.rebundle(store.artifacts_dir, names, [], journaled, journals)
    assert len(list(store.artifacts_dir.iterdir())) == 1
    assert artifacts_of(Guard.open(repo)) == stored
    # What nothing names any more leaves the bundle at the next rewrite.
    with store.writing():
        kept = artifact_bundle.rebundle(store.artifacts_dir, names[:2], [])
    assert kept == sorted(names[:2])


def test_bundled_artifacts_stay_sealed_and_open_with_the_key(repo: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    monkeypatch.setenv("GITGUARD_KEY", sealing.new_key_text())
    (repo / ".gitguard.toml").write_text("[encryption]\nenabled = true\n")
    guard = Guard.open(repo)
    guard.start_session("s1")
    secret = "PLAINTEXT-MARKER-0c1d"
    entry = guard.begin_call("Write", {"file_path": "a.txt", "content": secret},
                             writes=["a.txt"])
    (repo / "a.txt").write_text("x\n")
    guard.end_call(entry.call_id, "succeeded", f"wrote {secret}")
    gg(repo, "gc", env=GC_ENV)
    bundle = artifact_bundle.bundles(guard.store.artifacts_dir)[0]
    body = artifact_bundle.open_bundle(bundle)
    assert secret.encode() not in body.read(f"result_{entry.call_id}.txt")
    fresh = Guard.open(repo)
    assert fresh.store.read_artifact(f"artifacts/result_{entry.call_id}.txt") == \
        f"wrote {secret}".encode()
    monkeypatch.setenv("GITGUARD_KEY", sealing.new_key_text())
    with pytest.raises(sealing.KeyProblem):
        Guard.open(repo).store.read_artifact(f"artifacts/result_{entry.call_id}.txt")


def test_pruned_ranges_name_the_same_ids_as_one_line_each(repo: Path) -> None:
    ids = [f"ckpt_20261129_{n:03d}" for n in (*range(2, 392), 400, 999, 1000, 1001)]
    ids += ["ckpt_20261130_001", "ckpt_x_0005", "odd"]
    record = checkpoints.pruned_record(ids)
    assert len(record["ranges"]) == 4 and record["checkpointIds"] == ["ckpt_x_0005", "odd"]
    store = Guard.open(repo).store
    old_style = [{"checkpointId": "ckpt_20261128_007", "prunedAt": "2026-11-28T00:00:00Z"}]
    with store.writing():
        durable.append_jsonl(store.pruned_path, old_style)
        durable.append_jsonl(store.pruned_path, [record])
    assert checkpoints.pruned_ids(store) == {*ids, "ckpt_20261128_007"}


def test_shrink_keeps_every_entry_and_finishes_a_killed_swap(tmp_path: Path) -> None:
    directory = tmp_path / "artifacts"
    directory.mkdir()
    for n in range(3000):
        (directory / f"result_call_{n:05d}.txt").write_bytes(b"x")
    grown = directory.stat().st_size
    for n in range(2990):
        (directory / f"result_call_{n:05d}.txt").unlink()
    (directory / "incomplete").mkdir()
    (directory / "incomplete" / "ckpt.json").write_bytes(b"{}")
    before = {p.name: p.stat().st_ino for p in directory.iterdir()}
    with open(directory / "result_call_02995.txt", "ab") as held:   # a writer keeps it open
        assert dir_compaction.shrink(directory, min_bytes=1) is True
        held.write(b"more")
    assert {p.name: p.stat().st_ino for p in directory.iterdir()} == before
    assert (directory / "result_call_02995.txt").read_bytes() == b"xmore"
    assert (directory / "incomplete" / "ckpt.json").read_bytes() == b"{}"
    assert directory.stat().st_size <= grown
    assert not dir_compaction.swap_path(directory).exists()
    # Killed after the exchange: the swap directory holds the old one, with an entry the
    # new one lacks; the next shrink moves it back before anything else.
    swap = dir_compaction.swap_path(directory)
    swap.mkdir()
    (swap / "late.txt").write_bytes(b"late")
    os.link(directory / "result_call_02999.txt", swap / "result_call_02999.txt")
    assert dir_compaction.shrink(directory) is False       # small now: only the finishing
    assert (directory / "late.txt").read_bytes() == b"late" and not swap.exists()
    assert len(list(directory.iterdir())) == len(before) + 1
