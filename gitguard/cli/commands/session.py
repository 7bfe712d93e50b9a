from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from gitguard.cli.main import Ctx, emit, json_option, pass_ctx

if TYPE_CHECKING:
    from gitguard.api import Guard


@click.command()
@click.option("--no-hooks", is_flag=True,
              help="Do not install the git hooks (then nothing keeps `git push --mirror` from "
                   "sending refs/gitguard/*).")
@click.option("--no-daemon", is_flag=True, help="Do not start the watcher daemon.")
@json_option
@pass_ctx
def init(ctx: Ctx, no_hooks: bool, no_daemon: bool, as_json: bool) -> None:
    """Create the gitguard store for this workspace and install the git hooks.

    In a git repository the store lives in <git-dir>/gitguard (never shown by git
    status, never committed); elsewhere in .agent-runtime/. The hooks are those of
    `gitguard hooks install`: they record your checkouts, merges and commits, and the
    pre-push hook refuses `git push --mirror`, which would send refs/gitguard/*.

    Example: gitguard init --no-hooks
    """
    guard = ctx.guard
    created = guard.store.create()
    value = {"store": str(guard.store.root), "created": created, "git": guard.ws.is_git}
    hooks_lines = _install_hooks(guard, no_hooks, value)
    daemon_line = _start_daemon(guard, no_daemon, value, shown=not as_json)

    def human() -> None:
        click.echo(f"{'Created' if created else 'Found'} the gitguard store at {guard.store.root}")
        for line in hooks_lines:
            click.echo(line)
        if daemon_line:
            click.echo(daemon_line)

    emit(value, as_json, human)


def _install_hooks(guard: Guard, no_hooks: bool, value: dict[str, Any]) -> list[str]:
    """`hooks install` unless told not to; a hooks directory gitguard must not write into
    (core.hooksPath tracked or shared) leaves the store made and says why, with the hint."""
    from gitguard.errors import GitguardError
    from gitguard.integrations import hook_install

    if no_hooks or not guard.ws.is_git:
        value["hooks"] = None
        return []
    try:
        report = hook_install.install(guard.ws)
    except GitguardError as exc:
        value["hooks"] = {"error": exc.message, "hint": exc.hint}
        return [f"Warning: the git hooks were not installed: {exc.message}",
                *([f"Hint: {exc.hint}"] if exc.hint else [])]
    value["hooks"] = report.to_json()
    lines = [f"Notice: {report.hooks_dir.notice}"] if report.hooks_dir.notice else []
    return [*lines, f"Installed the git hooks in {report.hooks_dir.path} (pre-push refuses "
                    "`git push --mirror`; `gitguard hooks status` shows them)"]


def _start_daemon(guard: Guard, no_daemon: bool, value: dict[str, Any],
                  shown: bool = True) -> str:
    """Start the watcher daemon unless told not to; init succeeds without it. `shown`: a
    terminal sees the wait for its start-up scan."""
    from gitguard.cli import terminal
    from gitguard.errors import GitguardError
    from gitguard.ipc import control

    if no_daemon or not guard.settings.daemon_autostart:
        value["daemon"] = None
        return ""
    try:
        with terminal.progress(shown) as progress:
            progress(f"the daemon's start-up scan of {guard.ws.root}")
            started = control.start(guard.ws)
    except GitguardError as exc:
        value["daemon"] = {"error": exc.message}
        return f"The daemon did not start ({exc.message}); gitguard works without it"
    value["daemon"] = {"pid": started.pid}
    return f"The daemon {'runs' if started.already else 'started'} (pid {started.pid})"


@click.group()
def session() -> None:
    """Agent sessions: each has its own snapshot chain and ledger entries."""


@session.command("start")
@click.option("--id", "session_id", help="Session id (default: a new one).")
@click.option("--agent", help="Which agent runs this session (free text).")
@json_option
@pass_ctx
def session_start(ctx: Ctx, session_id: str | None, agent: str | None, as_json: bool) -> None:
    """Start (or reuse an open) agent session.  Example: gitguard session start --id s1"""
    started = ctx.guard.start_session(session_id, agent)
    emit(started.to_json(), as_json, lambda: click.echo(started.session_id))


@session.command("end")
@click.option("--id", "session_id", help="Session id (default: the open one).")
@json_option
@pass_ctx
def session_end(ctx: Ctx, session_id: str | None, as_json: bool) -> None:
    """End a session.  Example: gitguard session end"""
    ended = ctx.guard.end_session(session_id)
    emit(ended.to_json(), as_json, lambda: click.echo(f"Ended {ended.session_id}"))


@session.command("list")
@json_option
@pass_ctx
def session_list(ctx: Ctx, as_json: bool) -> None:
    """List sessions.  Example: gitguard session list --json"""
    found = ctx.guard.sessions()

    def human() -> None:
        for s in found:
            state = "open" if s.ended_at is None else "ended"
            click.echo(f"{s.session_id}  {s.started_at}  {state}")

    emit([s.to_json() for s in found], as_json, human)
