from __future__ import annotations

import sys

import click

from gitguard import verify as verify_mod
from gitguard.calls.attribution import owner_words
from gitguard.cli.main import Ctx, emit, json_option, pass_ctx
from gitguard.errors import GitguardError
from gitguard.integrations import reach
from gitguard.integrations.pushcheck import HIDDEN_PREFIX
from gitguard.ledger import git_moves


@click.command()
@json_option
@pass_ctx
def status(ctx: Ctx, as_json: bool) -> None:
    """HEAD, branch, session, and each changed path with its owner and confidence.

    Example: gitguard status --json
    """
    found = ctx.guard.status()
    value = found.to_json()
    # What the git hooks recorded: the user's checkouts/merges and the agent patches committed.
    value["gitEvents"] = git_moves.summary(ctx.guard.store) if found.git else None
    warning = _push_guard_warning(ctx)
    value["warnings"] = [warning] if warning else []
    value["agents"] = reach.report(ctx.guard.ws)

    def human() -> None:
        if warning:
            click.echo(f"Warning: {warning}")
        plain = "" if found.git else " (not a git repository)"
        click.echo(f"workspace {found.workspace}{plain}")
        if found.git:
            click.echo(f"HEAD {found.head[:12] if found.head else '(unborn)'} "
                       f"on {found.branch or '(detached)'}")
        click.echo(f"session {found.session or '(none open)'}; {found.calls} call(s), "
                   f"{found.checkpoints} checkpoint(s)")
        for d in found.dirty:
            click.echo(f"  {d.change} {d.path}  by {owner_words(d.owner, d.confidence)}")
        if found.unknown_tools:
            click.echo("tools gitguard does not know (each call asked before a replay; "
                       "classify them with [tools.NAME] in .gitguard.toml): "
                       + ", ".join(found.unknown_tools))
        unwatched = found.daemon.get("unwatched")
        if unwatched:
            click.echo(f"daemon: {unwatched.get('count')} director(ies) not watched (the inotify "
                       "watch limit is reached; raise fs.inotify.max_user_watches): scanned at "
                       "each call's start and end. First: "
                       + ", ".join(unwatched.get("first", [])[:5]))
        unusable = found.daemon.get("unusable")
        if unusable:
            click.echo(f"daemon: not running, it could not serve: {unusable.get('why')} "
                       "(the hooks work in-process; `gitguard daemon start` tries again)")
        for path in found.skipped:
            why = "dependency or build directory" if path.endswith("/") else "over the size cap"
            click.echo(f"  skipped ({why}): {path}")
        for agent in value["agents"]:
            if not agent["reached"]:
                click.echo(f"agent {agent['agent']}: integrated ({agent['settings']}) but no "
                           f"hook of it has reached gitguard yet; {agent['hint']}")
        if found.store_bytes:
            click.echo(f"store {found.store_bytes / 1e6:.2f} MB (files in {ctx.guard.store.root})")
        for move in (value["gitEvents"] or {}).get("moves", [])[-5:]:
            click.echo(f"  git {git_moves.describe_move(move)}")
        for commit in (value["gitEvents"] or {}).get("commits", [])[-5:]:
            click.echo("\n".join("  " + line for line in git_moves.describe_commit(commit)))

    emit(value, as_json, human)


@click.command()
@json_option
@pass_ctx
def ledger(ctx: Ctx, as_json: bool) -> None:
    """The tool ledger: the current state of every call.  Example: gitguard ledger --json"""
    entries = ctx.guard.ledger()

    def human() -> None:
        for e in entries:
            click.echo(f"{e.call_id:<10} {e.status:<10} {e.tool_name:<14} {e.idempotency:<15} "
                       f"{e.replay_policy:<6} {e.summary[:60]}")

    emit([e.to_json() for e in entries], as_json, human)


@click.command()
@click.argument("call_id", required=False)
@click.option("--agent", "side", flag_value="agent", help="Only changes owned by agent calls.")
@click.option("--user", "side", flag_value="user", help="Only changes owned by the user.")
@pass_ctx
def diff(ctx: Ctx, call_id: str | None, side: str | None) -> None:
    """A call's unified diff (reversible with `git apply -R`), or all changes since HEAD.

    Example: gitguard diff call_3 | git apply -R
    """
    if call_id and side:
        raise GitguardError("give a call id or --agent/--user, not both",
                            "gitguard diff call_3   or   gitguard diff --user")
    sys.stdout.buffer.write(ctx.guard.diff(call_id, side))


@click.command()
@json_option
@pass_ctx
def verify(ctx: Ctx, as_json: bool) -> None:
    """Check the store: checksums, checkpoint files, refs and objects.

    Example: gitguard verify
    """
    guard = ctx.guard
    checked = verify_mod.report(guard.store, guard.snap)
    found = checked.problems + verify_mod.permission_problems(guard.store)
    warning = _push_guard_warning(ctx)   # a promise at risk, not damage: verify still passes

    hints = dict.fromkeys(p.hint for p in found)

    def human() -> None:
        for problem in found:
            click.echo(problem)
            if len(hints) > 1:      # one kind of problem: its hint is the error's own
                click.echo(f"  hint: {problem.hint}")
        for line in checked.notes:
            click.echo(f"note: {line}")
        if warning:
            click.echo(f"Warning: {warning}")
        if not found:
            click.echo("store ok")

    emit({"ok": not found, "problems": found, "hints": [p.hint for p in found],
          "notes": checked.notes, "warnings": [warning] if warning else []}, as_json, human)
    if found:
        raise GitguardError(f"the store has {len(found)} problem(s)",
                            next(iter(hints)) if len(hints) == 1
                            else "each problem above has its own hint")


def _push_guard_warning(ctx: Ctx) -> str | None:
    """refs/gitguard/* exist and `git push --mirror` from here would not be refused."""
    from gitguard.integrations.hook_install import push_guard_warning

    guard = ctx.guard
    if not guard.ws.is_git:
        return None
    hidden = any(name.startswith(HIDDEN_PREFIX)
                 for name in guard.snap.repo.references)
    return push_guard_warning(guard.ws, hidden)
