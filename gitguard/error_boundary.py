"""The one error boundary: what an exception becomes for the user.

Domain code raises; only here does an exception become what the user sees: `Error:` and
`Hint:` lines, an exit code (DESIGN.md's CLI contract: 1 the user can fix, 2 usage, 3 a
bug, 4 refused by replay policy) and, for a bug, a crash log. `user_error` decides; the
CLI, the click-free `call begin/end` of a fresh process, and the daemon's fast call path
print its answer (`report`); the daemon sends it over the wire (`to_wire`) and the API
client raises it again (`from_wire`), the same class, message, hint and exit code.

Standard library only at import: the fresh-process call path imports it before the
command runs, and `gitguard.cli.entry` when a daemon stops mid-request.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from pathlib import Path
from typing import Any

from gitguard.errors import BY_CODE, EXIT_USAGE, GitguardError, InternalError, translate


def user_error(exc: BaseException, store_dir: Path | None = None) -> GitguardError:
    """What the user is told about `exc`: a GitguardError as it is; a full disk, a
    read-only store or an input nested too deep as the error the user can fix (exit 1);
    anything else is a bug, an InternalError (exit 3) whose crash log is written now
    (in `store_dir` when given, else the store of the current directory)."""
    known = translate(exc)
    if known is not None:
        return known
    log = crash_log(exc, store_dir)
    return InternalError(f"internal error: {type(exc).__name__}: {exc}",
                         f"this is a bug in gitguard; the crash log is {log}")


def report(exc: BaseException) -> int:
    """Print what the user is told about `exc` on stderr; the exit code."""
    click = sys.modules.get("click")    # an exception of click's means click is loaded
    if click is not None and isinstance(exc, click.ClickException | click.exceptions.Abort
                                        | click.exceptions.Exit):
        return _clicks(click, exc)
    error = user_error(exc)
    echo(f"Error: {error.message}", err=True)
    if error.hint:
        echo(f"Hint: {error.hint}", err=True)
    return error.exit_code


def _clicks(click: Any, exc: Any) -> int:
    """click's own ends of a command line: usage errors, `--help`, an aborted prompt."""
    if isinstance(exc, click.exceptions.Exit):
        return int(exc.exit_code)
    if isinstance(exc, click.exceptions.Abort):
        echo("Aborted.", err=True)
        return 1
    exc.show()
    return int(exc.exit_code) if exc.exit_code else EXIT_USAGE


def text(error: GitguardError) -> str:
    """The Error/Hint lines `report` prints for `error`."""
    return f"Error: {error.message}\n" + (f"Hint: {error.hint}\n" if error.hint else "")


def to_wire(exc: BaseException, store_dir: Path | None = None) -> dict[str, Any]:
    """The daemon's answer for a request that raised `exc`: the exit code and Error/Hint
    text a command line prints, and the error itself for the API client to raise again."""
    error = user_error(exc, store_dir)
    return {"exit": error.exit_code, "stdout": "", "stderr": text(error),
            "error": {"code": error.code, "message": error.message, "hint": error.hint,
                      "exit": error.exit_code}}


def from_wire(answer: dict[str, Any], doing: str) -> GitguardError:
    """The error a daemon's answer without a result carries, as `to_wire` sent it: the
    class its code names (GitguardError for a code this version does not know), with
    the message, hint and exit code it had in the daemon. `doing`: what was asked, for
    an answer that says nothing."""
    error = answer.get("error")
    if not isinstance(error, dict):     # a daemon older than this shape: its Error/Hint text
        lines = str(answer.get("stderr") or "").splitlines()
        return GitguardError(
            next((ln[7:] for ln in lines if ln.startswith("Error: ")),
                 f"the gitguard daemon could not run {doing}"),
            next((ln[6:] for ln in lines if ln.startswith("Hint: ")), None))
    cls = BY_CODE.get(str(error.get("code")), GitguardError)
    hint = error.get("hint")
    rebuilt = cls(str(error.get("message")), hint if isinstance(hint, str) else None)
    code = error.get("exit")
    if isinstance(code, int) and code != rebuilt.exit_code:
        rebuilt.exit_code = code
    return rebuilt


def echo(message: str, err: bool = False) -> None:
    """What `click.echo(message, err=err)` writes: the text and a newline, flushed, with
    ANSI escape sequences dropped when the stream is not a terminal (click's expression),
    so a call id holding one prints the same either way."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    if "\033" in message and not stream.isatty():
        import re

        message = re.sub(r"\033\[[;?0-9]*[a-zA-Z]", "", message)
    stream.write(message + "\n")
    stream.flush()


def crash_log(exc: BaseException, store_dir: Path | None = None) -> str:
    """Write the traceback to a new private file in the store (`store_dir`, else the one
    of the current directory), else in the user's private state directory
    ($XDG_STATE_HOME/gitguard, ~/.local/state/gitguard); its path.

    Never through a symlink and never over a file (a shared /tmp let a planted symlink
    make a crash overwrite another file), one file per crash, never left empty (a full
    disk removes the file it could not fill: the message says so instead)."""
    import traceback

    data = "".join(traceback.format_exception(exc)).encode("utf-8", "replace")
    tried: list[str] = []
    for directory, mine in _crash_dirs(store_dir):
        try:
            if mine:
                private_dir(directory)
            return _write_new_log(directory, data)
        except OSError as err:
            tried.append(f"{directory}: {err.strerror}")
    return "not written (" + "; ".join(tried or ["no private directory"]) + ")"


def _crash_dirs(store_dir: Path | None) -> list[tuple[Path, bool]]:
    """The store, then the user's state directory (True: gitguard makes it private)."""
    dirs: list[tuple[Path, bool]] = []
    try:
        if store_dir is None:
            from gitguard.workspace import discover

            store_dir = discover(Path.cwd()).store_dir
        if store_dir.is_dir():
            dirs.append((store_dir, False))
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


def _write_new_log(directory: Path, data: bytes) -> str:
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
                view = memoryview(data)
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

