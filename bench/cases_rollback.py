"""Rollback rows: `rollback-files` of 1 and of 100 files an agent call changed.

Each sample: a checkpoint, one agent call that edits N tracked files spread over
the tree (untimed), then the timed rollback to that checkpoint: plan, safety
checkpoint, writes, post checkpoint, ledger entry. In-process, like an agent
runtime calling the Python API.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.cases import CaseContext, Measurement, Skip, case, timed_once
from bench.probes import Editor, IndexProbe
from bench.shell import du_bytes, git


@contextmanager
def _counting(counts: dict[str, int]) -> Iterator[None]:
    """Count processes started and fsyncs made inside: the work, whatever the load is."""
    popen_init, fsync = subprocess.Popen.__init__, os.fsync

    def counted_popen(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
        counts["processes"] += 1
        popen_init(self, *args, **kwargs)

    def counted_fsync(fd: Any) -> None:
        counts["fsyncs"] += 1
        fsync(fd)

    subprocess.Popen.__init__ = counted_popen  # type: ignore[method-assign]
    os.fsync = counted_fsync
    try:
        yield
    finally:
        subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
        os.fsync = fsync


def _rollback(ctx: CaseContext, files: int) -> Measurement:
    try:
        from gitguard.api import Guard
        from gitguard.rollback.rollback_files import rollback_files
    except Exception as exc:  # noqa: BLE001 - any failure to import means "skip this row"
        raise Skip(f"gitguard.rollback.rollback_files not usable: {type(exc).__name__}: "
                   f"{exc}") from exc
    guard: Any = Guard.init(ctx.repo)
    try:
        guard.checkpoint(kind="manual", step_id="s0")      # the first snapshot, untimed
        editor = Editor(ctx.repo)
        probe = IndexProbe(ctx.repo)
        samples: list[float] = []
        grown = 0
        counts = {"processes": 0, "fsyncs": 0}
        for run in range(ctx.runs + 1):                     # the first run warms up
            target = guard.checkpoint(kind="manual", step_id=f"before_{run}").checkpoint_id
            with guard.tool_call("write_files", {"files": files, "run": run}):
                paths = [editor.edit() for _ in range(files)]
            before = du_bytes(ctx.repo / ".git")
            result: Any = None

            def once(checkpoint_id: str = target) -> None:
                nonlocal result
                result = rollback_files(guard, checkpoint_id)

            if run:
                with _counting(counts):
                    ms = timed_once(once)
            else:
                ms = timed_once(once)
            probe.check()
            if len(result.restored) != len(set(paths)) or result.conflicts:
                raise RuntimeError(f"rolled back {len(result.restored)} of {len(set(paths))} "
                                   f"files, {len(result.conflicts)} conflicts")
            if run:
                samples.append(ms)
                grown += du_bytes(ctx.repo / ".git") - before
        note = (f"in-process; {files} file(s) restored per sample, each with a pre_rollback "
                f"and a post checkpoint; per sample {counts['processes'] / ctx.runs:g} "
                f"subprocess(es), {counts['fsyncs'] / ctx.runs:g} fsyncs")
        return Measurement(tuple(samples), grown // ctx.runs, note, probe.note())
    finally:
        guard.close()


@case("gitguard: rollback-files, 1 file", group="gitguard", target="< 100 ms")
def rollback_one(ctx: CaseContext) -> Measurement:
    return _rollback(ctx, 1)


@case("gitguard: rollback-files, 100 files", group="gitguard", target="< 100 ms")
def rollback_hundred(ctx: CaseContext) -> Measurement:
    return _rollback(ctx, 100)


@case("anchor: git checkout -- 100 edited files (rollback's writes)", group="anchor")
def git_checkout_hundred(ctx: CaseContext) -> Measurement:
    """git's own restore of 100 edited files from the index, like the rollback rows' edits:
    what writing them costs on this file system, in the same run (one process start
    included; git also reads and rewrites the whole index, so at 100k files that
    dominates). Through a copy of the index, so the user's stays as it was."""
    editor = Editor(ctx.repo)
    probe = IndexProbe(ctx.repo)
    private = ctx.scratch / "index"
    shutil.copyfile(ctx.repo / ".git" / "index", private)
    env = {"GIT_INDEX_FILE": str(private)}
    samples: list[float] = []
    for run in range(ctx.runs + 1):
        paths = sorted({editor.edit() for _ in range(100)})
        argv = ("checkout", "--", *paths)
        ms = timed_once(functools.partial(git, ctx.repo, *argv, env=env))
        probe.check()
        if run:
            samples.append(ms)
    return Measurement(tuple(samples), None, "git checkout -- PATHS, private index copy",
                       probe.note())
