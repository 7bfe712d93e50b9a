from __future__ import annotations

from pathlib import Path

import click

from gitguard.cli.main import Ctx, emit, json_option, pass_ctx
from gitguard.errors import EXIT_NOT_RUNNING, EXIT_USER, GitguardError


@click.group()
def daemon() -> None:
    """The watcher daemon: attributes every change and makes snapshots O(changed)."""


@daemon.command("start")
@click.option("--foreground", is_flag=True, help="Run in this process until SIGTERM or Ctrl-C.")
@json_option
@pass_ctx
def daemon_start(ctx: Ctx, foreground: bool, as_json: bool) -> None:
    """Start the daemon of this worktree (one per worktree; a stale one is replaced).

    Example: gitguard daemon start
    """
    from gitguard.ipc import control
    from gitguard.workspace import discover

    ws = discover(Path(ctx.path))
    if foreground:
        from gitguard.daemon.daemon import serve_foreground

        serve_foreground(ws)
        return
    from gitguard.cli import terminal

    # The scan runs in the daemon's own process, which cannot say how far it got: the
    # line says what is awaited and for how long.
    with terminal.progress(not as_json) as progress:
        progress(f"the daemon's start-up scan of {ws.root}")
        started = control.start(ws)
    value = {"pid": started.pid, "alreadyRunning": started.already,
             "stalePid": started.stale_pid}

    def human() -> None:
        if started.already:
            click.echo(f"The daemon already runs (pid {started.pid})")
            return
        if started.stale_pid is not None:
            click.echo(f"Replaced a stale daemon (pid {started.stale_pid} was not running)")
        click.echo(f"Started the daemon (pid {started.pid})")

    emit(value, as_json, human)


@daemon.command("stop")
@json_option
@pass_ctx
def daemon_stop(ctx: Ctx, as_json: bool) -> None:
    """Stop the daemon; it records what it saw and brings the stat cache up to date.

    Example: gitguard daemon stop
    """
    from gitguard.ipc import control
    from gitguard.workspace import discover

    pid = control.stop(discover(Path(ctx.path)))
    emit({"stopped": pid}, as_json, lambda: click.echo(
        f"Stopped the daemon (pid {pid})" if pid else "The daemon was not running"))


@daemon.command("status")
@json_option
@pass_ctx
def daemon_status(ctx: Ctx, as_json: bool) -> None:
    """Whether the daemon runs and answers, and its pid, watches, memory and counters.

    Exit code: 0 running (it answered), 1 running but not answering within a few
    seconds (hooks then work in-process; `gitguard daemon stop` ends it), 6 not running.

    Example: gitguard daemon status --json
    """
    from gitguard.ipc import control
    from gitguard.workspace import discover

    found = control.status(discover(Path(ctx.path)))
    state = found["state"]
    if state == control.NOT_ANSWERING and not as_json:
        raise GitguardError(
            f"the daemon (pid {found['pid']}) runs but does not answer: {found['error']}",
            "calls and hooks work in-process meanwhile; `gitguard daemon stop` ends it "
            f"(SIGTERM if it does not answer), and {found['log']} may say why")

    def human() -> None:
        if state == control.NOT_RUNNING:
            stale = found.get("stalePid")
            click.echo("The daemon is not running" +
                       (f" (stale pid {stale} from a daemon that was killed)" if stale else ""))
            unusable = found.get("unusable")
            if unusable:
                click.echo(f"  The last one could not serve: {unusable.get('why')}; the hooks "
                           "work in-process and start none for 10 minutes "
                           "(`gitguard daemon start` tries at once)")
            return
        click.echo(f"The daemon runs (pid {found['pid']}) for {found.get('workspace')}")
        click.echo(f"  {found.get('watches', '?')} inotify watches, "
                   f"{found.get('rssKb', 0) // 1024} MiB resident, "
                   f"{found.get('cpuS', 0)} s CPU, up {found.get('uptimeS', 0)} s")
        unwatched = found.get("unwatched") or []
        if unwatched:
            click.echo(f"  {len(unwatched)} director{'y' if len(unwatched) == 1 else 'ies'} "
                       "not watched (the inotify watch limit, fs.inotify.max_user_watches, is "
                       "reached): scanned at each call's start and end instead. First: "
                       + ", ".join(unwatched[:5]))
        click.echo(f"  snapshots: {found.get('incremental', 0)} incremental, "
                   f"{found.get('full_scans', 0)} full scans "
                   f"({found.get('snapshotMode', '?')}); {found.get('records', 0)} attributions")

    emit(found, as_json, human)
    if state != control.RUNNING:
        raise click.exceptions.Exit(EXIT_NOT_RUNNING if state == control.NOT_RUNNING
                                    else EXIT_USER)
