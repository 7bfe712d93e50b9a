"""Storage rows: what 1,000 one-line agent edits leave in the repository after `gitguard gc`.

The shadow-repository method's first snapshot alone took 451 MB on the 100k-file
repository; the claim here is that 1,000 edits add at most 2 MB of objects once
`gitguard gc` has run, and that the loose-object count stays below git's auto-gc
threshold all along (so the user's `git commit` never starts `git gc --auto` because
of gitguard). The row's value is the whole growth of `.git` after gc (objects, the
ledger, trace, checkpoints, artifacts and every other store file), and its note lists
every part.

Three rows: each edit to a different file (the objects' worst case), 1,000 edits
round-robin over a working set of 50 files (an agent editing the same files again and
again; the versions delta against each other), both with gc as configured by default
(ending with the whole-repository repack, gitguard.retention.repack), and the distinct-files
case with that repack turned off (gitguard's own pack only; the note prints its floor).

The edits go through the Python API. By default a gitguard daemon runs for the
repository, so the API's calls go through it (gitguard/ipc/api_client.py) and each costs
O(changed), as an agent's hooks do; without a daemon each call scans the whole
repository (~30 minutes for 1,000 calls at 100k files). BENCH_STORAGE_DAEMON=0 drives
them in-process without one; then `call end`'s own packing check keeps the loose
count down. The note says which way the row was driven.

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
DAEMON = os.environ.get("BENCH_STORAGE_DAEMON", "1") not in ("", "0")
WORKING_SET = 50
GG_GC_ROW = f"gitguard storage: {EDITS} edits then gc"
GG_SET_ROW = f"gitguard storage: {EDITS} edits to {WORKING_SET} files then gc"
GG_OWN_ROW = f"gitguard storage: {EDITS} edits then gc --no-repack-repository"
GIT_AUTO_GC = 6700
_PROJECT = Path(__file__).resolve().parents[1]


def _gg(repo: Path, *args: str) -> None:
    """The real CLI, as an agent's setup runs it (daemon start and stop)."""
    path = os.pathsep.join(p for p in (str(_PROJECT), os.environ.get("PYTHONPATH")) if p)
    env = {k: v for k, v in os.environ.items() if k != "GITGUARD_NO_DAEMON"}
    subprocess.run([sys.executable, "-m", "gitguard", *args], cwd=repo, check=True,
                   capture_output=True, env={**env, "PYTHONPATH": path})


def _modules() -> tuple[Any, Any, Any, Any]:
    try:
        names = ("gitguard.api", "gitguard.retention.collect", "gitguard.git.packing",
                 "gitguard.verify")
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


def _git_bytes(git_dir: Path) -> tuple[int, int, int]:
    """`du -sb` of .git without its empty objects/xx fan-out directories, and how many
    there were and their bytes. The daemon makes all 256 at start (pack_writer.Fanouts: a
    mkdir kept off the call path, ~1 MiB of directory blocks) and gc's `git prune-packed`
    removes the empty ones, so counted they would make "after gc" fall below a baseline
    taken with the daemon running. They hold nothing the edits added; a fan-out directory
    that holds an object counts whole (its blocks are part of that loose object's cost)."""
    objects = git_dir / "objects"
    count = size = 0
    for fan in range(256):
        directory = objects / f"{fan:02x}"
        try:
            if next(os.scandir(directory), None) is None:
                count += 1
                size += directory.stat().st_size
        except (FileNotFoundError, NotADirectoryError):
            continue
    return du_bytes(git_dir) - size, count, size


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


class WorkingSetEditor(Editor):
    """One line appended per edit, round-robin over a fixed working set of tracked files
    (an agent editing the same files again and again)."""

    def __init__(self, repo: Path, files: int) -> None:
        super().__init__(repo)
        self._set = [self._paths[(i * 7919 + 13) % len(self._paths)] for i in range(files)]

    def pick(self) -> str:
        return self._set[self._count % len(self._set)]


@case(GG_GC_ROW, group="storage", target=".git growth <= 2 MB, loose < 6700", first=True)
def edits_then_gc(ctx: CaseContext) -> Measurement:
    """Each edit to a different file, and gc as configured by default: it ends with the
    whole-repository repack (gitguard.retention.repack), so gitguard's objects are deltas."""
    return _edits_then_gc(ctx, Editor(ctx.repo), floor=False, repack=True)


@case(GG_SET_ROW, group="storage", target=".git growth <= 2 MB, loose < 6700", first=True)
def working_set_then_gc(ctx: CaseContext) -> Measurement:
    return _edits_then_gc(ctx, WorkingSetEditor(ctx.repo, WORKING_SET), floor=False,
                          repack=True)


@case(GG_OWN_ROW, group="storage", target="report (the floor without the repack)",
      first=True)
def edits_then_own_gc(ctx: CaseContext) -> Measurement:
    """The distinct-files row with the repository repack turned off: gitguard's pack alone,
    whose objects cannot be deltas of the user's; the note prints that floor (`_floor`)."""
    return _edits_then_gc(ctx, Editor(ctx.repo), floor=True, repack=False)


def _edits_then_gc(ctx: CaseContext, editor: Editor, floor: bool,
                   repack: bool) -> Measurement:
    api, gc, packing, verify = _modules()
    repo = ctx.repo
    if repack:
        # The pristine copy is repacked the same way first: the growth then counts what
        # gitguard added, not what git's repack of the user's own objects saved or cost.
        subprocess.run(["git", "repack", "-a", "-d", "-l", "-q", "--cruft"], cwd=repo,
                       check=True)
    objects = repo / ".git" / "objects"
    probe = IndexProbe(repo)
    git_before, objects_before = _git_bytes(repo / ".git")[0], _object_bytes(objects)
    guard = api.Guard.init(repo)
    calls_ms: list[float] = []
    max_loose = 0
    daemon_running = False
    try:
        if DAEMON:
            try:
                _gg(repo, "daemon", "start")
                daemon_running = True
            except subprocess.CalledProcessError as exc:
                raise Skip(f"the gitguard daemon does not start here: {exc.stderr!r}") from exc
        guard.checkpoint(kind="manual", step_id="s0")
        # What the edits add is measured from here: the store's set-up (the stat index seeded
        # from the user's index, the first snapshot) is the first-snapshot row's figure.
        git_start, *fans_start = _git_bytes(repo / ".git")
        objects_start = _object_bytes(objects)
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
        if daemon_running:       # gc runs in-process, as `gitguard gc` does
            _gg(repo, "daemon", "stop")
            daemon_running = False
        auto = subprocess.run(["git", "-c", "gc.autoDetach=false", "gc", "--auto"], cwd=repo,
                              capture_output=True, text=True)
        auto_idle = auto.returncode == 0 and not (auto.stdout + auto.stderr).strip()
        objects_mid = _object_bytes(objects) - objects_start
        guard.end_session()
        # A finished session: keep its first and last checkpoints (the default policy
        # keeps a session active within the last 7 days whole).
        policy = dataclasses.replace(guard.settings.retention, keep_days=0.0)
        settings = dataclasses.replace(guard.settings, retention=policy)
        report = gc.run(guard.store, guard.snap, settings, repack_repository=repack)
    finally:
        if daemon_running:
            _gg(repo, "daemon", "stop")
        guard.close()
    probe.check()
    objects_after = _object_bytes(objects) - objects_start
    git_end, *fans_end = _git_bytes(repo / ".git")
    git_after = git_end - git_start
    setup = git_start - git_before
    store = repo / ".git" / "gitguard"
    parts = {p.name: du_bytes(p) for p in store.iterdir()}
    # Before the user's git gc, which may delta our objects against the user's.
    floor_note = f"; objects' floor {_floor(repo)}" if floor else ""
    subprocess.run(["git", "gc", "--prune=now", "-q"], cwd=repo, check=True)
    fresh = api.Guard.open(repo)
    problems = verify.problems(fresh.store, fresh.snap)
    restorable = sum(1 for row in fresh.checkpoints() if _restores(repo, fresh, row))
    kept = len(fresh.checkpoints())
    big = sorted(((n, b) for n, b in parts.items() if b >= 10_000), key=lambda kv: -kv[1])
    small = sum(parts.values()) - sum(b for _, b in big)
    store_parts = ", ".join([*(f"{name} {_mb(size)}" for name, size in big),
                             f"{len(parts) - len(big)} other files {_mb(small)}"])
    driven = ("through a running daemon (Python API -> gitguard/ipc/api_client.py)" if DAEMON
              else "in-process, no daemon")
    note = (f"the edits added {_mb(git_after)} to .git after gc, objects {_mb(objects_after)} "
            f"of it; store now {_mb(sum(parts.values()))} ({store_parts}); set-up before the "
            f"first edit +{_mb(setup)} (objects {_mb(objects_start - objects_before)}); "
            f"empty objects/xx dirs not counted: {fans_start[0]} ({_mb(fans_start[1])}) "
            f"before the first edit, {fans_end[0]} ({_mb(fans_end[1])}) after gc; objects "
            f"{_mb(objects_mid)} before gc; max loose {max_loose} (<{GIT_AUTO_GC}), git gc "
            f"--auto {'idle' if auto_idle else 'RAN'}; {restorable}/{kept} kept ckpts restore "
            f"after git gc --prune=now{'' if not problems else ' PROBLEMS: ' + problems[0]}"
            f"{floor_note}{_repack_note(report)}; "
            f"{EDITS} edits driven {driven}, median {statistics.median(calls_ms):.0f} ms/call; "
            f"time is gc's")
    print(f"  storage: {note}", file=sys.stderr, flush=True)
    return Measurement((report.duration_ms,), git_after, note, probe.note())


def _repack_note(report: Any) -> str:
    repacked = getattr(report, "repack", None)
    if repacked is None:
        return ""
    return (f"; repository repack {repacked.packs_before} -> {repacked.packs_after} packs, "
            f"{_mb(repacked.bytes_before)} -> {_mb(repacked.bytes_after)} in "
            f"{repacked.duration_ms / 1000:.1f} s")


def _floor(repo: Path) -> str:
    """The objects only gitguard's refs reach (not the user's refs, index or HEAD), by
    type and size on disk: what a pack of gitguard's own must hold however it is written,
    since its deltas cannot name the user's objects as bases."""
    user = ["HEAD", "--branches", "--tags", "--remotes", "--indexed-objects"]
    listed = subprocess.run(["git", "rev-list", "--objects", "--glob=refs/gitguard/*",
                             "--not", *user], cwd=repo, capture_output=True, text=True,
                            check=True).stdout
    oids = "".join(line.split(" ", 1)[0] + "\n" for line in listed.splitlines() if line)
    sizes = subprocess.run(["git", "cat-file", "--batch-check=%(objecttype) %(objectsize:disk)"],
                           cwd=repo, input=oids, capture_output=True, text=True,
                           check=True).stdout
    count: dict[str, int] = {}
    total: dict[str, int] = {}
    for line in sizes.splitlines():
        kind, _, size = line.partition(" ")
        count[kind] = count.get(kind, 0) + 1
        total[kind] = total.get(kind, 0) + int(size)
    parts = ", ".join(f"{count[k]} {k}s {_mb(total[k])}" for k in sorted(total))
    return f"{_mb(sum(total.values()))} ({parts}), reached only by refs/gitguard"


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
