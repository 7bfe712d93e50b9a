"""What `gitguard hook claude-code` and `gitguard hook git NAME` do, without click.

The click commands (commands/hooks.py, which the daemon runs too) call these functions;
with no daemon, `gitguard.cli.entry` calls them directly, so a fresh hook process does not
import click and build the command tree (tens of milliseconds of every hook). The answer,
the messages and the exit code are the same either way.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Protocol

STDIN_HOOKS = ("pre-push", "post-rewrite")


class GuardHolder(Protocol):
    """cli.Ctx, or `Opened` below: a path, and a Guard opened on first use."""
    path: str
    _guard: Any

    @property
    def guard(self) -> Any: ...


class Opened:
    def __init__(self, path: str) -> None:
        self.path = path
        self._guard: Any = None

    @property
    def guard(self) -> Any:
        if self._guard is None:
            from gitguard.api import Guard

            self._guard = Guard.open(self.path)
        return self._guard


def git_hook(ctx: GuardHolder, name: str, args: list[str], stdin: bytes | None = None
             ) -> tuple[int, str]:
    """Exit code and the message for stderr ('' for none). `stdin`: what was read of it
    already (the entry's daemon attempt), else it is read here when the hook takes it."""
    from gitguard.integrations import git_hooks, hooklog

    if name not in STDIN_HOOKS:
        stdin = b""
    elif stdin is None:
        stdin = sys.stdin.buffer.read()
    try:
        code, message = git_hooks.handle(ctx.guard, name, list(args), stdin)
    except Exception as exc:  # a hook must not break git: log it and say so
        store = ctx.guard.store.root if ctx._guard is not None else None
        where = hooklog.log_failure(store, f"git {name}", exc)
        code = 3 if name == "pre-push" else 0  # the pre-push shim then checks on its own
        message = (f"gitguard: its {name} hook failed ({type(exc).__name__}: {exc}); your git "
                   f"command is not affected. Details: {where}")
    return code, message


def claude_code_hook(ctx: GuardHolder, stdin: bytes | None = None) -> str:
    """The JSON answer to print for the event on stdin (always exit 0)."""
    from gitguard import jsontext
    from gitguard.integrations import claude_code, hooklog

    answer: dict[str, Any]
    try:
        if stdin is None:
            stdin = sys.stdin.buffer.read()
        payload = _event(stdin)
        answer = claude_code.handle(_guard_for(ctx, payload), payload)
    except Exception as exc:  # the agent must keep working: log it and allow
        store = ctx.guard.store.root if ctx._guard is not None else None
        where = hooklog.log_failure(store, "claude-code", exc)
        answer = {"systemMessage": f"gitguard: its hook failed ({type(exc).__name__}: {exc}); "
                                   f"nothing was blocked. Details: {where}"}
    return jsontext.dumps(answer)


def _event(stdin: bytes) -> dict[str, Any]:
    """The hook event on stdin; ValueError saying what is wrong with it (any depth)."""
    from gitguard import jsontext

    try:
        payload = json.loads(stdin or b"null")
    except RecursionError:
        payload = None
        deep = True
    else:
        deep = jsontext.too_deep(payload)
    if deep:
        raise ValueError(f"the hook event on stdin nests deeper than {jsontext.MAX_DEPTH} "
                         "levels of lists and objects")
    if not isinstance(payload, dict):
        raise ValueError("the hook event on stdin is not a JSON object")
    return payload


def _guard_for(ctx: GuardHolder, payload: dict[str, Any]) -> Any:
    """The worktree the event acts on (DESIGN.md, Agents): the one holding the file a tool
    declares, else the event's cwd (after `cd ../wt` the agent's calls act there; a
    subagent with `isolation: "worktree"` works in a worktree nested in the project),
    else CLAUDE_PROJECT_DIR, which stays the directory the session started in."""
    found = event_dir(payload)
    if found is not None:
        ctx.path = found
    return ctx.guard


def event_dir(payload: dict[str, Any]) -> str | None:
    """`_guard_for`'s directory (also where the early scan of a fresh hook process runs)."""
    for candidate in (_declared_dir(payload), _new_cwd(payload), payload.get("cwd"),
                      os.environ.get("CLAUDE_PROJECT_DIR")):
        if isinstance(candidate, str) and candidate and Path(candidate).is_dir():
            return candidate
    return None


def _new_cwd(payload: dict[str, Any]) -> str | None:
    """CwdChanged (after `cd`) acts where the session went: its `new_cwd`."""
    if payload.get("hook_event_name") != "CwdChanged":
        return None
    found = payload.get("new_cwd")
    return found if isinstance(found, str) else None


def _declared_dir(payload: dict[str, Any]) -> str | None:
    """The directory of the absolute path a file tool (Edit, Write, ...) names, when it
    lies in a workspace gitguard guards (a file outside every one is no workspace's)."""
    from gitguard import store_discovery

    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict):
        return None
    for key in ("file_path", "notebook_path"):
        path = tool_input.get(key)
        if isinstance(path, str) and os.path.isabs(path):
            directory = os.path.dirname(os.path.normpath(path))
            found = store_discovery.find_store(directory) if os.path.isdir(directory) \
                else None
            if found is not None and os.path.isfile(os.path.join(found[1], "store.json")):
                return directory
    return None
