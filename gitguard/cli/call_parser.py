"""`gitguard call begin` and `call end`: their options, and a parser without click.

With no daemon, every agent tool call starts two interpreters that run these two
commands. Importing click and building the command tree is ~15-30 ms of CPU in each
(measured with `-X importtime` and process time); the commands themselves need none of
it. BEGIN and END list the commands' parameters once: the click commands
(commands/call.py, which the daemon also runs) are built from them, and so is `parse`,
which reads the plain command lines a hook or an agent sends (`[-C DIR] call begin|end`
with `--opt VALUE`, `--opt=VALUE`, flags, one call id); anything else (help, an unknown
or misspelt option, a missing value, a bad choice, a value that looks like an option,
two `-C`) returns None and goes through click, so click's messages stay click's.
`gitguard.cli.entry` hands a fresh process's command line to `here`, the daemon hands its
requests' to `run` (`Daemon.run_cli`). Both paths call the same
`begin_output`/`end_output` as the click commands, and a GitguardError or a bug ends in
the one error boundary (gitguard.error_boundary): the same Error/Hint lines, exit code
and crash log (tests/cli/test_call_without_click.py and
tests/daemon/test_daemon_calls_match_cli.py compare them byte for byte).

Standard library only at import.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from gitguard.error_boundary import echo, report
from gitguard.errors import GitguardError

if TYPE_CHECKING:
    from gitguard.guard_context import GuardContext
    from gitguard.models import Idempotency, ReplayPolicy, RiskLevel

# What a parameter takes: one value (the last one wins, as in click), a file name ('-':
# stdin), a value per repetition, nothing (a flag), the call id (the one positional
# argument), or one of a tuple of choices.
VALUE, FILE, MULTI, FLAG, ARGUMENT = "value", "file", "multi", "flag", "argument"


class Option(NamedTuple):
    flag: str                       # "--tool"; the metavar of the positional argument
    name: str                       # the parameter of begin_output / end_output
    kind: str | tuple[str, ...]     # VALUE, FILE, MULTI, FLAG, ARGUMENT, or the choices
    help: str | None = None
    required: bool = False


JSON = Option("--json", "as_json", FLAG, "Print JSON.")
BEGIN = (
    Option("--tool", "tool", VALUE, "Tool name, e.g. Bash, Edit, send_email.", required=True),
    Option("--input", "input_text", VALUE, "The tool input as JSON."),
    Option("--input-file", "input_file", FILE, "Read the input JSON from a file ('-': stdin)."),
    Option("--step", "step_id", VALUE, "The agent step this call belongs to."),
    Option("--call-id", "call_id", VALUE, "Call id (default: call_N)."),
    Option("--writes", "writes", MULTI, "A path the call declares it writes (repeatable)."),
    Option("--idempotency", "idempotency", ("idempotent", "conditional", "non_idempotent"),
           "Override the classification."),
    Option("--replay", "replay", ("auto", "ask", "never"), "Override the replay policy."),
    Option("--risk", "risk", ("low", "medium", "high", "critical"), "Override the risk level."),
    Option("--side-effect", "side_effects", MULTI, "A side effect (repeatable)."),
    Option("--session", "session_id", VALUE, "Agent session (default: the open one)."),
    Option("--confirm", "confirm", FLAG, "Run a call whose replay policy is `ask` again."),
    Option("--force-replay", "force_replay", FLAG, "Run a `never` call again (ledgered)."),
    JSON,
)
END = (
    Option("CALL_ID", "call_id", ARGUMENT),
    Option("--status", "status", ("succeeded", "failed"), required=True),
    Option("--result", "result_text", VALUE, "The tool's result or error text."),
    Option("--result-file", "result_file", FILE, "Read the result from a file ('-': stdin)."),
    JSON,
)
COMMANDS = {"begin": BEGIN, "end": END}


def parse(argv: Sequence[str]) -> tuple[str, dict[str, Any]] | None:
    """("begin" | "end", parameters as click would pass them), or None: let click do it."""
    if len(argv) < 2 or argv[0] != "call" or argv[1] not in COMMANDS:
        return None
    verb = argv[1]
    table = COMMANDS[verb]
    flags = {o.flag: o for o in table if o.kind != ARGUMENT}
    arguments = [o for o in table if o.kind == ARGUMENT]
    params: dict[str, Any] = {
        o.name: () if o.kind == MULTI else False if o.kind == FLAG else None for o in table}
    positional: list[str] = []
    tokens = list(argv[2:])
    at = 0
    while at < len(tokens):
        token = tokens[at]
        at += 1
        if not token.startswith("-"):
            positional.append(token)
            continue
        flag, eq, inline = token.partition("=")
        option = flags.get(flag)
        if option is None:
            return None                     # --help, --, -x, a typo: click's messages
        if option.kind == FLAG:
            if eq:
                return None
            params[option.name] = True
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
        if isinstance(option.kind, tuple) and value not in option.kind:
            return None                     # "invalid choice"
        params[option.name] = ((*params[option.name], value) if option.kind == MULTI
                               else value)
    if len(positional) != len(arguments):
        return None
    params.update(zip((o.name for o in arguments), positional, strict=True))
    if any(o.required and params[o.name] is None for o in table):
        return None                         # "Missing option"
    return verb, params


def here(argv: Sequence[str]) -> int | None:
    """Run `[-C DIR] call begin|end ...` in this process: the exit code; None for any
    command line click should read."""
    path = "."                  # click's default for -C: Guard.open resolves it the same
    rest = list(argv)
    if rest[:1] == ["-C"]:
        if len(rest) < 3:
            return None
        path, rest = rest[1], rest[2:]
    if "-C" in rest[:1] or any(a in ("-h", "--help") for a in rest):
        return None
    parsed = parse(rest)
    if parsed is None:
        return None
    from gitguard.api import Guard

    return run(parsed, lambda: Guard.open(path))


def run(parsed: tuple[str, dict[str, Any]], open_guard: Callable[[], GuardContext]) -> int:
    """As `gitguard.cli.main.run` runs the click command: the same output, exit code,
    Error/Hint lines and crash log."""
    verb, params = parsed
    try:
        output = begin_output if verb == "begin" else end_output
        echo(output(open_guard(), **params))
    except Exception as exc:  # noqa: BLE001 - the one boundary decides what it becomes
        return report(exc)
    return 0


def begin_output(guard: GuardContext, *, tool: str, input_text: str | None, input_file: str | None,
                 step_id: str | None, call_id: str | None, writes: tuple[str, ...],
                 idempotency: Idempotency | None, replay: ReplayPolicy | None,
                 risk: RiskLevel | None, side_effects: tuple[str, ...],
                 session_id: str | None, confirm: bool, force_replay: bool,
                 as_json: bool) -> str:
    """Record a call as planned, snapshot, record it started; the text to print."""
    tool_input = read_json_arg(input_text, input_file, "--input")
    if tool_input is None:
        tool_input = {}
    if not isinstance(tool_input, dict):
        raise GitguardError("--input must be a JSON object", 'for example {"command": "ls"}')
    entry = guard.begin_call(
        tool, tool_input, step_id=step_id, call_id=call_id, writes=writes,
        idempotency=idempotency, replay=replay, risk=risk, side_effects=side_effects,
        session_id=session_id, confirm=confirm, force_replay=force_replay)
    return _json(entry.to_json()) if as_json else str(entry.call_id)


def end_output(guard: GuardContext, *, call_id: str, status: str, result_text: str | None,
               result_file: str | None, as_json: bool) -> str:
    """Snapshot and record the call's outcome and patches; the text to print."""
    entry = guard.end_call(call_id, status, read_result(result_text, result_file))
    if as_json:
        return _json(entry.to_json())
    return f"{entry.call_id} {entry.status}: {len(entry.file_patches)} file(s) changed"


def _json(value: Any) -> str:
    from gitguard import jsontext

    return jsontext.dumps(value, indent=2)


def read_json_arg(text: str | None, file: str | None, what: str) -> Any:
    """JSON from an option or a file ('-' for stdin), with a clear error when it is not JSON."""
    if file is not None:
        try:
            text = sys.stdin.read() if file == "-" else Path(file).read_text()
        except OSError as exc:
            raise GitguardError(f"cannot read {what} file {file}: {exc.strerror}",
                                "check the path") from None
        except UnicodeDecodeError as exc:
            raise GitguardError(f"{what} file {file} is not UTF-8 text: {exc.reason}",
                                "JSON is UTF-8 text") from None
        except MemoryError:
            raise GitguardError(f"{what} file {file} is too large to read",
                                "pass a smaller value") from None
    if text is None:
        return None
    from gitguard import jsontext

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise GitguardError(f"{what} is not valid JSON: {exc}",
                            'quote it for the shell, e.g. --input \'{"path": "a.txt"}\'') from None
    except RecursionError:      # deeper than json's C parser goes (~1,000 levels)
        raise GitguardError(f"{what} nests deeper than {jsontext.MAX_DEPTH} levels of lists "
                            "and objects", "pass a flatter value (a tool's input is usually "
                            "a few levels deep)") from None
    except MemoryError:
        raise GitguardError(f"{what} is too large to read", "pass a smaller value") from None
    jsontext.check_depth(value, what)
    return value


def read_result(result_text: str | None, result_file: str | None) -> str | bytes | None:
    """`--result` or `--result-file` ('-': stdin), as `call end` and the daemon read them."""
    if result_file is None:
        return result_text
    try:
        return sys.stdin.buffer.read() if result_file == "-" else Path(result_file).read_bytes()
    except OSError as exc:
        raise GitguardError(f"cannot read {result_file}: {exc.strerror}",
                            "check the path") from None
