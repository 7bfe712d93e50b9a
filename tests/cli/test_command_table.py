"""The CLI finds its commands by name and imports only the verb's module; `--help` still
lists every command, and no command module is left out of the table."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import click

import gitguard.cli.commands
from gitguard.cli.commands import WHERE, load


def test_every_command_module_is_in_the_table() -> None:
    """A top-level command defined in gitguard/cli/commands/ but missing from WHERE would
    silently vanish from the CLI."""
    found: dict[str, click.Command] = {}
    nested: set[int] = set()
    for module in pkgutil.iter_modules(gitguard.cli.commands.__path__):
        loaded = __import__(f"gitguard.cli.commands.{module.name}", fromlist=["_"])
        for value in vars(loaded).values():
            if (isinstance(value, click.Command) and value.callback is not None
                    and value.callback.__module__ == loaded.__name__):
                assert value.name is not None
                found[value.name + "@" + loaded.__name__] = value
                if isinstance(value, click.Group):
                    nested.update(id(c) for c in value.commands.values())
    top = {key.split("@")[0] for key, value in found.items() if id(value) not in nested}
    assert top == set(WHERE)
    for name in WHERE:
        command = load(name)
        assert command is not None and command.name == name
    assert load("no-such-command") is None


def test_help_lists_every_command_and_a_verb_imports_only_its_module(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "gitguard", "--help"], cwd=tmp_path,
                          capture_output=True, text=True, check=True)
    listed = proc.stdout.split("Commands:\n", 1)[1].split()
    assert set(WHERE) <= set(listed)
    script = ("import sys; from gitguard.cli.main import run; run(['explain', '--help']); "
              "print(*sorted(m for m in sys.modules if m.startswith('gitguard.cli.commands')))")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, check=True)
    assert "--session" in proc.stdout
    assert proc.stdout.splitlines()[-1].split() == ["gitguard.cli.commands",
                                                   "gitguard.cli.commands.recovery"]
