"""`call begin` and `call end` inside the daemon without click's parser.

Every tool call sends these two command lines to the daemon. Building click's context,
parsing 15 options and dispatching through the lazy group cost ~3-5 ms of CPU per
request, as much as the ledger work itself. The plain shapes a hook sends are read by
the fresh-process parser (gitguard.cli.call_parser: the same option table as the click command)
and run by the same `call_parser.run`, against the daemon's Guard; anything else (help, an
unknown or misspelt option, a missing value, a bad choice, a value that looks like an
option) returns None and goes through click as before, so the output and exit code are
click's for every input (tests/daemon/test_daemon_calls_match_cli.py compares the two
byte for byte).
"""

from __future__ import annotations

from typing import Any

from gitguard.cli import call_parser

parse = call_parser.parse


def run(parsed: tuple[str, dict[str, Any]], guard: Any) -> int:
    """Run a parsed command as `gitguard.cli.main.run` runs it: the same output, exit code,
    Error/Hint lines and crash log."""
    return call_parser.run(parsed, lambda: guard)
