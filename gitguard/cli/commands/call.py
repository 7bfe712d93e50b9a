from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

# The parameters and the bodies are shared with the click-free path (gitguard.cli.call_parser).
from gitguard.cli.call_parser import (
    ARGUMENT,
    BEGIN,
    END,
    FILE,
    FLAG,
    MULTI,
    Option,
    begin_output,
    end_output,
)
from gitguard.cli.main import Ctx, pass_ctx

F = Callable[..., Any]


def _params(table: tuple[Option, ...]) -> Callable[[F], F]:
    """The click parameters of one of call_parser's tables, in the table's order."""
    def decorate(fn: F) -> F:
        for option in reversed(table):      # decorators apply bottom-up
            fn = _param(option)(fn)
        return fn
    return decorate


def _param(option: Option) -> Callable[[F], F]:
    if option.kind == ARGUMENT:
        return click.argument(option.name)
    extra: dict[str, Any] = {}
    if isinstance(option.kind, tuple):
        extra["type"] = click.Choice(list(option.kind))
    elif option.kind == FILE:
        extra["type"] = click.Path()
    elif option.kind == MULTI:
        extra["multiple"] = True
    elif option.kind == FLAG:
        extra["is_flag"] = True
    return click.option(option.flag, option.name, help=option.help, required=option.required,
                        **extra)


@click.group()
def call() -> None:
    """Ledger a tool call: `begin` before it runs, `end` after it finishes."""


@call.command("begin")
@_params(BEGIN)
@pass_ctx
def call_begin(ctx: Ctx, /, **params: Any) -> None:
    """Record a call as planned, snapshot the workspace, record it started (fsynced).

    Example: gitguard call begin --tool Bash --input '{"command": "npm test"}' --json
    """
    click.echo(begin_output(ctx.guard, **params))


@call.command("end")
@_params(END)
@pass_ctx
def call_end(ctx: Ctx, /, **params: Any) -> None:
    """Snapshot the workspace and record the call's outcome and file patches.

    Example: gitguard call end call_1 --status failed --result "npm ERR! 2 tests failed"
    """
    click.echo(end_output(ctx.guard, **params))
