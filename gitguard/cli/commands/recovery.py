from __future__ import annotations

import click

from gitguard.calls.attribution import owner_words
from gitguard.cli.main import Ctx, emit, json_option, pass_ctx
from gitguard.errors import EXIT_CONFLICTS, EXIT_USER


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
@click.option("--status", type=click.Choice(["succeeded", "failed"]),
              help="What checking the outside world showed.")
@click.option("--note", help="What was checked, e.g. 'the email is in the sent folder'.")
@click.option("--probe", is_flag=True,
              help="Run the call's probe now and settle it by what the probe finds.")
@json_option
@pass_ctx
def reconcile(ctx: Ctx, call_id: str, status: str | None, note: str | None, probe: bool,
              as_json: bool) -> None:
    """Settle an uncertain call after someone checked what it did outside, or let its
    probe check (`--probe`: exit 0 when it settled the call, 1 when it could not tell).

    Example: gitguard reconcile call_16 --status succeeded --note "mail was delivered"

    Example: gitguard reconcile --probe call_10 --json
    """
    if probe == (status is not None):
        raise click.UsageError("pass --status succeeded|failed, or --probe (not both)")
    if probe:
        _reconcile_by_probe(ctx, call_id, note, as_json)
        return
    assert status is not None
    settled = ctx.guard.reconcile(call_id, status, note)
    emit(settled.to_json(), as_json,
         lambda: click.echo(f"{settled.call_id} is now {settled.status}"))


def _reconcile_by_probe(ctx: Ctx, call_id: str, note: str | None, as_json: bool) -> None:
    if note is not None:
        raise click.UsageError("--note goes with --status; a probe's evidence is its note")
    outcome = ctx.guard.reconcile_by_probe(call_id)

    def human() -> None:
        assert outcome.probe is not None
        if outcome.settled is not None:
            click.echo(f"{call_id} is now {outcome.settled.status}: it {outcome.settled.note} "
                       f"(`{outcome.probe.display}`; evidence {outcome.evidence_ref})")

    emit(outcome.to_json(), as_json, human)
    if outcome.settled is None:
        assert outcome.probe is not None
        click.echo(f"Error: the probe `{outcome.probe.display}` could not tell whether "
                   f"{call_id} happened: {outcome.why}", err=True)
        click.echo(f"Hint: {call_id} stays uncertain; check by hand, then `gitguard reconcile "
                   f"{call_id} --status succeeded|failed` (evidence {outcome.evidence_ref})",
                   err=True)
        click.get_current_context().exit(EXIT_USER)


@click.command()
@click.option("--dry-run", is_flag=True, help="Say what would be set aside; change nothing.")
@json_option
@pass_ctx
def repair(ctx: Ctx, dry_run: bool, as_json: bool) -> None:
    """Set damaged ledger lines aside so work can go on; nothing is deleted.

    Lines whose checksum fails, that repeat a seq or change a call whose first line is
    gone move, byte for byte, into quarantine/ in the store; lines out of order go back in
    order; deleted lines are recorded. Every call such a line may have belonged to, and
    that had not finished, becomes uncertain: settle it with `gitguard reconcile`.

    Example: gitguard repair --dry-run
    """
    from gitguard.ledger import repair as ledger_repair

    done = ledger_repair.repair(ctx.guard.store, dry_run=dry_run)

    def human() -> None:
        if not done.changed:
            click.echo("nothing to repair: every ledger line reads and the seqs follow")
            return
        verb = "would set" if dry_run else "set"
        for s in done.set_aside:
            click.echo(f"{verb} aside ledger.jsonl line {s.line} (byte {s.offset}, "
                       f"{s.length} bytes): {s.reason}")
        if done.quarantine:
            click.echo(f"  kept in {ctx.guard.store.root / done.quarantine}")
        if done.reordered:
            click.echo(f"{done.reordered} line(s) {'would go' if dry_run else 'went'} back "
                       "into seq order")
        for first, last in done.gaps:
            seqs = str(first) if first == last else f"{first}-{last}"
            click.echo(f"ledger seq {seqs} is missing (a deleted line): recorded")
        for call_id in done.uncertain:
            click.echo(f"{call_id} {'would become' if dry_run else 'is now'} uncertain: check "
                       f"outside, then `gitguard reconcile {call_id} --status succeeded|failed`")
        for call_id in done.lost:
            click.echo(f"{call_id}: its first line is unreadable; what it did is unknown")

    emit(done.to_json(), as_json, human)
