"""`gitguard integrate codex`: gitguard's hook entries in the project's `.codex/hooks.json`.

Codex reads hooks in the same shape as Claude Code's settings (event -> matcher groups
-> command hooks) and sends the same JSON on stdin, with a `turn_id`, so the entries
run the same `gitguard hook claude-code` and the merge is Claude Code's: every other hook
stays, a second run changes nothing, `--remove` takes out exactly gitguard's entries.
Codex matchers are regular expressions; a group with no matcher matches every tool.
Codex before 0.124 runs hooks only with `[features] codex_hooks = true` in its config,
and every Codex runs a project's hooks only once the user has trusted them (`/hooks`).
"""

from __future__ import annotations

from pathlib import Path

from gitguard.integrations import claude_settings
from gitguard.integrations.claude_settings import Result
from gitguard.workspace import Workspace

# Every event Codex 0.171 emits (the hook event names its binary's JSON schemas list):
# tool calls, turns, subagents, interrupts and session ends are used; PermissionRequest
# and the compaction events are answered with no decision, and registered so that a Codex
# that starts sending what gitguard needs there reaches it (`gitguard status` sees them).
EVENTS: dict[str, str | None] = {
    "SessionStart": None, "UserPromptSubmit": None, "PreToolUse": None, "PostToolUse": None,
    "PermissionRequest": None, "SubagentStart": None, "SubagentStop": None, "Stop": None,
    "Interrupt": None, "PreCompact": None, "PostCompact": None, "SessionEnd": None,
}


TRUST_NOTE = ("Codex runs these hooks only once you trust them: open `codex` in this "
              "project and trust gitguard's hooks in `/hooks` (again whenever they change). "
              "Until then `gitguard status` says Codex has not reached gitguard.")


def hooks_path(ws: Workspace) -> Path:
    return ws.root / ".codex" / "hooks.json"


def integrate(ws: Workspace, *, remove: bool = False, python: str | None = None) -> Result:
    return claude_settings.integrate(ws, remove=remove, python=python, path=hooks_path(ws),
                                     events=EVENTS)
