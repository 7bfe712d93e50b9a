from __future__ import annotations

import click

from gitguard.cli.main import Ctx, emit, json_option, pass_ctx
from gitguard.errors import UnknownId


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


@click.command()
@click.option("--dry-run", is_flag=True, help="Say what would go; change nothing.")
@click.option("--repack-repository/--no-repack-repository", default=None,
              help="Repack your whole repository at the end (git repack -a -d --cruft), "
                   "or not; default: [gc] repack_repository, up to repack_max_mb.")
@json_option
@pass_ctx
def gc(ctx: Ctx, dry_run: bool, repack_repository: bool | None, as_json: bool) -> None:
    """Drop checkpoints the retention policy lets go, then pack gitguard's objects.

    \b
    Kept: the first and last checkpoints of each session ([gc] keep_first, keep_last),
    every pre_rollback and resume checkpoint, pinned ones, sessions active within
    keep_days, unfinished calls' pre checkpoints, open conflicts' checkpoints.
    Then packs gitguard's objects and, so they are stored as deltas of yours, runs
    `git repack -a -d -l --cruft` on the repository (as `git gc` would; every unreachable
    object is kept in a cruft pack). Never runs `git gc` or `git prune`.

    \b
    Example: gitguard gc --dry-run
    """
    from gitguard.cli import terminal
    from gitguard.retention import collect as gc_mod

    guard = ctx.guard
    with terminal.progress(not as_json) as progress:
        report = gc_mod.run(guard.store, guard.snap, guard.settings, dry_run=dry_run,
                            repack_repository=repack_repository, progress=progress)

    def human() -> None:
        verb = "would drop" if dry_run else "dropped"
        click.echo(f"checkpoints: {len(report.kept)} kept, {len(report.pruned)} {verb}")
        click.echo(f"snapshot commits {verb}: {report.commits_dropped} "
                   f"(in {len(report.sessions_rewritten)} session chain(s))")
        click.echo(f"message blobs {verb}: {report.message_blobs_dropped}")
        click.echo(f"unreferenced artifacts {verb}: {len(report.artifacts_removed)}")
        click.echo(f"trace events {verb}: {report.trace_events_dropped}")
        if dry_run:
            if report.repack_repository:
                click.echo("would then repack the whole repository (git repack -a -d --cruft)")
            if report.repack_note:
                click.echo(f"note: {report.repack_note}")
            return
        click.echo(f"attribution rows dropped: {report.attribution_rows_dropped}")
        if report.pack is not None:
            p = report.pack
            click.echo(f"packed: {p.objects} objects into {_mb(p.pack_bytes)}; "
                       f"{p.dropped} unreachable left out; loose objects "
                       f"{p.loose_before} -> {p.loose_after}")
            for note in p.notes:
                click.echo(f"note: {note}")
        if report.repack is not None:
            r = report.repack
            click.echo(f"repository repacked: {r.packs_before} packs, {_mb(r.bytes_before)} -> "
                       f"{r.packs_after} packs, {_mb(r.bytes_after)} "
                       f"in {r.duration_ms / 1000:.2f}s")
        if report.repack_note:
            click.echo(f"note: {report.repack_note}")
        for key in report.before:
            click.echo(f"{key}: {_mb(report.before[key])} -> {_mb(report.after[key])}")
        click.echo(f"freed {_mb(report.freed_bytes)} in {report.duration_ms / 1000:.2f}s")

    emit(report.to_json(), as_json, human)


@click.command()
@click.argument("checkpoint_id")
@click.option("--remove", is_flag=True, help="Unpin instead.")
@json_option
@pass_ctx
def pin(ctx: Ctx, checkpoint_id: str, remove: bool, as_json: bool) -> None:
    """Pin a checkpoint so `gitguard gc` always keeps it.  Example: gitguard pin ckpt_20260101_004
    """
    from gitguard.retention import collect as gc_mod

    store = ctx.guard.store
    with store.writing():
        known = {r.checkpoint_id for r in ctx.guard.checkpoints()}
        if checkpoint_id not in known and not remove:
            raise UnknownId(f"no checkpoint {checkpoint_id!r}",
                            "list checkpoints with `gitguard checkpoints`")
        pins = [p for p in gc_mod.read_pins(store) if p != checkpoint_id]
        gc_mod.write_pins(store, pins if remove else [*pins, checkpoint_id])
        now = gc_mod.read_pins(store)
    emit({"pinned": now}, as_json, lambda: click.echo(
        f"{'unpinned' if remove else 'pinned'} {checkpoint_id}"))
