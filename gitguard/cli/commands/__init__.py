"""One module per CLI verb; each exports click commands, found here by name.

The table names each command's module, so a command line imports only its own verb's
module (`gitguard resume` need not load verify, sealing, rollback or the integrations);
`gitguard --help` loads them all to list them.
"""

from __future__ import annotations

import importlib

import click

# command name -> (module in gitguard.cli.commands, attribute)
WHERE: dict[str, tuple[str, str]] = {
    "init": ("session", "init"), "status": ("query", "status"),
    "session": ("session", "session"), "call": ("call", "call"),
    "checkpoint": ("checkpoint", "checkpoint"), "checkpoints": ("checkpoint", "checkpoints"),
    "ledger": ("query", "ledger"), "diff": ("query", "diff"), "verify": ("query", "verify"),
    "demo": ("demo", "demo"),
    "resume": ("recovery", "resume"), "explain": ("recovery", "explain"),
    "reconcile": ("recovery", "reconcile"), "repair": ("recovery", "repair"),
    "gc": ("retention", "gc"), "pin": ("retention", "pin"),
    "trace": ("trace_log", "trace"), "key": ("key", "key"),
    "hooks": ("hooks", "hooks"), "hook": ("hooks", "hook"), "refs": ("hooks", "refs"),
    "integrate": ("integrate", "integrate"), "run": ("run", "run"),
    "rollback-files": ("rollback", "rollback_files"),
    "restore-session": ("rollback", "restore_session"),
    "compensate": ("rollback", "compensate"), "conflicts": ("rollback", "conflicts"),
    "daemon": ("daemon", "daemon"), "timeline": ("timeline", "timeline"),
    "blame": ("blame", "blame"),
}


def load(name: str) -> click.Command | None:
    """The command called `name`, its module imported now; None when there is none."""
    where = WHERE.get(name)
    if where is None:
        return None
    command = getattr(importlib.import_module(f"gitguard.cli.commands.{where[0]}"), where[1])
    assert isinstance(command, click.Command) and command.name == name, name
    return command
