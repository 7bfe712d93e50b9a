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

from gitguard import client

FAST = (("call", "begin"), ("call", "end"), ("hook",))
# Answered by the daemon too (gitguard.recovery_daemon): run after an agent crash, when
# the daemon usually still runs with the ledger read and the workspace tree current.
RECOVERY = (("resume",), ("explain",))
_STDIN_OPTIONS = ("--input-file", "--result-file")


def split_global(argv: list[str]) -> tuple[str, list[str]] | None:
    """(directory, the rest) for `[-C DIR]... VERB ...`; None for anything unusual."""
    cwd = os.getcwd()
    rest = list(argv)
    while rest[:1] == ["-C"] and len(rest) >= 2:
        cwd = os.path.join(cwd, rest[1])
        rest = rest[2:]
    if not rest or rest[0].startswith("-"):
        return None
    return os.path.abspath(cwd), rest


def is_fast(rest: list[str]) -> bool:
    if any(a in ("-h", "--help") for a in rest):
        return False
    return any(tuple(rest[:len(verb)]) == verb for verb in FAST + RECOVERY)


def op_of(rest: list[str]) -> str:
    """The daemon's name for a forwarded command line."""
    if rest[0] in ("hook", "resume", "explain"):
        return rest[0]
    return f"call.{rest[1]}"


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
    if parsed is None or not is_fast(parsed[1]):
        return None
    cwd, rest = parsed
    found = client.find_store(cwd)
    if found is None:
        return None
    root, store = found
    stdin = sys.stdin.buffer.read() if wants_stdin(rest) else None
    op = op_of(rest)
    try:
        answer = client.request(store, op, client.cli_args(rest, cwd, stdin))
    except client.Unreachable:
        if rest[0] == "hook":
            autostart(root, store)
        if stdin is not None:
            _replay_stdin(stdin)
        return None
    except client.Broken as exc:
        sys.stderr.write(f"Error: the gitguard daemon stopped while handling this: {exc}\n"
                         "Hint: check `gitguard ledger` before repeating the call; "
                         "`gitguard daemon status` says whether it runs\n")
        return 3
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


def _replay_stdin(data: bytes) -> None:
    """The fallback reads stdin again: give it back what was already read."""
    import io

    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding=sys.stdin.encoding or "utf-8")


def early_scan(argv: list[str]) -> None:
    """`resume` runs here, in this process: start its scan's `git status` now, so git
    walks the workspace while Python imports the rest (gitguard.prescan)."""
    parsed = split_global(argv)
    if parsed is None or parsed[1][0] != "resume" or not is_fast(parsed[1]):
        return
    found = client.find_store(parsed[0])
    if found is not None:
        from gitguard import prescan

        prescan.start(*found)


def main() -> None:
    argv = sys.argv[1:]
    code = try_daemon(argv)
    if code is not None:
        sys.exit(code)
    early_scan(argv)
    from gitguard.cli import main as cli_main

    cli_main(argv)
