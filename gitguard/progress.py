"""How long work says how far it got, to whoever is watching.

Domain code takes a `Progress` and calls it; it never prints. The CLI passes one that
draws on a terminal (`gitguard.cli.terminal`) and `quiet` everywhere else: piped output,
`--json`, the hooks, the daemon. Standard library only: the snapshot, retention and
rollback modules import it.
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def __call__(self, what: str, done: int = 0, total: int | None = None) -> None:
        """`what` (a phase, in words) is at `done` of `total`; `total` None when its size is
        not known beforehand (a `git status`). A new `what` ends the one before."""


def quiet(what: str, done: int = 0, total: int | None = None) -> None:
    """No one is watching."""
