from __future__ import annotations

import sys

import click

from gitguard.cli.main import Ctx, emit, json_option, pass_ctx
from gitguard.errors import EXIT_CONFLICTS, GitguardError


@click.command("rollback-files")
@click.option("--to", "checkpoint_id", required=True, metavar="CKPT",
              help="The checkpoint to go back to (see `gitguard checkpoints`).")
@click.option("--dry-run", is_flag=True, help="Print the plan; write nothing.")
@click.option("--path", "paths", multiple=True, metavar="PATH",
              help="Only this path (repeatable): e.g. one file put back from a safety "
                   "checkpoint.")
@json_option
@pass_ctx
def rollback_files(ctx: Ctx, checkpoint_id: str, dry_run: bool, paths: tuple[str, ...],
                   as_json: bool) -> None:
    """Undo what agent calls changed after CKPT; never a file the user changed.

    Files still holding exactly what the agent wrote go back to their content at
    CKPT (created ones are deleted, deleted ones recreated). Files the user touched
    too become conflicts and stay as they are. A pre_rollback checkpoint is taken
    first, so `rollback-files --to <it>` undoes the rollback. Exits 5 while
    conflicts are pending.

    Paths reverted on window confidence (a command whose writes cannot be read from its
    words wrote them while it ran) are named with the call: `--path P` with the safety
    checkpoint puts one back.

    Example: gitguard rollback-files --to ckpt_20260814_004 --dry-run
    """
    from gitguard.cli import terminal
    from gitguard.rollback.rollback_files import pending_count
    from gitguard.rollback.rollback_files import rollback_files as run

    guard = ctx.guard
    with terminal.progress(not as_json) as progress:
        result = run(guard, checkpoint_id, dry_run=dry_run, paths=paths, progress=progress)

    def human() -> None:
        verb = "would " if dry_run else ""
        for path in result.restored:
            click.echo(f"{verb}restore {path}")
        for path in result.deleted:
            click.echo(f"{verb}delete  {path}")
        for c in result.conflicts:
            click.echo(f"conflict {c.path}: {c.reason}")
        for move in result.plan.moves:
            outcome = result.move_outcome(move)
            said = {"reverted": f"{verb}move back", "conflict": "conflict", "unchanged": "as is"}
            click.echo(f"moved   {move.source} -> {move.dest} by {move.call_id}: "
                       f"{said[outcome]} (one file, judged across both paths)")
        for path in result.made_dirs:
            click.echo(f"mkdir   {path}/ (it was there before the write this undoes)")
        for path in result.plan.kept_user:
            click.echo(f"kept    {path} (only you changed it)")
        for path, why in result.plan.left:
            click.echo(f"left    {path}: {why}")
        for row in result.to_json()["windowReverted"]:
            click.echo(f"on window confidence: {row['path']} was {row['callId']}'s only because "
                       f"it changed while that call ran (after {row['since'] or 'the target'})")
        if result.applied is not None:
            safety = result.applied.safety.checkpoint_id
            click.echo(f"safety checkpoint {safety} (rollback-files --to it undoes this; "
                       f"--to {safety} --path P puts back one path)")
        if not (result.restored or result.deleted or result.conflicts):
            click.echo(f"nothing to roll back: the agent's files are as at {checkpoint_id}")
        if result.conflicts:
            click.echo("see them with `gitguard conflicts show PATH`; resolve with "
                       "`gitguard conflicts resolve PATH --keep-user|--take-checkpoint|--merge`")

    emit(result.to_json(), as_json, human)
    pending = len(result.conflicts) if dry_run else pending_count(guard)
    if pending:
        click.get_current_context().exit(EXIT_CONFLICTS)


@click.command("restore-session")
@click.option("--to", "checkpoint_id", required=True, metavar="CKPT",
              help="The checkpoint whose run state and messages to return.")
@json_option
@pass_ctx
def restore_session(ctx: Ctx, checkpoint_id: str, as_json: bool) -> None:
    """Return the run state and message history stored at CKPT; touch no file.

    The branch point is recorded in the ledger. The output is JSON for the runtime.

    Example: gitguard restore-session --to ckpt_20260814_004 --json
    """
    from gitguard.recovery.restore import restore_session as run

    value = run(ctx.guard, checkpoint_id)
    emit(value, as_json)   # JSON either way: the runtime reads it


@click.command()
@click.argument("entry_id")
@click.option("--yes", is_flag=True, help="Run the compensation (without it: only show it).")
@json_option
@pass_ctx
def compensate(ctx: Ctx, entry_id: str, yes: bool, as_json: bool) -> None:
    """Undo a call's external effect with the compensation its tool declares.

    Shows the exact command first; runs it only with --yes, as a new ledger entry
    linked to ENTRY_ID. Values from the call are passed as separate arguments,
    never through a shell.

    Example: gitguard compensate call_7 --yes
    """
    from gitguard.recovery import compensate as comp

    guard = ctx.guard
    planned = comp.plan(guard, entry_id)
    if not yes:
        emit({"entryId": entry_id, "argv": list(planned.argv), "ran": False}, as_json,
             lambda: click.echo(f"would run: {planned.display}\n"
                                "nothing was run; pass --yes to run it"))
        return
    done = comp.run(guard, planned)
    emit({"entryId": entry_id, "argv": list(planned.argv), "ran": True,
          "compensationCallId": done.call_id, "status": done.status}, as_json,
         lambda: click.echo(f"ran: {planned.display}\n{done.call_id} {done.status} "
                            f"(compensates {entry_id})"))
    if done.status != "succeeded":
        raise GitguardError(f"the compensation {done.call_id} failed",
                            f"see its output with `gitguard ledger`; {entry_id} is not undone")


@click.group(invoke_without_command=True)
@json_option
@pass_ctx
@click.pass_context
def conflicts(click_ctx: click.Context, ctx: Ctx, as_json: bool) -> None:
    """Conflicts a rollback left: list, show (three-way), resolve.

    \b
    Examples:
      gitguard conflicts --json
      gitguard conflicts show src/app.py
      gitguard conflicts resolve src/app.py --merge
    """
    if click_ctx.invoked_subcommand is not None:
        return
    from gitguard.rollback.conflicts import read

    items = read(ctx.guard.store)

    def human() -> None:
        if not items:
            click.echo("no conflicts")
            return
        from gitguard.calls.attribution import owner_words

        # Who changed it now, in the words `status`, `resume` and `explain` use for it.
        owners = {d.path: owner_words(d.owner, d.confidence)
                  for d in ctx.guard.status().dirty} if any(
                      c.resolution == "pending" for c in items) else {}
        for c in items:
            now = f"now by {owners[c.path]}; " if c.path in owners else ""
            click.echo(f"{c.resolution:<12} {c.path}  ({now}{c.reason}; "
                       f"checkpoint {c.checkpoint_id})")

    emit([c.to_json() for c in items], as_json, human)


@conflicts.command("show")
@click.argument("path")
@click.option("--full", is_flag=True,
              help="Print the three versions whole instead of the two diffs.")
@json_option
@pass_ctx
def conflicts_show(ctx: Ctx, path: str, full: bool, as_json: bool) -> None:
    """Three-way view: every change since the checkpoint as a diff, each named the agent's
    or the user's; the base is the file right before the agent's first write.

    Example: gitguard conflicts show src/app.py
    """
    from gitguard.rollback.conflicts import find, render, three_way

    guard = ctx.guard
    view = three_way(guard, find(guard, path, ctx.path))
    if as_json:
        def text(data: bytes | None) -> str | None:
            return None if data is None else data.decode("utf-8", errors="surrogateescape")

        emit({"conflict": view.conflict.to_json(), "base": text(view.base),
              "agent": text(view.agent), "current": text(view.current),
              "binary": view.binary, "symlink": view.symlink}, True)
        return
    sys.stdout.buffer.write(render(view, full))
    sys.stdout.buffer.flush()


@conflicts.command("resolve")
@click.argument("path")
@click.option("--keep-user", "how", flag_value="keep_user", help="Keep the file as it is.")
@click.option("--take-checkpoint", "how", flag_value="apply_agent",
              help="Write the checkpoint's content, undoing the agent's change and yours "
                   "(yours stays in the safety checkpoint).")
# The first name of --take-checkpoint; it read as "apply the agent's change", the opposite.
@click.option("--apply-agent", "how", flag_value="apply_agent", hidden=True)
@click.option("--merge", "how", flag_value="manual_merge",
              help="Remove the agent's hunks, keep yours; markers where they overlap.")
@json_option
@pass_ctx
def conflicts_resolve(ctx: Ctx, path: str, how: str | None, as_json: bool) -> None:
    """Resolve a conflict. Exits 5 when --merge left overlapping regions marked.

    Example: gitguard conflicts resolve src/app.py --merge
    """
    if how is None:
        raise click.UsageError("choose one of --keep-user, --take-checkpoint, --merge")
    from gitguard.rollback.conflicts import resolve

    done = resolve(ctx.guard, path, how, ctx.path)  # type: ignore[arg-type]
    value = {"path": done.conflict.path, "resolution": done.conflict.resolution,
             "markers": done.markers,
             "safetyCheckpointId": done.applied.safety.checkpoint_id if done.applied else None,
             "entryId": done.applied.entry.call_id if done.applied else None}

    def human() -> None:
        did = {"keep_user": "kept as it is (--keep-user)",
               "apply_agent": "back to the checkpoint's content (--take-checkpoint)",
               "manual_merge": "the agent's hunks removed, yours kept (--merge)"}
        click.echo(f"{done.conflict.path}: "
                   f"{did.get(done.conflict.resolution, done.conflict.resolution)}")
        if done.applied is not None:
            click.echo(f"safety checkpoint {done.applied.safety.checkpoint_id}")
        if done.markers:
            click.echo(f"{done.markers} overlapping region(s) marked with <<<<<<< ||||||| "
                       "======= >>>>>>>; edit them")

    emit(value, as_json, human)
    if done.markers:
        click.get_current_context().exit(EXIT_CONFLICTS)
