from __future__ import annotations

import click

from gitguard.attribution import owner_words
from gitguard.cli import Ctx, emit, json_option, pass_ctx
from gitguard.errors import EXIT_CONFLICTS


@click.command()
@click.option("--checkpoint", "checkpoint_id", metavar="ID",
              help="Resume from this checkpoint instead of the newest complete one.")
@click.option("--session", "session_id", help="Agent session (default: the open one).")
@json_option
@pass_ctx
def resume(ctx: Ctx, checkpoint_id: str | None, session_id: str | None, as_json: bool) -> None:
    """Continue after a crash: pick the newest complete checkpoint, verify the workspace,
    mark interrupted calls uncertain, and print the recovery note for the agent.

    Exits 5 when a file the agent wrote no longer holds what it wrote (decide first).
    Running it twice gives the same answer.

    Example: gitguard resume --json
    """
    result = ctx.guard.resume(checkpoint_id, session_id)
    emit(result.to_json(), as_json, lambda: click.echo(result.note, nl=False))
    if result.workspace.conflicts:
        paths = ", ".join(c.record.path for c in result.workspace.conflicts)
        click.echo(f"Conflicts pending: {paths}", err=True)
        click.echo("Hint: compare with `gitguard diff --user`; keep the file or restore the "
                   "agent's version before continuing", err=True)
        click.get_current_context().exit(EXIT_CONFLICTS)


@click.command()
@click.option("--session", "session_id", help="Agent session (default: the open one).")
@json_option
@pass_ctx
def explain(ctx: Ctx, session_id: str | None, as_json: bool) -> None:
    """Which calls ran, which must not run again and why, and which checkpoint resume would use.

    Example: gitguard explain --json
    """
    found = ctx.guard.explain(session_id)
    value = found.to_json()
    # The paths changed now, with their owners as `status` names them.
    dirty = ctx.guard.status().dirty if found.session_id is not None else []
    value["changed"] = [d.to_json() for d in dirty]

    def human() -> None:
        if found.session_id is None:
            click.echo("nothing recorded yet")
            return
        click.echo(f"session {found.session_id}")
        for view in found.calls:
            e = view.entry
            mark = "may run again" if view.verdict.replayable else "DO NOT REPEAT"
            click.echo(f"  {e.call_id:<10} {e.status:<10} {e.tool_name:<12} {mark}: "
                       f"{view.verdict.why}")
        choice = found.choice
        if choice is not None:
            target = choice.checkpoint.checkpoint_id if choice.checkpoint else "no checkpoint"
            click.echo(f"resume would use {target}: {choice.why}")
            for skipped in choice.all_skipped:
                click.echo(f"  skipped {skipped.label}: it {skipped.reason}")
        for d in dirty:
            click.echo(f"changed {d.path} by {owner_words(d.owner, d.confidence)}")

    emit(value, as_json, human)


@click.command()
@click.argument("call_id")
@click.option("--status", required=True, type=click.Choice(["succeeded", "failed"]),
              help="What checking the outside world showed.")
@click.option("--note", help="What was checked, e.g. 'the email is in the sent folder'.")
@json_option
@pass_ctx
def reconcile(ctx: Ctx, call_id: str, status: str, note: str | None, as_json: bool) -> None:
    """Settle an uncertain call after someone checked what it did outside.

    Example: gitguard reconcile call_16 --status succeeded --note "mail was delivered"
    """
    settled = ctx.guard.reconcile(call_id, status, note)
    emit(settled.to_json(), as_json,
         lambda: click.echo(f"{settled.call_id} is now {settled.status}"))
