"""docs/cli.md's command reference: every command's `--help`, generated from the click tree.

`python -m tests.helpers.cli_reference` rewrites docs/cli.md from its `## Commands` heading
to the end (the hand-written part above it is kept); tests/cli/test_cli_reference.py fails
when the page no longer holds the current `--help` of every command.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click

from gitguard.cli.main import cli

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
HEADING = "## Commands\n"
WIDTH = 78      # what click prints in an 80-column terminal, fixed so regenerating is stable


def commands() -> Iterator[tuple[str, str]]:
    """(`gitguard VERB ...`, its --help text) for every visible command, group first."""
    def walk(cmd: click.Command, path: list[str],
             parent: click.Context | None) -> Iterator[tuple[str, str]]:
        ctx = click.Context(cmd, info_name=path[-1], parent=parent, terminal_width=WIDTH,
                            **cmd.context_settings)
        yield " ".join(path), cmd.get_help(ctx)
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    yield from walk(sub, [*path, name], ctx)

    yield from walk(cli, ["gitguard"], None)


def anchor(name: str) -> str:
    return name.replace(" ", "-")


def render() -> str:
    """The page's `## Commands` section: a table of contents, then one block per command."""
    helps = list(commands())
    toc = [f"{'  ' * max(len(name.split()) - 2, 0)}- [`{name}`](#{anchor(name)})"
           for name, _ in helps]
    blocks = [f"{'###' if len(name.split()) > 2 else '##'} `{name}`\n\n```\n{text.rstrip()}\n```\n"
              for name, text in helps]
    return HEADING + "\n" + "\n".join(toc) + "\n\n" + "\n".join(blocks)


def documented(page: str) -> dict[str, str]:
    """Each command's help block as the page holds it, by command name."""
    found = re.findall(r"^#{2,3} `(gitguard[^`]*)`\n\n```\n(.*?)\n```$", page, re.M | re.S)
    return dict(found)


def normalized(text: str) -> str:
    return " ".join(text.split())


def regenerate(page: Path = PAGE) -> None:
    text = page.read_text(encoding="utf-8")
    head, found, _ = text.partition(HEADING)
    if not found:
        raise SystemExit(f"{page} has no {HEADING.strip()!r} heading to regenerate from")
    page.write_text(head + render(), encoding="utf-8")


if __name__ == "__main__":
    regenerate()
