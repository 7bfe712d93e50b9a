"""The anchors: what the usual ways of snapshotting a workspace cost.

Each runs on its own fresh copy of the same generated repository. Per-call
samples are one-file edit + the operation, as an agent's tool call would be.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from bench.cases import CaseContext, Measurement, case, first_once, per_call, sample
from bench.probes import Editor
from bench.shell import GIT, git, run

GIT_STATUS = "git status --porcelain"
SHADOW_FIRST = "shadow repo: first snapshot"
SHADOW_PER_CALL = "shadow repo: per call"
STASH_CREATE = "git stash create: per call"
PRIVATE_FIRST_EMPTY = "private index: first (empty index)"
PRIVATE_FIRST_SEEDED = "private index: first (copy of .git/index)"
PRIVATE_PER_CALL = "private index: per call"
PRIVATE_LSTAT = "private index: lstat pass (diff-files)"
PYTHON_BARE = "python -c pass"
PYTHON_IMPORTS = "python import pygit2+watchdog+pydantic+click"

_NO_LOCKS = {"GIT_OPTIONAL_LOCKS": "0"}


@case(GIT_STATUS, group="anchor")
def git_status(ctx: CaseContext) -> Measurement:
    editor = Editor(ctx.repo)

    def step(_: int) -> None:
        editor.edit()
        git(ctx.repo, "status", "--porcelain", env=_NO_LOCKS)

    return per_call(ctx, step, note="GIT_OPTIONAL_LOCKS=0")


# The Cline / Gemini CLI method: a second git dir whose work tree is the repo.
def _shadow_dir(ctx: CaseContext) -> Path:
    return ctx.scratch / "shadow.git"  # outside the repository, as Cline and Gemini CLI do


def _shadow(ctx: CaseContext, *args: str) -> None:
    where = [f"--git-dir={_shadow_dir(ctx)}", f"--work-tree={ctx.repo}"]
    run([*GIT, *where, *args], cwd=ctx.repo)


def _shadow_snapshot(ctx: CaseContext) -> None:
    _shadow(ctx, "add", "-A")
    _shadow(ctx, "commit", "-q", "--allow-empty", "-m", "x")


def _shadow_first(ctx: CaseContext) -> None:
    _shadow(ctx, "init", "-q")
    _shadow_snapshot(ctx)


@case(SHADOW_FIRST, group="anchor", first=True)
def shadow_first(ctx: CaseContext) -> Measurement:
    return first_once(ctx, lambda: _shadow_first(ctx), grows=_shadow_dir(ctx),
                      note="init + add -A + commit; bytes = du of the shadow git dir")


@case(SHADOW_PER_CALL, group="anchor")
def shadow_per_call(ctx: CaseContext) -> Measurement:
    _shadow_first(ctx)
    editor = Editor(ctx.repo)

    def step(_: int) -> None:
        editor.edit()
        _shadow_snapshot(ctx)

    return per_call(ctx, step, grows=_shadow_dir(ctx),
                    note="add -A + commit; bytes/call in the shadow git dir")


@case(STASH_CREATE, group="anchor")
def stash_create(ctx: CaseContext) -> Measurement:
    editor = Editor(ctx.repo)

    def step(_: int) -> None:
        editor.edit()
        git(ctx.repo, "stash", "create")

    return per_call(ctx, step, grows=ctx.repo / ".git", note="tracked files only")


def _private_index(ctx: CaseContext) -> dict[str, str]:
    return {"GIT_INDEX_FILE": str(ctx.repo / ".git" / "bench-private-index")}


def _private_snapshot(ctx: CaseContext) -> None:
    env = _private_index(ctx)
    git(ctx.repo, "add", "-A", env=env)
    git(ctx.repo, "write-tree", env=env)


@case(PRIVATE_FIRST_EMPTY, group="anchor", first=True)
def private_first_empty(ctx: CaseContext) -> Measurement:
    return first_once(ctx, lambda: _private_snapshot(ctx), grows=ctx.repo / ".git",
                      note="GIT_INDEX_FILE=tmp add -A + write-tree; hashes every file")


@case(PRIVATE_FIRST_SEEDED, group="anchor", first=True)
def private_first_seeded(ctx: CaseContext) -> Measurement:
    def action() -> None:
        shutil.copyfile(ctx.repo / ".git" / "index", _private_index(ctx)["GIT_INDEX_FILE"])
        _private_snapshot(ctx)

    return first_once(ctx, action, grows=ctx.repo / ".git",
                      note="copy index, add -A + write-tree; reuses the stat cache")


@case(PRIVATE_PER_CALL, group="anchor")
def private_per_call(ctx: CaseContext) -> Measurement:
    shutil.copyfile(ctx.repo / ".git" / "index", _private_index(ctx)["GIT_INDEX_FILE"])
    _private_snapshot(ctx)
    editor = Editor(ctx.repo)

    def step(_: int) -> None:
        editor.edit()
        _private_snapshot(ctx)

    return per_call(ctx, step, grows=ctx.repo / ".git", note="add -A + write-tree")


@case(PRIVATE_LSTAT, group="floor")
def private_lstat_pass(ctx: CaseContext) -> Measurement:
    """The floor of one no-daemon scan: git's lstat of every tracked file against a private
    index (what `git status` does before it looks for untracked files). A no-daemon call
    scans twice (pre and post), so its floor is twice this row."""
    shutil.copyfile(ctx.repo / ".git" / "index", _private_index(ctx)["GIT_INDEX_FILE"])
    editor = Editor(ctx.repo)

    def step(_: int) -> None:
        editor.edit()
        git(ctx.repo, "diff-files", "--name-only", env={**_private_index(ctx), **_NO_LOCKS})

    return per_call(ctx, step, note="edit + diff-files: read the index, lstat every entry")


def _python(ctx: CaseContext, code: str) -> Measurement:
    def step(_: int) -> None:
        run([sys.executable, "-c", code], cwd=ctx.scratch)

    return Measurement(sample(ctx.runs, step), note="interpreter start, for the CLI rows")


@case(PYTHON_BARE, group="floor", needs_repo=False)
def python_bare(ctx: CaseContext) -> Measurement:
    return _python(ctx, "pass")


@case(PYTHON_IMPORTS, group="floor", needs_repo=False)
def python_imports(ctx: CaseContext) -> Measurement:
    return _python(ctx, "import pygit2, watchdog.observers, pydantic, click")
