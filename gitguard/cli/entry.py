"""The `gitguard` console script: the fast verbs go to the daemon, everything else to click.

Standard library only (imports measured by tests): `call begin`, `call end` and
`hook ...` run once per agent tool call, so when a daemon answers for this
workspace they cost an interpreter start and a socket round trip. The daemon runs
the very same click command and returns its output and exit code, so what is
printed is identical. With no daemon (no socket, refused, a stale one, another
workspace) the full CLI runs in this process, as it always did. `resume` and
`explain` go the same way (a fresh process would otherwise import everything,
fold the ledger and scan the workspace: about a second at 100k files).
"""

from __future__ import annotations

import os
import sys
import time

from gitguard import store_discovery
from gitguard.ipc import client

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: `typing` costs milliseconds to import
if TYPE_CHECKING:
    from typing import Any

_STDIN_OPTIONS = ("--input-file", "--result-file")


def split_global(argv: list[str], cwd: str | None = None) -> tuple[str, list[str]] | None:
    """(directory, the rest) for `[-C DIR]... VERB ...` run in `cwd` (this process's
    directory when None); None for anything unusual."""
    cwd = os.getcwd() if cwd is None else cwd
    rest = list(argv)
    while rest[:1] == ["-C"] and len(rest) >= 2:
        cwd = os.path.join(cwd, rest[1])
        rest = rest[2:]
    if not rest or rest[0].startswith("-"):
        return None
    return os.path.abspath(cwd), rest


def op_of(rest: list[str]) -> str | None:
    """The daemon's op for a command line it answers (client.FORWARDED); None for any
    other (help included: click writes it)."""
    if any(a in ("-h", "--help") for a in rest):
        return None
    return client.FORWARDED.get(tuple(rest[:2])) or client.FORWARDED.get(tuple(rest[:1]))


def forwarded(args: dict[str, Any]) -> tuple[str, dict[str, Any]] | str:
    """The daemon's op and args for a command line a client sent as typed (op "cli": the
    native client sends every one, and this table alone says which the daemon runs); or
    why the daemon does not run it, and the client runs it itself."""
    argv, cwd, env = args.get("argv"), args.get("cwd"), args.get("env")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv) \
            or not isinstance(cwd, str):
        return "not a command line"
    if isinstance(env, dict) and env.get("GITGUARD_FAULT"):
        return "fault injection kills the client's own process"
    parsed = split_global(argv, cwd)
    op = None if parsed is None else op_of(parsed[1])
    if parsed is None or op is None:
        return "not a command the daemon runs"
    where, rest = parsed
    return op, {**args, "argv": rest, "cwd": where}


def wants_stdin(rest: list[str]) -> bool:
    if rest[0] == "hook":
        return not sys.stdin.isatty() if sys.stdin is not None else False
    for i, arg in enumerate(rest):
        if arg in _STDIN_OPTIONS and rest[i + 1:i + 2] == ["-"]:
            return True
        if any(arg == f"{opt}=-" for opt in _STDIN_OPTIONS):
            return True
    return False


def try_daemon(argv: list[str]) -> int | None:
    """The exit code when the daemon ran the command; None to run it here."""
    if os.environ.get("GITGUARD_FAULT"):
        return None     # fault injection kills *this* process at a named point
    parsed = split_global(argv)
    op = None if parsed is None else op_of(parsed[1])
    if parsed is None or op is None:
        return None
    cwd, rest = parsed
    found = store_discovery.find_store(cwd)
    if found is None:
        return None
    root, store = found
    stdin = sys.stdin.buffer.read() if wants_stdin(rest) else None
    global _stdin_read
    _stdin_read = stdin
    try:
        answer = client.request(store, "cli", client.cli_args(argv, os.getcwd(), stdin))
    except client.Unreachable:
        if rest[0] == "hook":
            autostart(root, store)
        if stdin is not None:
            _replay_stdin(stdin)
        return None
    except client.Broken as exc:
        from gitguard.error_boundary import report
        from gitguard.errors import DaemonStopped

        return report(DaemonStopped(
            f"the gitguard daemon stopped while handling this: {exc}",
            "check `gitguard ledger` before repeating the call; `gitguard daemon status` "
            "says whether it runs"))
    sys.stdout.buffer.write(client.out_bytes(answer.get("stdout")))
    sys.stdout.flush()
    sys.stderr.buffer.write(client.out_bytes(answer.get("stderr")))
    sys.stderr.flush()
    code = answer.get("exit", 3)
    return code if isinstance(code, int) else 3


def autostart(root: str, store: str) -> None:
    """A hook found no daemon: start one in the background for the next call, unless
    turned off (`GITGUARD_NO_DAEMON=1`, `[daemon] autostart = false`)."""
    if not os.path.isfile(os.path.join(store, "store.json")):
        return      # not initialised: `gitguard init` decides
    try:
        # The last daemon could not hear (control.mark_unusable): another would spend its
        # seconds finding the same. `gitguard daemon start` tries at once.
        made = os.stat(os.path.join(store, client.UNUSABLE_NAME)).st_mtime
        if time.time() - made < client.UNUSABLE_RETRY_S:
            return
    except OSError:
        pass
    with_site_packages()
    from pathlib import Path

    from gitguard import settings

    try:
        if not settings.daemon_autostart(settings.project_config(Path(root))):
            return
    except Exception:  # noqa: BLE001 - a broken config is reported by the command itself
        return
    import subprocess

    subprocess.Popen([sys.executable, "-m", "gitguard", "-C", root, "daemon", "start"],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


def with_site_packages() -> None:
    """Started without `site` (-S, by `gitguard.hookmain`): do now what the interpreter
    skipped, before anything beyond the standard library is imported."""
    global _site_done
    if sys.flags.no_site and not _site_done:
        import site

        site.main()
        _site_done = True


_site_done = False
_stdin_read: bytes | None = None    # what try_daemon read of stdin (and gave back)


def _replay_stdin(data: bytes) -> None:
    """The fallback reads stdin again: give it back what was already read."""
    import io

    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding=sys.stdin.encoding or "utf-8")


def local_answer(argv: list[str]) -> int | None:
    """`hook git pre-push` is answered here, before the daemon is asked or anything is
    imported: it reads git's ref list and needs no store, no daemon and no pygit2
    (`git_hooks.handle` runs the same `pushcheck.check_push`). None for anything else."""
    parsed = split_global(argv)
    if parsed is None:
        return None
    rest = parsed[1]
    if rest[:3] != ["hook", "git", "pre-push"] or any(a in ("-h", "--help") for a in rest):
        return None
    from gitguard.integrations.pushcheck import check_push

    stdin = sys.stdin.buffer.read() if sys.stdin is not None else b""
    code, message = check_push(rest[3:], stdin)
    if message:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
    return code


def scans(rest: list[str], stdin: bytes | None) -> str | None:
    """The directory whose workspace this command will scan first thing (its `git status`),
    as the command itself will find it; None when it may not scan at all."""
    if op_of(rest) is None:
        return None
    if rest[0] == "resume" or rest[:2] == ["call", "begin"]:
        return ""
    if rest[:3] in (["hook", "git", "post-checkout"], ["hook", "git", "post-merge"],
                    ["hook", "git", "post-rewrite"]):
        return ""
    if rest[:2] == ["hook", "claude-code"] and stdin:
        return _claude_scans(stdin)
    return None


# Claude Code events whose handling takes a snapshot that scans: a begin, and the post
# checkpoints. A call's end scans only when the call is not declared-only (below).
_SCANNING_EVENTS = ("PreToolUse", "UserPromptSubmit", "Stop", "SessionEnd")
_ENDING_EVENTS = ("PostToolUse", "PostToolUseFailure", "PermissionDenied")
# Tools whose end may skip the scan (claude_code.PATH_KEYS, Codex's apply_patch): their end
# gets no early status, which would only be dropped.
_MAY_DECLARE = ("Edit", "Write", "MultiEdit", "NotebookEdit", "apply_patch")


def _claude_scans(stdin: bytes) -> str | None:
    import json

    try:
        payload = json.loads(stdin)
    except (ValueError, RecursionError):    # the hook itself says what is wrong with it
        return None
    if not isinstance(payload, dict):
        return None
    event = payload.get("hook_event_name")
    if event not in _SCANNING_EVENTS and not (
            event in _ENDING_EVENTS and payload.get("tool_name") not in _MAY_DECLARE):
        return None
    from gitguard.integrations.hookcli import event_dir  # the hook's own rule

    return event_dir(payload) or ""


def early_scan(argv: list[str]) -> None:
    """A command that runs here and will scan the workspace (resume, `call begin`, the
    hooks that take a snapshot): start its scan's `git status` now, so git walks the
    workspace while Python imports the rest (gitguard.snapshot.prescan). An early status the
    command does not take is ended at exit."""
    parsed = split_global(argv)
    if parsed is None:
        return
    where = scans(parsed[1], _stdin_read)
    if where is None:
        return
    found = store_discovery.find_store(os.path.join(parsed[0], where))
    if found is not None:
        import atexit

        from gitguard.snapshot import prescan

        prescan.start(*found)
        atexit.register(prescan.drop)   # not taken (refused, nothing to do): end git now


def hook_here(argv: list[str]) -> int | None:
    """No daemon answered: `hook claude-code` and `hook git NAME ...` run here through
    `integrations.hookcli`, the functions the click commands call, without importing click
    and building the command tree. The exit code; None for any other command line (and
    for anything click would read otherwise: a help flag, more than one -C)."""
    parsed = split_global(argv)
    if parsed is None or argv.count("-C") > 1:
        return None
    cwd, rest = parsed
    if any(a in ("-h", "--help") for a in rest):
        return None
    if rest == ["hook", "claude-code"]:
        one_command()
        from gitguard.integrations.hookcli import Opened, claude_code_hook

        sys.stdout.write(claude_code_hook(Opened(cwd), _stdin_read) + "\n")
        sys.stdout.flush()
        return 0
    if rest[:2] == ["hook", "git"] and len(rest) >= 3 and not rest[2].startswith("-"):
        one_command()
        from gitguard.integrations.hookcli import Opened, git_hook

        code, message = git_hook(Opened(cwd), rest[2], rest[3:], _stdin_read)
        if message:
            sys.stderr.write(message + "\n")
            sys.stderr.flush()
        return code
    return None


def call_here(argv: list[str]) -> int | None:
    """No daemon answered: `call begin` and `call end` run here through
    `gitguard.cli.call_parser`, the functions the click commands call, without importing click
    (the same output and exit code). None for anything click should read."""
    parsed = split_global(argv)
    if parsed is None or parsed[1][:1] != ["call"]:
        return None
    one_command()
    from gitguard.cli.call_parser import here

    return here(argv)


def one_command() -> None:
    """This process runs one hook or one call, then exits: no cyclic GC while it does, and
    pygit2 without the CA bundle (gitguard.cli.startup).

    Such a process makes ~750 objects of cyclic garbage whatever the size of its work
    (measured: a PreToolUse at 1k files; at 100k files, a post-checkout after 5000 files
    changed and the PostToolUse of a call that changed 3000), while the collector, run
    every 700 allocations, walks the ~36k objects its imports create again and again:
    ~20 ms of a PreToolUse's CPU at 1k files, for nothing."""
    import gc

    gc.disable()
    lean_pygit2()


def nothing_to_collect_at_exit() -> None:
    """The command ran in this process, which now exits: take what it holds out of the
    cyclic GC's reach (gc.freeze). While the interpreter shuts down it runs full
    collections, each walking every object still alive: after a hook, the ~36k objects of
    pydantic, pygit2 and the models, for ~750 objects of cyclic garbage. Measured on a
    PreToolUse at 1k files: 60-80 ms of the process's ~320 ms of CPU. The memory goes back
    to the system with the process either way, and nothing of gitguard's waits for a
    finalizer at exit (files are closed, and fsynced, where they are written; atexit
    handlers still run). The daemon runs commands through cli.main, never through here."""
    import gc

    gc.freeze()


def lean_pygit2() -> None:
    from gitguard.cli.startup import lean_pygit2

    lean_pygit2()


def main() -> None:
    argv = sys.argv[1:]
    code = local_answer(argv)
    if code is None:
        code = try_daemon(argv)
    if code is not None:
        sys.exit(code)
    try:
        early_scan(argv)
        code = hook_here(argv)
        if code is None:
            code = call_here(argv)
        if code is not None:
            sys.exit(code)
        from gitguard.cli.main import main as cli_main

        cli_main(argv)
    finally:
        nothing_to_collect_at_exit()
