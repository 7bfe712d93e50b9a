"""`gitguard integrate claude-code`: gitguard's hook entries in `.claude/settings.local.json`.

The file is merged, never replaced: every other key, and every other hook, stays as it
is. gitguard's entries are found by their command (`... gitguard hook claude-code`), so
running it again only updates them (no write when nothing changes), and `--remove` takes
out exactly those entries.
"""

from __future__ import annotations

import contextlib
import copy
import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitguard import nativeclient
from gitguard.errors import GitguardError
from gitguard.storage import durable
from gitguard.workspace import Workspace

MARKER = "gitguard hook claude-code"
# Tool events match every tool; the others take no matcher (SessionStart: every source).
EVENTS: dict[str, str | None] = {
    "SessionStart": None, "UserPromptSubmit": None, "PreToolUse": "*", "PostToolUse": "*",
    "PostToolUseFailure": "*", "PermissionDenied": "*", "PostToolBatch": None,
    "SubagentStart": None, "SubagentStop": None, "Stop": None, "StopFailure": None,
    "CwdChanged": None, "SessionEnd": None,
}
TIMEOUT_S = 30


@dataclass(frozen=True)
class Result:
    path: Path
    changed: bool
    removed: bool
    events: tuple[str, ...] = tuple(EVENTS)

    def to_json(self) -> dict[str, Any]:
        return {"path": str(self.path), "changed": self.changed, "removed": self.removed,
                "events": list(self.events)}


def settings_path(ws: Workspace) -> Path:
    return ws.root / ".claude" / "settings.local.json"


def command(python: str | None = None, native: Path | None = None) -> str:
    """The hook command: the package's native client when it has one (no interpreter start
    while the daemon answers; it runs Python itself otherwise), else the interpreter.

    The command tests the client at each run, so a reinstall without a C compiler runs
    the same Python entry. Both branches contain MARKER."""
    python = python or sys.executable
    fallback = f"{shlex.quote(python)} -m {MARKER}"
    if native is None:
        return fallback
    return (f"c={shlex.quote(str(native))}; if [ -x \"$c\" ]; then exec \"$c\" "
            f"{shlex.quote(python)} hook claude-code; fi; exec {fallback}")


def _load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise GitguardError(f"cannot read {path}: {exc.strerror}",
                            "check its permissions") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise GitguardError(f"{path} is not valid JSON ({exc}); nothing was changed",
                            "fix the file (the agent cannot read it either), then run "
                            "this again") from None
    if not isinstance(data, dict) or not isinstance(data.get("hooks", {}), dict):
        raise GitguardError(f"{path} does not hold a settings object with a `hooks` object",
                            "see the agent's hooks documentation; nothing was changed")
    return data


def _is_ours(hook: Any) -> bool:
    return isinstance(hook, dict) and MARKER in str(hook.get("command", ""))


def _without_ours(data: dict[str, Any]) -> dict[str, Any]:
    """Drop gitguard's hooks, and the groups, events and `hooks` key they alone filled."""
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return data
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(inner, list) and any(_is_ours(h) for h in inner):
                group["hooks"] = [h for h in inner if not _is_ours(h)]
                if not group["hooks"]:
                    continue
            kept_groups.append(group)
        if groups and not kept_groups:
            del hooks[event]
        else:
            hooks[event] = kept_groups
    if not hooks and "hooks" in data:
        del data["hooks"]
    return data


def _with_ours(data: dict[str, Any], cmd: str,
               events: dict[str, str | None] | None = None) -> dict[str, Any]:
    hooks = data.setdefault("hooks", {})
    for event, matcher in (EVENTS if events is None else events).items():
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise GitguardError(f"hooks.{event} in the settings is not a list",
                                "fix the file; nothing was changed")
        ours = [h for g in groups if isinstance(g, dict)
                for h in (g.get("hooks") or []) if _is_ours(h)]
        if ours:  # update in place, so a second run changes nothing
            for hook in ours:
                hook.update({"type": "command", "command": cmd, "timeout": TIMEOUT_S})
            continue
        group: dict[str, Any] = {} if matcher is None else {"matcher": matcher}
        group["hooks"] = [{"type": "command", "command": cmd, "timeout": TIMEOUT_S}]
        groups.append(group)
    return data


def integrate(ws: Workspace, *, remove: bool = False, python: str | None = None,
              path: Path | None = None, events: dict[str, str | None] | None = None
              ) -> Result:
    """Merge gitguard's entries into `path` (Claude Code's settings unless told otherwise;
    Codex reads the same `hooks` shape from `.codex/hooks.json`)."""
    path = path or settings_path(ws)
    before = _load(path)
    after = _without_ours(copy.deepcopy(before))
    if not remove:
        after = _with_ours(after, command(python, nativeclient.program()), events)
    # Older commands named a client built into the store: gone, they start Python.
    nativeclient.remove_old(ws.store_dir)
    if after == before:
        return Result(path, changed=False, removed=remove, events=_names(events))
    if remove and not after:
        path.unlink()  # the file held gitguard's entries only
        with contextlib.suppress(OSError):  # .claude holds other files
            path.parent.rmdir()
        return Result(path, changed=True, removed=True, events=_names(events))
    durable.ensure_dir(path.parent)
    text = json.dumps(after, indent=2, ensure_ascii=False) + "\n"
    durable.atomic_write(path, text.encode(), mode=0o644)
    return Result(path, changed=True, removed=remove, events=_names(events))


def _names(events: dict[str, str | None] | None) -> tuple[str, ...]:
    return tuple(EVENTS if events is None else events)
