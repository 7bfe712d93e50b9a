from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import click

from gitguard import clock
from gitguard.cli.main import Ctx, emit, pass_ctx
from gitguard.errors import GitguardError


@click.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), metavar="PATH",
              help="Write the page here (default: <store>/timeline/timeline-<time>.html).")
@click.option("--open", "open_page", is_flag=True,
              help="Open the page with the system's opener (xdg-open, open).")
@click.option("--since", metavar="CKPT", help="Only what happened from checkpoint CKPT on.")
@click.option("--session", "session_id", metavar="S", help="Only session S.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the page's data (schema gitguard.timeline/1) instead of writing it.")
@pass_ctx
def timeline(ctx: Ctx, output: Path | None, open_page: bool, since: str | None,
             session_id: str | None, as_json: bool) -> None:
    """Write one self-contained HTML page of what the agents did, and print its path.

    Sessions with their agents, subagents and turns; every call with its status,
    classification, duration and diff; checkpoints, git moves and your edits on the
    same time axis; who owns each change in the working tree now; pending conflicts;
    and for each call and checkpoint the command that undoes it. Nothing on the page
    is fetched from anywhere; secrets are redacted as in the ledger.

    \b
    Examples:
      gitguard timeline --open
      gitguard timeline --session sess_1 -o review.html
      gitguard timeline --since ckpt_20260814_004 --json
    """
    from gitguard.review import timeline_data, timeline_page

    if as_json and (output or open_page):
        raise GitguardError("--json prints the data; it writes and opens no page",
                            "gitguard timeline --json > timeline.json")
    guard = ctx.guard
    if not guard.store.exists():
        raise GitguardError(f"nothing is recorded for {guard.ws.root} yet (no gitguard store)",
                            "run `gitguard init` and let an agent work; then `gitguard timeline`")
    opener = _opener() if open_page else None
    dirty = [d.to_json() for d in guard.status().dirty]
    document = timeline_data.collect(guard, dirty,
                                     timeline_data.Narrowing(since=since, session=session_id))
    if as_json:
        emit(document, True)
        return
    stamp = clock.now().strftime("%Y%m%d-%H%M%S")
    target = output or guard.store.root / "timeline" / f"timeline-{stamp}.html"
    written = timeline_page.write(document, target)
    click.echo(str(written))
    if opener is not None:
        _open(opener, written)


def _opener() -> list[str]:
    """The system's opener, found before anything is written."""
    names = ["open"] if sys.platform == "darwin" else ["xdg-open", "open"]
    for name in names:
        found = shutil.which(name)
        if found:
            return [found]
    raise GitguardError(f"no program to open the page with ({' or '.join(names)} not found)",
                        "run without --open and open the printed path in a browser")


def _open(opener: list[str], page: Path) -> None:
    try:
        # The opener hands the page to the browser and returns; its output is the browser's.
        subprocess.Popen([*opener, str(page)], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True, env=os.environ.copy())
    except OSError as exc:
        raise GitguardError(f"{opener[0]} could not be started: {exc.strerror or exc}",
                            f"open {page} in a browser yourself") from None
