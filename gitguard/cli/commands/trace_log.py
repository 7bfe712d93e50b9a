from __future__ import annotations

import sys

import click

from gitguard import jsontext
from gitguard.cli.main import Ctx, emit, json_option, pass_ctx


@click.command()
@click.option("--session", "session_id", help="Only this session's events.")
@click.option("--summary", is_flag=True,
              help="Per session: calls, time in tools, snapshot overhead, bytes stored.")
@click.option("--follow", "-f", is_flag=True,
              help="Keep printing events as they are recorded (Ctrl-C stops).")
@json_option
@pass_ctx
def trace(ctx: Ctx, session_id: str | None, summary: bool, follow: bool, as_json: bool) -> None:
    """Trace events: checkpoints, tool start/end, recovery, rollback, conflicts, gc.

    \b
    Example: gitguard trace --summary
    Example: gitguard trace --follow --json     (one JSON object per line)
    """
    from gitguard.storage import trace_log as trace_mod
    from gitguard.storage import trace_view

    store = ctx.guard.store
    if follow:
        if summary:
            raise click.UsageError("--follow prints events; --summary is for a finished trace")
        try:
            for event in trace_view.follow(store):
                if session_id and event.session_id != session_id:
                    continue
                line = (jsontext.dumps(event.to_json()) if as_json
                        else trace_view.line_of(event))
                click.echo(line)
                sys.stdout.flush()
        except KeyboardInterrupt:
            return
        return
    events = [e for e in trace_mod.read(store) if not session_id or e.session_id == session_id]
    if summary:
        rows = trace_view.summarize(events)

        def human_summary() -> None:
            click.echo(f"{'session':<26} {'calls':>5} {'failed':>6} {'in tools':>10} "
                       f"{'overhead':>10} {'ckpts':>5} {'snapshots':>10} {'stored':>10}")
            for s in rows:
                click.echo(f"{s.session_id:<26} {s.calls:>5} {s.failed:>6} "
                           f"{s.tool_ms / 1000:>9.2f}s {s.overhead_ms / 1000:>9.2f}s "
                           f"{s.checkpoints:>5} {s.snapshot_ms / 1000:>9.2f}s "
                           f"{s.bytes_stored / 1e6:>8.3f}MB")

        emit([s.to_json() for s in rows], as_json, human_summary)
        return

    def human() -> None:
        for event in events:
            click.echo(trace_view.line_of(event))

    emit([e.to_json() for e in events], as_json, human)
