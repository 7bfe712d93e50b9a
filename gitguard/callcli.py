"""`gitguard call begin` and `call end` in a fresh process, without click.

With no daemon, every agent tool call starts two interpreters that run these two
commands. Importing click and building the command tree is ~15-30 ms of CPU in each
(measured with `-X importtime` and process time); the commands themselves need none of
it. `gitguard.entry` hands the plain command lines a hook or an agent sends
(`[-C DIR] call begin|end` with `--opt VALUE`, `--opt=VALUE`, flags, one call id) to
`here`; anything else (help, an unknown or misspelt option, a missing value, a bad
choice, a value that looks like an option, two `-C`) returns None and goes through
click, so click's messages stay click's. The click commands (commands/call.py, which
the daemon also runs) call the same `begin_output`/`end_output`, and a GitguardError
or a bug ends as `cli.run` ends it: the same Error/Hint lines, exit code and crash log
(tests/cli/test_call_without_click.py compares the two byte for byte).

Standard library only at import.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gitguard.errors import EXIT_INTERNAL, GitguardError, translate

# option -> (parameter name, kind): "value" (last one wins, as in click), "multi", "flag",
# or a tuple of the choices click accepts (commands/call.py declares the same).
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


def run(parsed: tuple[str, dict[str, Any]], open_guard: Any) -> int:
    """As `gitguard.cli.run` runs the click command: the same output, exit code,
    Error/Hint lines and crash log."""
    verb, params = parsed
    try:
        if verb == "begin":
            echo(begin_output(open_guard(), **params))
        else:
            echo(end_output(open_guard(), **params))
    except GitguardError as exc:
        echo(f"Error: {exc.message}", err=True)
        if exc.hint:
            echo(f"Hint: {exc.hint}", err=True)
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - as in cli.run: a bug becomes exit 3
        known = translate(exc)      # a full disk, a read-only store, input too deep
        if known is not None:
            echo(f"Error: {known.message}", err=True)
            if known.hint:
                echo(f"Hint: {known.hint}", err=True)
            return known.exit_code
        log = crash_log(exc)
        echo(f"Error: internal error: {type(exc).__name__}: {exc}", err=True)
        echo(f"Hint: this is a bug in gitguard; the crash log is {log}", err=True)
        return EXIT_INTERNAL
    return 0


def begin_output(guard: Any, *, tool: str, input_text: str | None, input_file: str | None,
                 step_id: str | None, call_id: str | None, writes: tuple[str, ...],
                 idempotency: str | None, replay: str | None, risk: str | None,
                 side_effects: tuple[str, ...], session_id: str | None, confirm: bool,
                 force_replay: bool, as_json: bool) -> str:
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


def end_output(guard: Any, *, call_id: str, status: str, result_text: str | None,
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


# click.echo drops ANSI escape sequences when the stream is not a terminal; the same
# expression as click's, so a call id holding one prints the same either way.
_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")


def echo(text: str, err: bool = False) -> None:
    """What `click.echo(text, err=err)` writes: the text and a newline, flushed."""
    stream = sys.stderr if err else sys.stdout
    if "\033" in text and not stream.isatty():
        text = _ANSI.sub("", text)
    stream.write(text + "\n")
    stream.flush()


def crash_log(exc: BaseException) -> str:
    """Write the traceback to a new private file in the store, else in the user's private
    state directory ($XDG_STATE_HOME/gitguard, ~/.local/state/gitguard); its path.

    Never through a symlink and never over a file (a shared /tmp let a planted symlink
    make a crash overwrite another file), one file per crash, never left empty (a full
    disk removes the file it could not fill: the message says so instead)."""
    import traceback

    text = "".join(traceback.format_exception(exc)).encode("utf-8", "replace")
    tried: list[str] = []
    for directory, mine in _crash_dirs():
        try:
            if mine:
                private_dir(directory)
            return _write_new_log(directory, text)
        except OSError as err:
            tried.append(f"{directory}: {err.strerror}")
    return "not written (" + "; ".join(tried or ["no private directory"]) + ")"


def _crash_dirs() -> list[tuple[Path, bool]]:
    """The store, then the user's state directory (True: gitguard makes it private)."""
    dirs: list[tuple[Path, bool]] = []
    try:
        from gitguard.workspace import discover

        store = discover(Path.cwd()).store_dir
        if store.is_dir():
            dirs.append((store, False))
    except Exception:  # noqa: BLE001 - the crash log must not fail on a second error
        pass
    state = state_dir()
    if state is not None:
        dirs.append((state, True))
    return dirs


def state_dir() -> Path | None:
    """$XDG_STATE_HOME/gitguard, else ~/.local/state/gitguard: the user's own logs when
    there is no store (see private_dir)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state")
    return Path(state) / "gitguard" if os.path.isabs(state) else None


def _write_new_log(directory: Path, text: bytes) -> str:
    from gitguard import clock

    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        base = f"crash-{clock.stamp().replace(':', '')}-{os.getpid()}"
        for attempt in range(100):
            name = base + (f"-{attempt}" if attempt else "") + ".log"
            try:
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)   # may quote inputs
            except FileExistsError:
                continue
            try:
                view = memoryview(text)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=dir_fd)
                raise
            finally:
                os.close(fd)
            return str(directory / name)
        raise FileExistsError(errno.EEXIST, "too many crash logs with this name")
    finally:
        os.close(dir_fd)


def private_dir(directory: Path) -> None:
    """The user's state directory for gitguard: made 0700 if missing; refused when it is a
    symlink, not a directory, another user's, or open to others."""
    os.makedirs(directory.parent, mode=0o700, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(directory, 0o700)
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PermissionError(errno.EACCES, "not a private directory of this user")
