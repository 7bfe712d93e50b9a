from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import click

from gitguard import verify as verify_mod
from gitguard.calls.attribution import owner_words
from gitguard.cli.main import Ctx, emit, json_option, pass_ctx
from gitguard.errors import GitguardError
from gitguard.integrations import reach
from gitguard.integrations.pushcheck import HIDDEN_PREFIX
from gitguard.ledger import git_moves

SESSION_HELP = ("Also this agent session in every worktree of the repository it "
                "touched (a session followed across `cd`, `claude --worktree` and nested "
                "`.claude/worktrees`).")


@click.command()
@click.option("--session", "session_id", metavar="ID", help=SESSION_HELP)
@json_option
@pass_ctx
def status(ctx: Ctx, session_id: str | None, as_json: bool) -> None:
    """HEAD, branch, session, and each changed path with its owner and confidence.

    With --session ID, also each worktree the session touched: its calls there and the
    changed paths its calls own (JSON: `sessionWorktrees`).

    Example: gitguard status --json
    """
    from gitguard.cli import terminal

    with terminal.progress(not as_json) as progress:
        found = ctx.guard.status(progress)
    value = found.to_json()
    # What the git hooks recorded: the user's checkouts/merges and the agent patches committed.
    value["gitEvents"] = git_moves.summary(ctx.guard.store) if found.git else None
    warning = _push_guard_warning(ctx)
    value["warnings"] = [warning] if warning else []
    value["agents"] = reach.report(ctx.guard.ws)
    touched = _session_worktrees(ctx, session_id, with_status=True) if session_id else []
    if session_id:
        value["sessionWorktrees"] = [t.to_json() for t in touched]

    def human() -> None:
        table = terminal.stdout_console()
        if warning:
            click.echo(f"Warning: {warning}")
        plain = "" if found.git else " (not a git repository)"
        click.echo(f"workspace {found.workspace}{plain}")
        if found.git:
            click.echo(f"HEAD {found.head[:12] if found.head else '(unborn)'} "
                       f"on {found.branch or '(detached)'}")
        click.echo(f"session {found.session or '(none open)'}; {found.calls} call(s), "
                   f"{found.checkpoints} checkpoint(s)")
        if table is None:
            for d in found.dirty:
                click.echo(f"  {d.change} {d.path}  by {owner_words(d.owner, d.confidence)}")
        elif found.dirty:
            terminal.print_dirty(table, found.dirty)
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
        if session_id:
            click.echo(f"session {session_id} in {len(touched)} worktree(s):")
        for t in touched:
            t.describe()

    emit(value, as_json, human)


@dataclass
class Touched:
    """One worktree an agent session touched: its calls there, and (status) what they own."""

    root: str
    branch: str | None
    current: bool
    entries: list[Any]
    session: Any
    dirty: list[Any] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for e in self.entries:
            counts[e.status] = counts.get(e.status, 0) + 1
        return {"worktree": self.root, "branch": self.branch, "current": self.current,
                "calls": len(self.entries), "byStatus": counts,
                "callIds": [e.call_id for e in self.entries],
                "startedAt": self.session.started_at if self.session else None,
                "endedAt": self.session.ended_at if self.session else None,
                "subagents": [a.to_json() for a in self.session.subagents]
                if self.session else [],
                "moves": [m.to_json() for m in self.session.moves] if self.session else [],
                "dirty": [d.to_json() for d in self.dirty]}

    def describe(self) -> None:
        here = " (here)" if self.current else ""
        click.echo(f"  {self.root}{here} on {self.branch or '(detached)'}: "
                   f"{len(self.entries)} call(s)")
        for move in self.session.moves if self.session else ():
            click.echo(f"    arrived by cd from {move.from_dir or '?'} at {move.at}")
        for d in self.dirty:
            click.echo(f"    {d.change} {d.path}  by {owner_words(d.owner, d.confidence)}")


def _session_worktrees(ctx: Ctx, session_id: str, with_status: bool = False) -> list[Touched]:
    """Every worktree of the repository whose store knows `session_id` (a call of it, or
    the session itself): this one's through ctx.guard, the others opened here. An id no
    worktree knows is an error."""
    from gitguard import worktrees
    from gitguard.api import Guard
    from gitguard.errors import UnknownId
    from gitguard.workspace import discover

    here = ctx.guard
    found: list[Touched] = []
    for root in worktrees.of_repository(here.ws):
        if root == here.ws.root:
            guard = here
        else:
            try:
                ws = discover(root)
            except GitguardError:
                continue
            if ws.root != root or not (ws.store_dir / "store.json").is_file():
                continue        # no store: gitguard never acted there
            guard = Guard(ws)
        entries = [e for e in guard.ledger() if e.session_id == session_id]
        session = next((s for s in guard.sessions() if s.session_id == session_id), None)
        if not entries and session is None:
            continue
        dirty = []
        branch = None
        if with_status:
            found_status = guard.status()
            own = {e.call_id for e in entries}
            dirty = [d for d in found_status.dirty if d.owner in own]
            branch = found_status.branch
        else:
            branch = guard.snap.head_info()[1]
        found.append(Touched(str(root), branch, guard is here, entries, session, dirty))
    if not found:
        raise UnknownId(f"no worktree of this repository knows session {session_id!r}",
                        "list sessions with `gitguard session list` (in each worktree)")
    return found


@click.command()
@click.option("--session", "session_id", metavar="ID",
              help="Only this agent session's calls, from every worktree of the repository "
                   "it touched (JSON: each entry gains `worktree`).")
@json_option
@pass_ctx
def ledger(ctx: Ctx, session_id: str | None, as_json: bool) -> None:
    """The tool ledger: the current state of every call.  Example: gitguard ledger --json"""
    rows: list[tuple[str | None, Any]]
    if session_id:
        touched = _session_worktrees(ctx, session_id)
        rows = [(t.root, e) for t in touched for e in t.entries]
    else:
        rows = [(None, e) for e in ctx.guard.ledger()]

    def human() -> None:
        from gitguard.cli import terminal

        table = terminal.stdout_console()
        if table is not None:
            terminal.print_ledger(table, rows)
            return
        shown = None
        for root, e in rows:
            if root is not None and root != shown:
                click.echo(f"# {root}")
                shown = root
            click.echo(f"{e.call_id:<10} {e.status:<10} {e.tool_name:<14} {e.idempotency:<15} "
                       f"{e.replay_policy:<6} {e.summary[:60]}")

    emit([e.to_json() if root is None else {**e.to_json(), "worktree": root}
          for root, e in rows], as_json, human)


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
