"""`checkpoints.write` builds its JSON from plain data and numbers ids from a tally kept
with the cached index: the bytes and rows are what the pydantic models gave, and ids stay
unique and increasing across processes, days and stores written before the tally."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gitguard.api import Guard
from gitguard.models import Checkpoint, CheckpointIndexRow
from gitguard.snapshot import checkpoints
from gitguard.storage import durable, sealing


def _slow_file(guard: Guard, made: Checkpoint) -> bytes:
    """What write() put in the file before: the validated model, its run state sealed."""
    checked = Checkpoint(**made.model_dump())
    stored = checked.model_copy(update={"run_state": guard.store.privacy.seal_state(
        checked.run_state)})
    return durable.canonical_json(stored.to_json()) + b"\n"


def _scan_next_id(rows: list[CheckpointIndexRow], day: str) -> str:
    """next_id as it was: a scan of every row of the day."""
    prefix = f"ckpt_{day}_"
    numbers = [int(r.checkpoint_id[len(prefix):]) for r in rows
               if r.checkpoint_id.startswith(prefix) and r.checkpoint_id[len(prefix):].isdigit()]
    return f"{prefix}{max(numbers, default=0) + 1:03d}"


def _index_lines(guard: Guard) -> list[bytes]:
    return guard.store.index_path.read_bytes().splitlines(keepends=True)


def test_fast_write_gives_the_models_bytes_and_rows(repo: Path) -> None:
    guard = Guard.open(repo)
    states = [{"plan": ["a", "b"], "step": 3, "nested": {"x": 1.5, "y": None}},
              {"pair": (1, 2), "big": float("inf")},     # pydantic's JSON: a list, a null
              {"path": "caf\udce9.txt", "text": "\u00e9\u4e2d"},
              None]
    made = []
    for n, state in enumerate(states):
        (repo / f"f{n}.txt").write_text(f"{n}\n")
        made.append(guard.checkpoint(state=state, step_id=f"s{n}",
                                     messages=[{"role": "user", "content": f"m{n}"}]))
    entry = guard.begin_call("Edit", {"file_path": "f0.txt"}, writes=["f0.txt"])
    (repo / "f0.txt").write_text("edited\n")
    guard.end_call(entry.call_id, "succeeded", "ok")
    lines = _index_lines(guard)
    warm = checkpoints.read_index(guard.store).rows     # moved past its own appends
    rows = checkpoints.read_index_full(guard.store).rows
    assert warm == rows
    assert len(rows) == len(lines) == len(made) + 2
    for line, row in zip(lines, rows, strict=True):
        data = (guard.store.checkpoints_dir / row.file).read_bytes()
        checkpoints.forget()
        loaded = checkpoints.load(guard.store, row)
        assert data == _slow_file(guard, loaded), row.checkpoint_id
        slow_row = CheckpointIndexRow(**row.model_dump())
        assert line == durable.encode_line(slow_row.to_json()), row.checkpoint_id
    for one in made:        # the object returned is the file's reading (bar inf -> null)
        row = checkpoints.read_index(guard.store).find(one.checkpoint_id)
        assert (guard.store.checkpoints_dir / row.file).read_bytes() == _slow_file(guard, one)
        checkpoints.forget()
        fresh = checkpoints.load(guard.store, checkpoints.read_index(guard.store)
                                 .find(one.checkpoint_id))
        assert durable.canonical_json(one.to_json()) == durable.canonical_json(fresh.to_json())


def test_fast_write_seals_the_run_state(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITGUARD_ENCRYPT", "1")
    monkeypatch.setenv("GITGUARD_KEY", sealing.new_key_text())
    guard = Guard.open(repo)
    assert guard.store.privacy.encrypted
    made = guard.checkpoint(state={"secret plan": [1, 2]})
    row = checkpoints.read_index(guard.store).find(made.checkpoint_id)
    on_disk = json.loads((guard.store.checkpoints_dir / row.file).read_bytes())
    assert "secret plan" not in json.dumps(on_disk)
    checkpoints.forget()
    assert checkpoints.load(guard.store, row).run_state == {"secret plan": [1, 2]}


def test_ids_stay_unique_and_increasing_across_processes_and_days(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITGUARD_NOW", "2026-11-28T23:59:00Z")
    guard = Guard.open(repo)
    guard.checkpoint()
    # A store written by the old code: rows it numbered, one id not of the usual shape
    durable.append_jsonl(guard.store.index_path, [
        CheckpointIndexRow(checkpoint_id=f"ckpt_20261128_{n:03d}", session_id="old",
                           kind="manual", file=f"ckpt_20261128_{n:03d}.json", sha256="0" * 64,
                           created_at="2026-11-28T23:00:00.000Z",
                           snapshot_commit="0" * 40).to_json()
        for n in (7, 41)] + [CheckpointIndexRow(
            checkpoint_id="imported", session_id="old", kind="manual", file="imported.json",
            sha256="0" * 64, created_at="2026-11-28T23:00:00.000Z",
            snapshot_commit="0" * 40).to_json()])
    ids = [guard.checkpoint().checkpoint_id]
    assert ids == ["ckpt_20261128_042"]
    other = [sys.executable, "-c", "import sys; from gitguard.api import Guard; "
             "print(Guard.open(sys.argv[1]).checkpoint().checkpoint_id)", str(repo)]
    for now in ("2026-11-28T23:59:30Z", "2026-11-29T00:00:10Z"):
        env = {**os.environ, "GITGUARD_NOW": now}
        out = subprocess.run(other, env=env, capture_output=True, text=True, check=True)
        ids.append(out.stdout.strip())
        monkeypatch.setenv("GITGUARD_NOW", now)
        ids.append(guard.checkpoint().checkpoint_id)     # this process, its cache warm
        assert (checkpoints.read_index(guard.store).rows
                == checkpoints.read_index_full(guard.store).rows)
    assert ids == ["ckpt_20261128_042", "ckpt_20261128_043", "ckpt_20261128_044",
                   "ckpt_20261129_001", "ckpt_20261129_002"]
    rows = checkpoints.read_index_full(guard.store).rows
    assert len({r.checkpoint_id for r in rows}) == len(rows)
    for day in ("20261128", "20261129", "20261130"):
        monkeypatch.setenv("GITGUARD_NOW", f"{day[:4]}-{day[4:6]}-{day[6:]}T12:00:00Z")
        checkpoints.forget()
        cold = checkpoints.next_id(checkpoints.read_index(guard.store))
        assert cold == _scan_next_id(rows, day)
        warm = checkpoints.read_index(guard.store)       # from the cache, then appended to
        warm.add(rows[0].model_copy(update={"checkpoint_id": f"ckpt_{day}_500"}))
        assert checkpoints.next_id(warm) == _scan_next_id(warm.rows, day) == f"ckpt_{day}_501"
