"""One module per CLI verb; each exports click commands listed here."""

from __future__ import annotations

import click

from gitguard.commands.call import call
from gitguard.commands.checkpoint import checkpoint, checkpoints
from gitguard.commands.daemon import daemon
from gitguard.commands.demo import demo
from gitguard.commands.hooks import hook, hooks
from gitguard.commands.integrate import integrate
from gitguard.commands.query import diff, ledger, status, verify
from gitguard.commands.recovery import explain, reconcile, resume
from gitguard.commands.rollback import compensate, conflicts, restore_session, rollback_files
from gitguard.commands.run import run
from gitguard.commands.session import init, session
from gitguard.commands.storage import STORAGE_COMMANDS

COMMANDS: list[click.Command] = [
    init, status, session, call, checkpoint, checkpoints, ledger, diff, verify, demo,
    resume, explain, reconcile,
    *STORAGE_COMMANDS,
    hooks, hook, integrate, run,
    rollback_files, restore_session, compensate, conflicts,
    daemon,
]
