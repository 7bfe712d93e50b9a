"""The thin click layer: parse, call the library, print; errors end in gitguard.error_boundary."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from gitguard import jsontext

# read_json_arg lives with the click-free `call begin/end` path
from gitguard.cli.call_parser import read_json_arg as read_json_arg
from gitguard.error_boundary import report

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


    def workspace_path(self, path: str) -> str:
        """A path argument as the user meant it: relative to `-C DIR`, like git's `-C`
        (the process's own directory is not changed: the daemon runs commands too)."""
        return os.path.join(os.path.abspath(self.path), path)


pass_ctx = click.make_pass_decorator(Ctx)


class LazyGroup(click.Group):
    """Commands come from `gitguard.cli.commands.WHERE`, each imported when it is asked for:
    a fresh process imports one verb's module, not all of them (`--help` lists all)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from gitguard.cli.commands import WHERE

        return sorted({*WHERE, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            from gitguard.cli.commands import load

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
    except Exception as exc:  # noqa: BLE001 - the one boundary decides what it becomes
        return report(exc)
    return code if isinstance(code, int) else 0


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(argv))
