"""Storage rows: what 1,000 one-line agent edits leave in the repository after `gitguard gc`.

The shadow-repository method's first snapshot alone took 451 MB on the 100k-file
repository; the claim here is that 1,000 edits add at most 2 MB of objects once
`gitguard gc` has run, and that the loose-object count stays below git's auto-gc
threshold all along (so the user's `git commit` never starts `git gc --auto` because
of gitguard). The edits go through the Python API without a daemon, so `call end`'s
own packing check is what keeps the loose count down.

    python -m bench.run --only storage --sizes 100k
    BENCH_STORAGE_EDITS=200 python -m bench.run --only storage --sizes 1k   # quicker

This is a report: nothing asserts a threshold. Every figure is in the row's note.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.cases import CaseContext, Measurement, Skip, case
from bench.probes import Editor, IndexProbe
from bench.shell import du_bytes

# Read at import: the runner rebuilds the environment before cases run.
EDITS = int(os.environ.get("BENCH_STORAGE_EDITS", "1000"))
GG_GC_ROW = f"gitguard storage: {EDITS} edits then gc"
GIT_AUTO_GC = 6700


def _modules() -> tuple[Any, Any, Any, Any]:
    try:
        names = ("gitguard.api", "gitguard.gc", "gitguard.packing", "gitguard.verify")
        return tuple(importlib.import_module(n) for n in names)  # type: ignore[return-value]
    except Exception as exc:  # noqa: BLE001 - a broken import means "skip this row"
        raise Skip(f"gitguard storage modules not usable: {type(exc).__name__}: {exc}") from exc


def _object_bytes(objects: Path) -> int:
    """Packs and loose objects, by file size (du would count fan-out directories too)."""
    total = sum(p.stat().st_size for p in (objects / "pack").iterdir() if p.is_file())
    for fan in range(256):
        directory = objects / f"{fan:02x}"
        if directory.is_dir():
            total += sum(p.stat().st_size for p in directory.iterdir())
    return total


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


@case(GG_GC_ROW, group="storage", target="objects <= 2 MB, loose < 6700", first=True)
def edits_then_gc(ctx: CaseContext) -> Measurement:
    api, gc, packing, verify = _modules()
    repo = ctx.repo
    objects = repo / ".git" / "objects"
    probe = IndexProbe(repo)
    git_before, objects_before = du_bytes(repo / ".git"), _object_bytes(objects)
    guard = api.Guard.init(repo)
    editor = Editor(repo)
    calls_ms: list[float] = []
    max_loose = 0
    try:
        guard.checkpoint(kind="manual", step_id="s0")
        for i in range(EDITS):
            rel = editor.pick()
            started = time.perf_counter()
            entry = guard.begin_call("write_file", {"path": rel}, writes=[rel])
            editor.touch(rel)
            guard.end_call(entry.call_id, "succeeded", "ok")
            calls_ms.append((time.perf_counter() - started) * 1000)
            max_loose = max(max_loose, packing.loose_count(objects)[0])
            probe.check()
            if i % 100 == 99:
                print(f"  storage: {i + 1} edits, median {statistics.median(calls_ms):.0f} ms/"
                      f"call, max loose {max_loose}", file=sys.stderr, flush=True)
        auto = subprocess.run(["git", "-c", "gc.autoDetach=false", "gc", "--auto"], cwd=repo,
                              capture_output=True, text=True)
        auto_idle = auto.returncode == 0 and not (auto.stdout + auto.stderr).strip()
        objects_mid = _object_bytes(objects) - objects_before
        guard.end_session()
        # A finished session: keep its first and last checkpoints (the default policy
        # keeps a session active within the last 7 days whole).
        policy = dataclasses.replace(guard.settings.retention, keep_days=0.0)
        settings = dataclasses.replace(guard.settings, retention=policy)
        report = gc.run(guard.store, guard.snap, settings)
    finally:
        guard.close()
    probe.check()
    objects_after = _object_bytes(objects) - objects_before
    git_after = du_bytes(repo / ".git") - git_before
    store = repo / ".git" / "gitguard"
    parts = {p.name: du_bytes(p) for p in store.iterdir()}
    subprocess.run(["git", "gc", "--prune=now", "-q"], cwd=repo, check=True)
    fresh = api.Guard.open(repo)
    problems = verify.problems(fresh.store, fresh.snap)
    restorable = sum(1 for row in fresh.checkpoints() if _restores(repo, fresh, row))
    kept = len(fresh.checkpoints())
    note = (f"max loose {max_loose} (<{GIT_AUTO_GC}), git gc --auto "
            f"{'idle' if auto_idle else 'RAN'}; {restorable}/{kept} kept ckpts restore after "
            f"git gc --prune=now{'' if not problems else ' PROBLEMS: ' + problems[0]}; "
            f"objects {_mb(objects_mid)} before gc; .git +{_mb(git_after)} in all: ledger "
            f"{_mb(parts.get('ledger.jsonl', 0))}, trace {_mb(parts.get('trace.jsonl', 0))}, "
            f"artifacts {_mb(parts.get('artifacts', 0))}, checkpoints "
            f"{_mb(parts.get('checkpoints', 0))}, stat cache {_mb(parts.get('stat.index', 0))}"
            f"; {EDITS} edits, median {statistics.median(calls_ms):.0f} ms/call; "
            f"time is gc's")
    print(f"  storage: {note}", file=sys.stderr, flush=True)
    return Measurement((report.duration_ms,), objects_after, note, probe.note())


def _restores(repo: Path, guard: Any, row: Any) -> bool:
    """The checkpoint loads and every blob of its snapshot tree reads back."""
    checkpoint = guard.load_checkpoint(row.checkpoint_id)
    listing = subprocess.run(["git", "ls-tree", "-r", "--object-only", checkpoint.snapshot_commit],
                             cwd=repo, capture_output=True, text=True)
    if listing.returncode != 0:
        return False
    check = subprocess.run(["git", "cat-file", "--batch-check"], cwd=repo, input=listing.stdout,
                           capture_output=True, text=True)
    return check.returncode == 0 and "missing" not in check.stdout
