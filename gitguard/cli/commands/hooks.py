"""`gitguard hooks install|uninstall|status`; `gitguard hook git|claude-code`, what hooks call."""

from __future__ import annotations

from typing import Any

import click

from gitguard.cli.main import Ctx, emit, json_option, pass_ctx


@click.group()
def hooks() -> None:
    """gitguard's git hooks: record your checkouts, merges, rebases and commits, guard pushes.

    Your own hooks keep running: each is kept as NAME.gitguard-legacy and run first.
    """


def _show(report: Any, as_json: bool) -> None:
    def human() -> None:
        if report.hooks_dir.notice:
            click.echo(f"Notice: {report.hooks_dir.notice}")
        click.echo(f"hooks directory {report.hooks_dir.path}")
        if report.python:
            click.echo(f"gitguard runs with {report.python}")
        for h in report.hooks:
            words = h.action or h.state
            kept = " (your hook kept, runs first)" if h.kept and not h.action else ""
            click.echo(f"  {h.name:<14} {words}{kept}{'; ' + h.detail if h.detail else ''}")

    emit(report.to_json(), as_json, human)


@hooks.command("install")
@json_option
@pass_ctx
def hooks_install(ctx: Ctx, as_json: bool) -> None:
    """Install the shims (post-checkout, post-merge, post-rewrite, post-commit, pre-push).

    Creates the gitguard store too. Respects core.hooksPath (husky, lefthook).

    Example: gitguard hooks install
    """
    from gitguard.integrations import hook_install

    guard = ctx.guard
    report = hook_install.install(guard.ws)
    guard.store.create()
    _show(report, as_json)


@hooks.command("uninstall")
@json_option
@pass_ctx
def hooks_uninstall(ctx: Ctx, as_json: bool) -> None:
    """Remove the shims and put back, byte for byte, the hooks that were there before.

    Example: gitguard hooks uninstall
    """
    from gitguard.integrations import hook_install

    _show(hook_install.uninstall(ctx.guard.ws), as_json)


@hooks.command("status")
@json_option
@pass_ctx
def hooks_status(ctx: Ctx, as_json: bool) -> None:
    """Which shims are in place, which of your hooks they run, which interpreter they use.

    Example: gitguard hooks status --json
    """
    from gitguard.integrations import hook_install

    _show(hook_install.status(ctx.guard.ws), as_json)


@click.group()
def refs() -> None:
    """Whether repositories that clone or fetch from this one can see refs/gitguard/*.

    They cannot with a plain clone or fetch; a mirror clone or a fetch of refs/* can,
    unless you hide the refs with `gitguard refs hide` (it changes your git config).
    """


def _refs_result(ws: Any, changed: bool, as_json: bool) -> None:
    from gitguard.integrations import hide_refs

    now = hide_refs.hidden(ws)
    value = {"hidden": now, "changed": changed, "key": hide_refs.KEY, "value": hide_refs.VALUE}
    line = (f"{hide_refs.KEY} = {hide_refs.VALUE} is set in this repository's config: clones and "
            "fetches from this repository (a mirror clone included) do not get refs/gitguard/*"
            if now else f"{hide_refs.KEY} = {hide_refs.VALUE} is not set: a mirror clone of this "
            "repository or a fetch of refs/* gets refs/gitguard/*")
    emit(value, as_json, lambda: click.echo(("" if changed else "Unchanged: ") + line))


@refs.command("hide")
@json_option
@pass_ctx
def refs_hide(ctx: Ctx, as_json: bool) -> None:
    """Set transfer.hideRefs = refs/gitguard in this repository's config (you asked for it).

    upload-pack and receive-pack then leave refs/gitguard/* out, so `git clone --mirror`
    and `git fetch '+refs/*:refs/*'` from this repository do not carry them.
    `git bundle create --all` and `git push --mirror --no-verify` still do.

    Example: gitguard refs hide
    """
    from gitguard.integrations import hide_refs

    ws = ctx.guard.ws
    _require_git(ws)
    _refs_result(ws, hide_refs.hide(ws), as_json)


@refs.command("unhide")
@json_option
@pass_ctx
def refs_unhide(ctx: Ctx, as_json: bool) -> None:
    """Take out the transfer.hideRefs value `gitguard refs hide` set; nothing else.

    Example: gitguard refs unhide
    """
    from gitguard.integrations import hide_refs

    ws = ctx.guard.ws
    _require_git(ws)
    _refs_result(ws, hide_refs.unhide(ws), as_json)


def _require_git(ws: Any) -> None:
    from gitguard.errors import GitguardError

    if not ws.is_git:
        raise GitguardError(f"{ws.root} is not a git repository: it has no refs to hide",
                            "gitguard's snapshots here live in .agent-runtime/objects.git, "
                            "which nothing clones")


@click.group()
def hook() -> None:
    """What the installed hooks call; you do not run these yourself."""


@hook.command("git", context_settings={"ignore_unknown_options": True,
                                       "allow_interspersed_args": False})
@click.argument("name")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@pass_ctx
def hook_git(ctx: Ctx, name: str, args: tuple[str, ...]) -> None:
    """Run gitguard's part of the git hook NAME (ARGS and stdin as git gave them).

    Never fails a post-* hook; exits 4 when pre-push refuses a push of refs/gitguard/*.
    """
    from gitguard.integrations.hookcli import git_hook

    code, message = git_hook(ctx, name, list(args))
    if message:
        click.echo(message, err=True)
    raise click.exceptions.Exit(code)


@hook.command("claude-code")
@pass_ctx
def hook_claude_code(ctx: Ctx) -> None:
    """Answer one Claude Code (or Codex) hook event: JSON on stdin, JSON on stdout, exit 0.

    Example: echo '{"hook_event_name": "Stop", "session_id": "s1"}' | gitguard hook claude-code
    """
    from gitguard.integrations.hookcli import claude_code_hook

    click.echo(claude_code_hook(ctx))
