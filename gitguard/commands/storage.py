"""The storage verbs (gc, trace, key), registered together with one list entry."""

from __future__ import annotations

import click

from gitguard.commands.gc import gc, pin
from gitguard.commands.key import key
from gitguard.commands.trace import trace

STORAGE_COMMANDS: list[click.Command] = [gc, pin, trace, key]
