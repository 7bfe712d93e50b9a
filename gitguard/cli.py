"""The thin click layer: parse, call the library, print. The only place errors become exit codes."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from gitguard import jsontext

# read_json_arg and the crash log live with the click-free `call begin/end` path
from gitguard.callcli import crash_log
from gitguard.callcli import read_json_arg as read_json_arg
from gitguard.errors import EXIT_INTERNAL, EXIT_USAGE, GitguardError, translate

_crash_log = crash_log      # the daemon passes `cli._crash_log` to its click-free path

F = TypeVar("F", bound=Callable[..., Any])


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn)


def emit(value: Any, as_json: bool, human: Callable[[], None] | None = None) -> None:
    if as_json or human is None:
        click.echo(jsontext.dumps(value, indent=2))
    else:
        human()


class Ctx:
    def __init__(self, path: str, open_guard: Callable[[str], Any] | None = None) -> None:
        self.path = path
        self._guard: Any = None
        self._open_guard = open_guard   # the daemon passes its own long-lived Guard

    @property
    def guard(self) -> Any:
        if self._guard is None:
            if self._open_guard is not None:
                self._guard = self._open_guard(self.path)
            else:
                from gitguard.api import Guard

                self._guard = Guard.open(self.path)
        return self._guard


pass_ctx = click.make_pass_decorator(Ctx)


class LazyGroup(click.Group):
    """Commands come from `gitguard.commands.WHERE`, each imported when it is asked for:
    a fresh process imports one verb's module, not all of them (`--help` lists all)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from gitguard.commands import WHERE

        return sorted({*WHERE, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            from gitguard.commands import load

            command = load(cmd_name)
            if command is None:
                return None
            self.add_command(command)
        return self.commands.get(cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "path", default=".", metavar="DIR", help="Run as if started in DIR.")
@click.version_option(package_name="gitguard")
@click.pass_context
def cli(ctx: click.Context, path: str) -> None:
    """gitguard: a tool ledger, hidden checkpoints, resume and rollback for coding agents.

    \b
    Example session:
      gitguard init
      gitguard call begin --tool Write --input '{"file_path": "a.txt"}' --writes a.txt
      gitguard call end call_1 --status succeeded
      gitguard ledger
    """
    ctx.obj = Ctx(path, ctx.obj if callable(ctx.obj) else None)


def run(argv: list[str] | None = None, open_guard: Callable[[str], Any] | None = None) -> int:
    """Run one command line; the exit code. The daemon calls this with its own Guard."""
    try:
        code = cli.main(args=argv, prog_name="gitguard", standalone_mode=False, obj=open_guard)
    except GitguardError as exc:
        click.echo(f"Error: {exc.message}", err=True)
        if exc.hint:
            click.echo(f"Hint: {exc.hint}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return 1
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code if exc.exit_code else EXIT_USAGE
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - the one place a bug becomes exit 3
        return report_unexpected(exc, _crash_log)
    return code if isinstance(code, int) else 0


def report_unexpected(exc: Exception, write_crash_log: Callable[[BaseException], str]) -> int:
    """An exception no command turned into a GitguardError: a full disk, a read-only
    store or input too deep is still the user's to fix (exit 1); anything else is a bug,
    logged (exit 3). Shared by `run` and the daemon's fast call path."""
    known = translate(exc)
    if known is not None:
        click.echo(f"Error: {known.message}", err=True)
        if known.hint:
            click.echo(f"Hint: {known.hint}", err=True)
        return known.exit_code
    log = write_crash_log(exc)
    click.echo(f"Error: internal error: {type(exc).__name__}: {exc}", err=True)
    click.echo(f"Hint: this is a bug in gitguard; the crash log is {log}", err=True)
    return EXIT_INTERNAL


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(argv))
