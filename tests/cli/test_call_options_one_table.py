"""One table of `call begin`/`call end` parameters (call_parser.BEGIN, END) builds both the
click commands and the click-free parser: every entry reads the same both ways."""

from __future__ import annotations

from typing import Any, get_args

import click
import pytest

from gitguard import models
from gitguard.cli import call_parser
from gitguard.cli.call_parser import ARGUMENT, FILE, FLAG, MULTI, VALUE, Option
from gitguard.cli.commands.call import call_begin, call_end
from gitguard.cli.main import cli

COMMANDS = [("begin", call_parser.BEGIN, call_begin), ("end", call_parser.END, call_end)]


def _words(option: Option) -> list[list[str]]:
    """Command-line pieces that use `option`, in each shape the fast parser takes."""
    if option.kind == ARGUMENT:
        return [["call_7"]]
    if option.kind == FLAG:
        return [[option.flag]]
    if option.kind == MULTI:
        return [[option.flag, "a", f"{option.flag}=b"]]
    if option.kind in (VALUE, FILE):
        return [[option.flag, "x.json"], [f"{option.flag}=-"], [option.flag, "a", option.flag, "b"]]
    assert isinstance(option.kind, tuple)
    return [[option.flag, choice] for choice in option.kind]


def _required(table: tuple[Option, ...], but: Option) -> list[str]:
    words = []
    for option in table:
        if option is not but and (option.required or option.kind == ARGUMENT):
            words += _words(option)[0]
    return words


def _by_click(command: click.Command, argv: list[str]) -> dict[str, Any]:
    # under gitguard's own context settings: click keeps the help option it makes first
    with click.Context(cli, info_name="gitguard", **cli.context_settings) as parent:
        return dict(command.make_context(command.name, argv, parent=parent).params)


@pytest.mark.parametrize(("verb", "table", "command"), COMMANDS)
def test_the_click_command_has_exactly_the_tables_parameters(
        verb: str, table: tuple[Option, ...], command: click.Command) -> None:
    assert [p.name for p in command.params] == [o.name for o in table]
    for param, option in zip(command.params, table, strict=True):
        if option.kind == ARGUMENT:
            assert isinstance(param, click.Argument)
            continue
        assert isinstance(param, click.Option)
        assert param.opts == [option.flag] and param.help == option.help
        assert param.required == option.required
        assert param.multiple == (option.kind == MULTI)
        assert param.is_flag == (option.kind == FLAG)
        if isinstance(option.kind, tuple):
            assert isinstance(param.type, click.Choice)
            assert tuple(param.type.choices) == option.kind
        elif option.kind == FILE:
            assert isinstance(param.type, click.Path)


@pytest.mark.parametrize(("verb", "table", "command"), COMMANDS)
def test_every_entry_parses_the_same_with_click_and_without(
        verb: str, table: tuple[Option, ...], command: click.Command) -> None:
    for option in table:
        for words in _words(option):
            argv = [*_required(table, option), *words]
            parsed = call_parser.parse(["call", verb, *argv])
            assert parsed is not None, argv
            assert parsed == (verb, _by_click(command, argv)), argv


def test_the_choices_are_the_models() -> None:
    choices = {o.name: o.kind for o in call_parser.BEGIN if isinstance(o.kind, tuple)}
    assert choices == {"idempotency": get_args(models.Idempotency),
                       "replay": get_args(models.ReplayPolicy),
                       "risk": get_args(models.RiskLevel)}
