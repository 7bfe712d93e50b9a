"""The storage verbs (gc, trace, key), registered together with one list entry."""

from __future__ import annotations

import click

from gitguard.commands.key import key

STORAGE_COMMANDS: list[click.Command] = [key]
