from __future__ import annotations

import click

from gitguard.cli.main import Ctx, emit, json_option, pass_ctx, read_json_arg
from gitguard.errors import GitguardError


@click.command()
@click.option("--kind", type=click.Choice(["pre", "post", "manual"]), default="manual",
              show_default=True)
@click.option("--step", "step_id", help="The agent step.")
@click.option("--state-file", type=click.Path(), help="Run state JSON object ('-': stdin).")
@click.option("--messages-file", type=click.Path(), help="Message history: a JSON list.")
@click.option("--session", "session_id", help="Agent session (default: the open one).")
@json_option
@pass_ctx
def checkpoint(ctx: Ctx, kind: str, step_id: str | None, state_file: str | None,
               messages_file: str | None, session_id: str | None, as_json: bool) -> None:
    """Snapshot the workspace and save run state and messages as a checkpoint.

    Example: gitguard checkpoint --kind post --step step_3 --state-file state.json --json
    """
    state = read_json_arg(None, state_file, "--state-file")
    messages = read_json_arg(None, messages_file, "--messages-file")
    if messages is not None and not isinstance(messages, list):
        raise GitguardError("--messages-file must hold a JSON list of messages",
                            'for example [{"role": "user", "content": "hi"}]')
    from gitguard.cli import terminal

    with terminal.progress(not as_json) as progress:
        made = ctx.guard.checkpoint(kind, step_id, state, messages, session_id=session_id,
                                    progress=progress)
    emit(made.to_json(), as_json, lambda: click.echo(made.checkpoint_id))


@click.command()
@json_option
@pass_ctx
def checkpoints(ctx: Ctx, as_json: bool) -> None:
    """List checkpoints, oldest first.  Example: gitguard checkpoints --json"""
    rows = ctx.guard.checkpoints()

    def human() -> None:
        for r in rows:
            click.echo(f"{r.checkpoint_id}  {r.kind:<12} {r.step_id or '-':<10} "
                       f"{r.session_id}  {r.snapshot_commit[:10]}")

    emit([r.to_json() for r in rows], as_json, human)
