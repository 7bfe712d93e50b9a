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

from collections.abc import Callable, Sequence
from typing import Any

import click

from gitguard import jsontext
from gitguard.errors import EXIT_INTERNAL, GitguardError

# option -> (parameter name, kind): "value" (last one wins, as in click), "multi", "flag",
# or a tuple of the choices click accepts.
_BEGIN: dict[str, tuple[str, Any]] = {
    "--tool": ("tool", "value"), "--input": ("input_text", "value"),
    "--input-file": ("input_file", "value"), "--step": ("step_id", "value"),
    "--call-id": ("call_id", "value"), "--writes": ("writes", "multi"),
    "--idempotency": ("idempotency", ("idempotent", "conditional", "non_idempotent")),
    "--replay": ("replay", ("auto", "ask", "never")),
    "--risk": ("risk", ("low", "medium", "high", "critical")),
    "--side-effect": ("side_effects", "multi"), "--session": ("session_id", "value"),
    "--confirm": ("confirm", "flag"), "--force-replay": ("force_replay", "flag"),
    "--json": ("as_json", "flag"),
}
_END: dict[str, tuple[str, Any]] = {
    "--status": ("status", ("succeeded", "failed")), "--result": ("result_text", "value"),
    "--result-file": ("result_file", "value"), "--json": ("as_json", "flag"),
}


def parse(argv: Sequence[str]) -> tuple[str, dict[str, Any]] | None:
    """("begin" | "end", parameters as click would pass them), or None: let click do it."""
    if len(argv) < 2 or argv[0] != "call" or argv[1] not in ("begin", "end"):
        return None
    verb = argv[1]
    spec = _BEGIN if verb == "begin" else _END
    params: dict[str, Any] = {}
    for name, kind in spec.values():
        params[name] = () if kind == "multi" else False if kind == "flag" else None
    positional: list[str] = []
    tokens = list(argv[2:])
    at = 0
    while at < len(tokens):
        token = tokens[at]
        at += 1
        if not token.startswith("-"):
            positional.append(token)
            continue
        option, eq, inline = token.partition("=")
        known = spec.get(option)
        if known is None:
            return None                     # --help, --, -x, a typo: click's messages
        name, kind = known
        if kind == "flag":
            if eq:
                return None
            params[name] = True
            continue
        if eq:
            value = inline
        elif at < len(tokens):
            value = tokens[at]
            at += 1
        else:
            return None                     # "requires an argument"
        if value.startswith("-") and value != "-":
            return None                     # click's rules for these are subtle
        if isinstance(kind, tuple) and value not in kind:
            return None                     # "invalid choice"
        params[name] = (*params[name], value) if kind == "multi" else value
    if verb == "begin":
        if positional or params["tool"] is None:
            return None
    else:
        if len(positional) != 1 or params["status"] is None:
            return None
        params["call_id"] = positional[0]
    return verb, params


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
