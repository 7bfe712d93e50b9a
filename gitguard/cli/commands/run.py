"""`gitguard run -- CMD ...`: a command as one ledgered call."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gitguard.cli.main import Ctx, pass_ctx


@click.command(context_settings={"ignore_unknown_options": True,
                                 "allow_interspersed_args": False})
@click.option("--tool", default="run_command", show_default=True,
              help="The tool name the ledger shows.")
@click.option("--step", "step_id", help="The agent step this call belongs to.")
@click.option("--session", "session_id", help="Agent session (default: the open one).")
@click.option("--confirm", is_flag=True, help="Run again a command whose replay policy is `ask`.")
@click.option("--force-replay", is_flag=True, help="Run again a `never` command (ledgered).")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@pass_ctx
def run(ctx: Ctx, tool: str, step_id: str | None, session_id: str | None, confirm: bool,
        force_replay: bool, command: tuple[str, ...]) -> None:
    """Run CMD as one ledgered call: classified by its command line, its output passed
    through and stored, its exit code passed back, signals forwarded to it.

    A repeated non-idempotent command (`npm publish`) is refused with exit code 4.

    Example: gitguard run --step step_4 -- npm test
    """
    from gitguard.calls.run_command import run as run_command

    ran = run_command(ctx.guard, command, stdout=sys.stdout.buffer, stderr=sys.stderr.buffer,
                      cwd=Path(ctx.path), tool=tool, step_id=step_id, session_id=session_id,
                      confirm=confirm, force_replay=force_replay)
    raise click.exceptions.Exit(ran.exit_code)
