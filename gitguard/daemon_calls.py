"""`call begin` and `call end` inside the daemon without click's parser.

Every tool call sends these two command lines to the daemon. Building click's context,
parsing 15 options and dispatching through the lazy group cost ~3-5 ms of CPU per
request, as much as the ledger work itself. `dispatch` reads the plain shapes a hook
sends (`--opt VALUE`, `--opt=VALUE`, flags, one call id) and runs the same steps as
`gitguard.commands.call`; anything else (help, an unknown or misspelt option, a missing
value, a bad choice, a value that looks like an option) returns None and goes through
click as before, so the output and exit code are click's for every input
(tests/test_daemon_calls.py compares the two byte for byte).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from gitguard import callcli, jsontext
from gitguard.errors import EXIT_INTERNAL, GitguardError

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
        log = crash_log(exc)
        click.echo(f"Error: internal error: {type(exc).__name__}: {exc}", err=True)
        click.echo(f"Hint: this is a bug in gitguard; the crash log is {log}", err=True)
        return EXIT_INTERNAL
    return 0


def _emit(value: Any, as_json: bool, human: Callable[[], None]) -> None:
    if as_json:
        click.echo(jsontext.dumps(value, indent=2))
    else:
        human()


def _begin(guard: Any, *, tool: str, input_text: str | None, input_file: str | None,
           step_id: str | None, call_id: str | None, writes: tuple[str, ...],
           idempotency: str | None, replay: str | None, risk: str | None,
           side_effects: tuple[str, ...], session_id: str | None, confirm: bool,
           force_replay: bool, as_json: bool) -> None:
    from gitguard.cli import read_json_arg

    tool_input = read_json_arg(input_text, input_file, "--input")
    if tool_input is None:
        tool_input = {}
    if not isinstance(tool_input, dict):
        raise GitguardError("--input must be a JSON object", 'for example {"command": "ls"}')
    entry = guard.begin_call(
        tool, tool_input, step_id=step_id, call_id=call_id, writes=writes,
        idempotency=idempotency, replay=replay, risk=risk, side_effects=side_effects,
        session_id=session_id, confirm=confirm, force_replay=force_replay)
    _emit(entry.to_json(), as_json, lambda: click.echo(entry.call_id))


def _end(guard: Any, *, call_id: str, status: str, result_text: str | None,
         result_file: str | None, as_json: bool) -> None:
    from gitguard.commands.call import read_result  # the same reading as the CLI's

    entry = guard.end_call(call_id, status, read_result(result_text, result_file))
    _emit(entry.to_json(), as_json, lambda: click.echo(
        f"{entry.call_id} {entry.status}: {len(entry.file_patches)} file(s) changed"))
