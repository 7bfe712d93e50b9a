"""`make bench`: measure gitguard against the usual snapshot methods and print a table.

    python -m bench.run --sizes 1k,20k --runs 5
    python -m bench.run --only shadow --sizes 100k

This is a report, not a test: nothing here asserts a threshold.
"""

from __future__ import annotations

import argparse
import compileall
import datetime as dt
import os
import platform
import shutil
import signal
import sys
import tempfile
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench import (  # noqa: F401 - importing registers their cases
    anchors,
    cases_daemon,
    cases_history,
    cases_hooks,
    cases_resume,
    cases_rollback,
    cases_storage,
    cases_timeline,
    cases_watcher,
    gitguard_cases,
)
from bench.cases import Case, CaseContext, Measurement, Skip, registered
from bench.probes import create_probe, fsync_probe
from bench.report import Row, table, verdict, write_json
from bench.repos import SIZES, RepoInfo, copy_repo, ensure_repo, worktree_manifest
from bench.shell import du_bytes, git_version, isolate_this_process

PROJECT = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1k,20k,100k",
                        help="comma-separated repository sizes among %(default)s")
    parser.add_argument("--runs", type=int, default=5,
                        help="timed calls per per-call case, after one warm-up (default 5)")
    parser.add_argument("--first-runs", type=int, default=1,
                        help="fresh copies per first-snapshot case (default 1)")
    parser.add_argument("--json", type=Path, default=PROJECT / ".bench" / "results.json",
                        help="where to write the results (default .bench/results.json)")
    parser.add_argument("--only", default="",
                        help="comma-separated words; run the cases whose name or group "
                             "contains one of them")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()),
                        help="where the per-case copies go (default: the temp dir)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)
    args.size_list = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in args.size_list if s not in SIZES]
    if unknown:
        parser.error(f"unknown size {unknown[0]!r}; choose among {', '.join(SIZES)}")
    if args.runs < 1 or args.first_runs < 1:
        parser.error("--runs and --first-runs must be at least 1")
    return args


def select(cases: list[Case], only: str) -> list[Case]:
    words = [w.strip().lower() for w in only.split(",") if w.strip()]
    if not words:
        return cases
    return [c for c in cases if any(w in c.name.lower() or w == c.group for w in words)]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cases = select(registered(), args.only)
    if args.list or not cases:
        # --list shows what --only selects; an --only that selects nothing lists every case.
        for c in (cases or registered()):
            print(f"{c.group:9} {c.name}" + (f"   (target {c.target})" if c.target else ""))
        return 0 if args.list else 2
    isolate_this_process()
    # pip writes an installed package's bytecode; a checkout run with PYTHONDONTWRITEBYTECODE
    # set (as on our machines) would recompile every stale gitguard module in every CLI and
    # hook process it measures, hundreds of ms that no user pays.
    compileall.compile_dir(str(PROJECT / "gitguard"), quiet=1)
    # SIGTERM ends the run through SystemExit, so every copy is still removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    load_before = os.getloadavg()
    args.workdir.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []
    repos: dict[str, Any] = {}
    runner = Runner(args.runs, args.first_runs, args.workdir)
    try:
        run_sizes(args, cases, runner, rows, repos)
        load_after = os.getloadavg()
        lines = verdict(rows)
        print_report(rows, lines, load_before[0], load_after[0])
        meta = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "python": platform.python_version(), "git": git_version(),
                "platform": platform.platform(), "cpus": os.cpu_count(),
                "runs": args.runs, "firstRuns": args.first_runs, "repos": repos,
                "loadAverage": {"start": load_before, "end": load_after}}
        write_json(args.json, meta, rows, lines)
        print(f"\nwrote {args.json}", flush=True)
    finally:
        # After the report: removing twenty 100k-file copies takes ~10 min here (~30 s
        # each: the disk is mounted with `discard`).
        log(f"removing {runner.copies} copies of the repositories")
        runner.remove_copies()
    return 0


def run_sizes(args: argparse.Namespace, cases: list[Case], runner: Runner, rows: list[Row],
              repos: dict[str, Any]) -> None:
    for size in args.size_list:
        info = ensure_repo(PROJECT, size)
        log(f"[{size}] repository {info.why}: {info.tracked} tracked, {info.ignored} ignored, "
            f"{info.untracked} untracked files; generation took {info.generated_seconds:.1f} s")
        for c in cases:
            if c.once and size != args.size_list[0]:
                continue
            row = runner.run_case(c, info)
            log(f"[{size}] {c.name}: {row.status}"
                + (f", median {row.median_ms:.1f} ms" if row.median_ms is not None else ""))
            rows.append(row)
        repos[size] = {"tracked": info.tracked, "ignored": info.ignored,
                       "untracked": info.untracked, "head": info.head,
                       "generatedSeconds": info.generated_seconds, "cache": info.why,
                       "copyVerifiedFiles": runner.verified.get(size)}

def print_report(rows: list[Row], lines: list[str], load_start: float, load_end: float) -> None:
    print(table(rows))
    print()
    print("Per-call rows: one warm-up call, then --runs calls of one-file edit + operation;"
          " bytes are per call.")
    print("First rows: one sample per fresh copy (--first-runs); bytes are the total added.")
    print("MB = 10^6 bytes. Anchors run git with auto-gc off.")
    print(f"Load average (1 min) at start {load_start:.2f}, at end {load_end:.2f}"
          f" on {os.cpu_count()} CPUs: other work on the machine inflates every row.")
    print("fsync ms: the median wait of a 4 KiB write + fsync on the copy's file system just"
          " before and after the case (idle here: 0.2-0.6 ms); where it is high, every"
          " fsync inside that row's samples waits longer too.")
    print("create us: the median time to create an empty file in the copy's .git/objects just"
          " before the case (idle here: 10-25 us); high right after many files were deleted"
          " (ext4 without a journal skips recently deleted inodes), which slows every"
          " snapshot's loose objects and every rollback write.")
    print()
    print("Verdict")
    for line in lines:
        print("  " + line)


class Runner:
    """Runs cases on fresh copies; checks the first copy of each size against the cache."""

    def __init__(self, runs: int, first_runs: int, workdir: Path) -> None:
        self.runs, self.first_runs, self.workdir = runs, first_runs, workdir
        self.verified: dict[str, int] = {}  # size -> files compared in its first copy
        self._used: list[Path] = []  # case copies, removed at the end (see _room_for)
        self._copy_bytes: dict[str, int] = {}  # size -> bytes of the cached repository

    def run_case(self, c: Case, info: RepoInfo) -> Row:
        parts: list[Measurement] = []
        try:
            for _ in range(self.first_runs if c.first else 1):
                parts.append(self._run_once(c, info))
        except Skip as exc:
            return Row.failed(c, info.size, "skipped", str(exc))
        except Exception as exc:  # noqa: BLE001 - one broken case must not hide the others
            traceback.print_exc(file=sys.stderr)
            return Row.failed(c, info.size, "error", f"{type(exc).__name__}: {exc}")
        return Row.measured(c, info.size, parts)

    def _run_once(self, c: Case, info: RepoInfo) -> Measurement:
        if c.needs_repo:
            self._room_for(info)
        prefix = f"gitguard-bench-{info.size}-"
        scratch = Path(tempfile.mkdtemp(prefix=prefix, dir=self.workdir))
        try:
            repo = scratch / "repo"
            if c.needs_repo:
                self._copy(info, repo)
            else:
                repo.mkdir()
            work = scratch / "work"
            work.mkdir()
            objects = repo / ".git" / "objects"
            creates = create_probe(objects if objects.is_dir() else work)
            before = fsync_probe(work)
            measured = c.fn(CaseContext(repo=repo, scratch=work, runs=self.runs))
            return replace(measured, disk_ms=(before, fsync_probe(work)), create_us=creates)
        finally:
            _stop_daemons(scratch)
            self._used.append(scratch)

    @property
    def copies(self) -> int:
        return len(self._used)

    def remove_copies(self) -> None:
        """Remove every copy made so far (at the end of the run, or when space runs low)."""
        while self._used:
            shutil.rmtree(self._used.pop(), ignore_errors=True)

    def _room_for(self, info: RepoInfo) -> None:
        """Copies are kept until the run ends: on ext4 without a journal (this VM's disk)
        a new inode skips every one deleted in the last 60-360 s (`recently_deleted` in
        fs/ext4/ialloc.c), so removing a 100k-file copy made every file creation of the
        next cases slower (perf: 26% of a rollback's CPU in that kernel path). Only when
        the disk would fill are they removed early, and the run says so."""
        if info.size not in self._copy_bytes:
            self._copy_bytes[info.size] = du_bytes(info.path)
        free = shutil.disk_usage(self.workdir).free
        need = 2 * self._copy_bytes[info.size] + _SPARE_BYTES
        if free < need and self._used:
            log(f"removing {len(self._used)} earlier copies now: {free / 1e9:.1f} GB free,"
                f" {need / 1e9:.1f} GB wanted; the next cases' file creations may be slower")
            self.remove_copies()

    def _copy(self, info: RepoInfo, dest: Path) -> None:
        copy_repo(info, dest)
        if info.size in self.verified:
            return
        original, copied = worktree_manifest(info.path), worktree_manifest(dest)
        if original != copied:
            differ = sorted(set(original.items()) ^ set(copied.items()))[:5]
            raise RuntimeError(f"the copy of {info.path} differs from it: {differ}")
        self.verified[info.size] = len(copied)


def _stop_daemons(scratch: Path) -> None:
    """A case that left a gitguard daemon running (a hook autostarts one) must not leave
    it loading the machine for the cases after it."""
    work = scratch / "work"
    repos = [scratch / "repo", *(work.iterdir() if work.is_dir() else ())]
    for pid_file in (r / ".git" / "gitguard" / "daemon.pid" for r in repos):
        if not pid_file.is_file():
            continue
        try:
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
        except (OSError, ValueError, IndexError):
            continue
        log(f"stopped a gitguard daemon left running in {pid_file.parents[2]}")


_SPARE_BYTES = 5 * 10**9  # left free on the disk besides the next copy


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
