"""`gitguard integrate claude-code|codex`: gitguard's hook entries in the agent's settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from gitguard.cli.main import Ctx, emit, json_option, pass_ctx


@click.group()
def integrate() -> None:
    """Plug gitguard into a coding agent's own hooks."""


@integrate.command("claude-code")
@click.option("--remove", is_flag=True, help="Take gitguard's entries out again.")
@json_option
@pass_ctx
def integrate_claude_code(ctx: Ctx, remove: bool, as_json: bool) -> None:
    """Merge gitguard's hooks into .claude/settings.local.json (every other setting stays).

    SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, PostToolUseFailure,
    PermissionDenied, Stop and SessionEnd call `gitguard hook claude-code`. Running it again
    changes nothing.

    Example: gitguard integrate claude-code
    """
    from gitguard.integrations import claude_settings

    _merge(ctx, claude_settings.integrate, remove, as_json)


@integrate.command("codex")
@click.option("--remove", is_flag=True, help="Take gitguard's entries out again.")
@json_option
@pass_ctx
def integrate_codex(ctx: Ctx, remove: bool, as_json: bool) -> None:
    """Merge gitguard's hooks into .codex/hooks.json (every other hook stays).

    SessionStart, UserPromptSubmit, PreToolUse, PostToolUse and Stop call
    `gitguard hook claude-code` (Codex sends the same event shape). Codex runs a
    project's hooks only once you trust them: open `codex` in the project and trust
    them in `/hooks` (once, and again after they change). Codex before 0.124 also needs
    `[features] codex_hooks = true` in its config.toml.

    Example: gitguard integrate codex
    """
    from gitguard.integrations import codex_settings

    _merge(ctx, codex_settings.integrate, remove, as_json, codex_settings.TRUST_NOTE)


def _merge(ctx: Ctx, integrate_into: Callable[..., Any], remove: bool, as_json: bool,
           then: str | None = None) -> None:
    guard = ctx.guard
    if not remove:
        guard.store.create()      # first: the hook command's fast path lives in the store
    result = integrate_into(guard.ws, remove=remove)
    verb = "removed gitguard's hooks from" if remove else "gitguard's hooks are in"
    value = result.to_json()
    if not remove and then:
        value["next"] = then

    def human() -> None:
        click.echo(f"{verb} {result.path}"
                   + ("" if result.changed else " (already so; nothing changed)"))
        if not remove and then:
            click.echo(then)
    emit(value, as_json, human)
