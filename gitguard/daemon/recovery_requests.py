"""`gitguard resume` and `gitguard explain` answered by the daemon (ops `resume`, `explain`).

An agent that crashed usually leaves its daemon running, and a fresh `gitguard resume`
process would import pygit2, pydantic and click, fold the ledger and scan the whole
workspace (a `git status`-class walk). The daemon has the ledger read (its tail cache),
and its tree is current from the watcher's dirty set, so it answers without either.

It runs the very same click command against its own Guard (`Daemon.run_cli`), so the
answer is byte-identical to the in-process one; every case in which the client runs
the command itself still applies (no daemon, another user's socket, `GITGUARD_FAULT`
set, another workspace, a daemon stopping or too old to know these ops).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gitguard.daemon.daemon import Daemon


def handle(daemon: Daemon, op: str, args: dict[str, Any]) -> dict[str, Any]:
    argv = args.get("argv")
    if not isinstance(argv, list) or argv[:1] != [op]:
        return {"fallback": True, "reason": f"not a `gitguard {op}` command line"}
    answer = daemon.run_cli(args)
    if op == "resume" and not answer.get("fallback"):
        _close_windows(daemon)
    return answer


def _close_windows(daemon: Daemon) -> None:
    """The calls resume marked uncertain stop collecting changes now, not at the next
    `call begin`: what happens in the workspace from here on is not theirs."""
    try:
        daemon.guard.settle_windows()
    except Exception:  # noqa: BLE001 - resume has answered; the next begin settles them again
        daemon.log.exception("closing the windows of resumed calls failed")
