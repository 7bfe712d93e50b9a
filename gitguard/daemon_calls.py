"""`call begin` and `call end` inside the daemon without click's parser.

Every tool call sends these two command lines to the daemon. Building click's context,
parsing 15 options and dispatching through the lazy group cost ~3-5 ms of CPU per
request, as much as the ledger work itself. `dispatch` reads the plain shapes a hook
sends (`--opt VALUE`, `--opt=VALUE`, flags, one call id) and runs the same steps as
`gitguard.commands.call`; anything else (help, an unknown or misspelt option, a missing
value, a bad choice, a value that looks like an option) returns None and goes through
click as before, so the output and exit code are click's for every input
(tests/daemon/test_daemon_calls_match_cli.py compares the two byte for byte).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from gitguard import callcli
from gitguard.errors import GitguardError

# The parser is the fresh-process one (gitguard.callcli: standard library only), so a
# command line means the same in the daemon and without it.
parse = callcli.parse


def run(parsed: tuple[str, dict[str, Any]], guard: Any,
        crash_log: Callable[[BaseException], str]) -> int:
    """Run a parsed command as `gitguard.cli.run` runs it: the same output, exit code,
    Error/Hint lines and crash log."""
    verb, params = parsed
    try:
        if verb == "begin":
            _begin(guard, **params)
        else:
            _end(guard, **params)
    except GitguardError as exc:
        click.echo(f"Error: {exc.message}", err=True)
        if exc.hint:
            click.echo(f"Hint: {exc.hint}", err=True)
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - as in cli.run: a bug becomes exit 3
        from gitguard.cli import report_unexpected  # loaded already in the daemon

        return report_unexpected(exc, crash_log)
    return 0


def _begin(guard: Any, **params: Any) -> None:
    click.echo(callcli.begin_output(guard, **params))      # the same text as a fresh process


def _end(guard: Any, **params: Any) -> None:
    click.echo(callcli.end_output(guard, **params))
