"""`gitguard integrate claude-code`: gitguard's hook entries in the agent's settings."""

from __future__ import annotations

import click

from gitguard.cli import Ctx, emit, json_option, pass_ctx


@click.group()
def integrate() -> None:
    """Plug gitguard into a coding agent's own hooks."""


@integrate.command("claude-code")
@click.option("--remove", is_flag=True, help="Take gitguard's entries out again.")
@json_option
@pass_ctx
def integrate_claude_code(ctx: Ctx, remove: bool, as_json: bool) -> None:
    """Merge gitguard's hooks into .claude/settings.local.json (every other setting stays).

    SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, PostToolUseFailure and Stop
    call `gitguard hook claude-code`. Running it again changes nothing.

    Example: gitguard integrate claude-code
    """
    from gitguard.integrations import claude_settings

    guard = ctx.guard
    result = claude_settings.integrate(guard.ws, remove=remove)
    if not remove:
        guard.store.create()
    verb = "removed gitguard's hooks from" if remove else "gitguard's hooks are in"
    emit(result.to_json(), as_json, lambda: click.echo(
        f"{verb} {result.path}" + ("" if result.changed else " (already so; nothing changed)")))
