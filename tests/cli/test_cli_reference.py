"""docs/cli.md holds the current `--help` of every command, and no command that is gone.

Compared with whitespace collapsed, so a terminal's wrapping does not matter; the fix for
a failure is `python -m tests.helpers.cli_reference` (it rewrites the page's reference).
"""

from __future__ import annotations

from tests.helpers import cli_reference

FIX = "regenerate it: .venv/bin/python -m tests.helpers.cli_reference"


def test_every_command_help_is_on_the_page() -> None:
    page = cli_reference.documented(cli_reference.PAGE.read_text(encoding="utf-8"))
    stale = [name for name, text in cli_reference.commands()
             if cli_reference.normalized(page.get(name, "")) != cli_reference.normalized(text)]
    assert not stale, f"docs/cli.md lacks the current --help of {stale}; {FIX}"


def test_the_page_lists_no_command_that_is_gone() -> None:
    page = cli_reference.documented(cli_reference.PAGE.read_text(encoding="utf-8"))
    current = {name for name, _ in cli_reference.commands()}
    assert not set(page) - current, f"docs/cli.md documents {set(page) - current}; {FIX}"
