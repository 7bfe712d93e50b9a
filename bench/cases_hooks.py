"""Hook rows: the wall time of one hook invocation, as git and Claude Code start it.

Each row runs the real thing in a subprocess: the installed `sh` shim for git hooks
(which starts the native client when `hooks install` could build it, else
`python -S -P hookmain.py hook git ...`), and the command `gitguard integrate
claude-code` writes, through `sh -c` as Claude Code runs it, with a JSON event on
stdin. The daemon rows start `gitguard daemon` first and skip, saying why, on a build
that has none.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.cases import CaseContext, Measurement, Skip, case, timed_once
from bench.probes import Editor, IndexProbe
from bench.shell import du_bytes, git, run

_PROJECT = Path(__file__).resolve().parents[1]
SESSION = "bench-0000-4000-8000-000000000000"


def _env(daemon: bool = True) -> dict[str, str]:
    """The no-daemon rows turn autostart off: a hook that finds no daemon starts one, and
    every later sample would be the daemon's."""
    path = os.pathsep.join(p for p in (str(_PROJECT), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": path, **({} if daemon else {"GITGUARD_NO_DAEMON": "1"})}


def _cli(ctx: CaseContext, *args: str, stdin: bytes | None = None, daemon: bool = True) -> bytes:
    return run([sys.executable, "-m", "gitguard", *args], cwd=ctx.repo, env=_env(daemon),
               input_bytes=stdin)


@contextmanager
def _daemon(ctx: CaseContext, wanted: bool) -> Iterator[None]:
    if not wanted:
        yield
        return
    try:
        _cli(ctx, "daemon", "start")
    except RuntimeError as exc:
        said = [ln for ln in str(exc).splitlines() if ln.strip()]
        raise Skip(f"no daemon on this build: `gitguard daemon start` said "
                   f"{said[-1][-80:] if said else 'nothing'}") from exc
    try:
        yield
    finally:
        _cli(ctx, "daemon", "stop")


def _prepared(ctx: CaseContext) -> None:
    try:
        _cli(ctx, "hooks", "install")
    except RuntimeError as exc:
        raise Skip(f"`gitguard hooks install` not usable: {exc}") from exc
    _cli(ctx, "checkpoint", "--kind", "manual", "--step", "s0")


def _claude_command(ctx: CaseContext) -> list[str]:
    """The command `gitguard integrate claude-code` writes, run as Claude Code runs it
    (`sh -c`); the older `python -m gitguard` on a build without `integrate`."""
    try:
        _cli(ctx, "integrate", "claude-code")
        settings = json.loads((ctx.repo / ".claude" / "settings.local.json").read_text())
        command = str(settings["hooks"]["PreToolUse"][-1]["hooks"][-1]["command"])
    except (RuntimeError, OSError, ValueError, KeyError, IndexError):
        return [sys.executable, "-m", "gitguard", "hook", "claude-code"]
    return ["sh", "-c", command]


def _measure(ctx: CaseContext, step: Callable[[int], float], note: str) -> Measurement:
    """One warm-up, then ctx.runs samples of what `step` times (an edit precedes each)."""
    probe = IndexProbe(ctx.repo)
    git_dir = ctx.repo / ".git"
    step(-1)
    before = du_bytes(git_dir)
    samples = []
    for i in range(ctx.runs):
        samples.append(step(i))
        probe.check()
    added = (du_bytes(git_dir) - before) // ctx.runs
    return Measurement(tuple(samples), added, note, probe.note())


def _post_checkout(ctx: CaseContext, daemon: bool) -> Measurement:
    _prepared(ctx)
    head = git(ctx.repo, "rev-parse", "HEAD").decode().strip()
    shim = str(ctx.repo / ".git" / "hooks" / "post-checkout")
    editor = Editor(ctx.repo)

    def step(_: int) -> float:
        editor.edit()
        return timed_once(lambda: run([shim, head, head, "1"], cwd=ctx.repo, env=_env(daemon)))

    with _daemon(ctx, daemon):
        return _measure(ctx, step, "the installed shim run as git runs it: sh, python, "
                                   "a snapshot and a checkpoint after the move")


@case("hook: git post-checkout (no daemon)", group="hooks", target="< 300 ms")
def post_checkout_no_daemon(ctx: CaseContext) -> Measurement:
    return _post_checkout(ctx, daemon=False)


@case("hook: git post-checkout (daemon)", group="hooks", target="< 50 ms")
def post_checkout_daemon(ctx: CaseContext) -> Measurement:
    return _post_checkout(ctx, daemon=True)


@case("hook: git pre-push (no daemon)", group="hooks", target="< 300 ms")
def pre_push(ctx: CaseContext) -> Measurement:
    """The floor of any hook: the shim, Python, gitguard's imports, a check of stdin."""
    _prepared(ctx)
    head = git(ctx.repo, "rev-parse", "HEAD").decode().strip()
    line = f"refs/heads/main {head} refs/heads/main {'0' * 40}\n".encode()
    shim = str(ctx.repo / ".git" / "hooks" / "pre-push")

    def step(_: int) -> float:
        return timed_once(lambda: run([shim, "origin", "/nowhere.git"], cwd=ctx.repo,
                                      env=_env(daemon=False),
                                  input_bytes=line))

    return _measure(ctx, step, "a branch push let through; no snapshot is taken")


def _claude_code(ctx: CaseContext, daemon: bool) -> Measurement:
    _prepared(ctx)
    editor = Editor(ctx.repo)
    posts: list[float] = []
    hook = _claude_command(ctx)

    def send(payload: bytes) -> bytes:
        return run(hook, cwd=ctx.repo, env=_env(daemon), input_bytes=payload)

    def event(name: str, call: str, rel: str) -> bytes:
        tool_input = {"file_path": str(ctx.repo / rel), "old_string": "", "new_string": "#"}
        return json.dumps({"session_id": SESSION, "transcript_path": str(ctx.scratch / "t.jsonl"),
                           "cwd": str(ctx.repo), "hook_event_name": name, "tool_name": "Edit",
                           "tool_input": tool_input, "tool_use_id": call,
                           "tool_response": {"filePath": str(ctx.repo / rel)}}).encode()

    def step(i: int) -> float:
        rel, call = editor.pick(), f"toolu_bench_{i + 1}"
        pre = timed_once(lambda: send(event("PreToolUse", call, rel)))
        editor.touch(rel)
        posts.append(timed_once(lambda: send(event("PostToolUse", call, rel))))
        return pre

    with _daemon(ctx, daemon):
        measured = _measure(ctx, step, "")
    note = (f"`{' '.join(hook)[-60:]}`: PreToolUse timed (call begin + pre snapshot); median "
            f"PostToolUse {statistics.median(posts[1:]):.1f} ms (call end + post snapshot "
            "+ patch)")
    return Measurement(measured.samples_ms, measured.bytes_added, note, measured.index)


@case("hook: claude-code PreToolUse (no daemon)", group="hooks", target="< 300 ms")
def claude_code_no_daemon(ctx: CaseContext) -> Measurement:
    return _claude_code(ctx, daemon=False)


@case("hook: claude-code PreToolUse (daemon)", group="hooks", target="< 50 ms")
def claude_code_daemon(ctx: CaseContext) -> Measurement:
    return _claude_code(ctx, daemon=True)
