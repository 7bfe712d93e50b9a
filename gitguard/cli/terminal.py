"""What a person at a terminal sees: progress on stderr, compact coloured tables on stdout.

rich draws them; it is imported here only, and only once a stream is known to be a
terminal, so piped output, `--json`, the hooks and the daemon never load it. Piped, a
command prints the plain text it always printed (scripts and tests read it). rich
follows the terminal conventions itself: `NO_COLOR` (any non-empty value) turns colour
off, `TERM=dumb` draws no colour and no live progress, `FORCE_COLOR` forces colour on a
terminal. Whether a table is drawn at all is decided by `isatty` alone, so
`FORCE_COLOR` never changes what a pipe receives.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from gitguard.calls.attribution import USER, owner_words
from gitguard.progress import Progress, quiet

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress as Bar
    from rich.progress import TaskID

    from gitguard.api import DirtyPath
    from gitguard.models import ToolLedgerEntry

STATUS_STYLE = {"planned": "blue", "approved": "blue", "started": "cyan",
                "succeeded": "green", "failed": "red", "uncertain": "bold yellow"}
# an agent call's change, by how sure the attribution is; the user's own are plain
CONFIDENCE_STYLE = {"exact": "green", "window": "cyan", "ambiguous": "bold yellow",
                    "unknown": "bold yellow"}


def is_terminal(stream: TextIO | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except ValueError:          # closed
        return False


def stdout_console() -> Console | None:
    """A console for stdout when it is a terminal; None when piped (plain text then)."""
    if not is_terminal(sys.stdout):
        return None
    from rich.console import Console

    return Console(highlight=False)


@contextlib.contextmanager
def progress(shown: bool = True) -> Iterator[Progress]:
    """A `gitguard.progress.Progress` that draws one transient line on stderr (spinner,
    phase, bar, count, elapsed time) when stderr is an interactive terminal and `shown`
    (commands pass `not as_json`); `quiet` otherwise. The line is gone when the block
    ends, so what the command prints next stands alone."""
    if not shown or not is_terminal(sys.stderr):
        yield quiet
        return
    from rich.console import Console
    from rich.progress import BarColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bar

    console = Console(stderr=True)
    if not console.is_interactive:      # TERM=dumb: no cursor movement to redraw with
        yield quiet
        return
    bar = Bar(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
              TextColumn("{task.fields[count]}"), TimeElapsedColumn(),
              console=console, transient=True, redirect_stdout=False, redirect_stderr=False)
    # Work done within the delay draws nothing: a status of a small repository is not
    # "long work", and a line that flashes for 20 ms is noise.
    timer = threading.Timer(_delay(), bar.start)
    timer.daemon = True
    timer.start()
    try:
        yield _Phases(bar)
    finally:
        timer.cancel()
        timer.join()
        bar.stop()          # a no-op for a bar never started


def _delay() -> float:
    """Seconds of work before the progress line appears: GITGUARD_PROGRESS_DELAY, 0.5."""
    try:
        return max(0.0, float(os.environ.get("GITGUARD_PROGRESS_DELAY", "0.5")))
    except ValueError:
        return 0.5


class _Phases:
    """One rich task at a time: a new phase replaces the one before (rich cannot turn a
    task's known total back into an unknown one)."""

    def __init__(self, bar: Bar) -> None:
        self._bar = bar
        self._what: str | None = None
        self._task: TaskID | None = None

    def __call__(self, what: str, done: int = 0, total: int | None = None) -> None:
        count = f"{done}/{total}" if total is not None else ""
        if what == self._what and self._task is not None:
            self._bar.update(self._task, completed=done, total=total, count=count)
            return
        if self._task is not None:
            self._bar.remove_task(self._task)
        self._what = what
        self._task = self._bar.add_task(what, total=total, completed=done, count=count)


def _cell(text: str, style: str = "") -> Any:
    from rich.text import Text

    return Text(text, style=style)      # a Text: `[` in a summary or path is not markup


def print_ledger(console: Console, rows: Sequence[tuple[str | None, ToolLedgerEntry]]) -> None:
    """The ledger as one compact table per worktree, each status in its colour."""
    from rich import box
    from rich.table import Table

    groups: dict[str | None, list[ToolLedgerEntry]] = {}
    for root, entry in rows:
        groups.setdefault(root, []).append(entry)
    for root, entries in groups.items():
        if root is not None:
            console.print(_cell(f"# {root}", "bold"))
        table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True,
                  show_edge=False)
        for name in ("call", "status", "tool", "idempotency", "replay"):
            table.add_column(name, no_wrap=True)
        table.add_column("summary", no_wrap=True, overflow="ellipsis", ratio=1)
        for e in entries:
            table.add_row(_cell(e.call_id), _cell(e.status, STATUS_STYLE.get(e.status, "")),
                          _cell(e.tool_name),
                          _cell(e.idempotency,
                                "magenta" if e.idempotency == "non_idempotent" else ""),
                          _cell(e.replay_policy), _cell(e.summary))
        console.print(table)


def print_dirty(console: Console, dirty: Sequence[DirtyPath]) -> None:
    """`status`'s changed paths as a table: change, path, and who changed it in the words
    every command uses (`owner_words`), coloured by confidence (the user's own plain)."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True,
                  show_edge=False)
    table.add_column("", no_wrap=True)
    table.add_column("path", overflow="fold")
    table.add_column("by", no_wrap=True)
    for d in dirty:
        doubtful = d.confidence in ("ambiguous", "unknown")
        style = "" if d.owner == USER and not doubtful else \
            CONFIDENCE_STYLE.get(d.confidence, "")
        table.add_row(_cell(d.change, "bold"), _cell(d.path),
                      _cell(owner_words(d.owner, d.confidence), style))
    console.print(table)
