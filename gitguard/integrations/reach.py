"""Whether an agent whose hooks `integrate` wrote has ever reached gitguard.

Codex runs a project's hooks only once the user has trusted them (`/hooks` in Codex),
and says nothing while it skips them; a Claude Code settings file in the wrong place is
as quiet. The first event from an agent leaves a marker in the store; `gitguard status`
names an integrated agent with no marker, so a guard that is not running is not
mistaken for one that is.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitguard.storage import durable

if TYPE_CHECKING:
    from gitguard.workspace import Workspace

SEEN_DIR = "agents-seen"
HINTS = {
    "claude-code": "start Claude Code in this project; check that it reads "
                   ".claude/settings.local.json (`/hooks` lists gitguard's)",
    "codex": "Codex runs a project's hooks only once you trust them: open `codex` here and "
             "trust gitguard's hooks in `/hooks`",
}


def note(store_root: Path, agent: str) -> None:
    """Mark that a hook event of `agent` arrived (a stat per event, a write the first time)."""
    marker = store_root / SEEN_DIR / agent
    if marker.exists() or not store_root.is_dir():
        return
    durable.ensure_dir(marker.parent)
    durable.atomic_write(marker, b"")


def _integrated(path: Path, marker: str) -> bool:
    try:
        return marker in path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


def report(ws: Workspace) -> list[dict[str, Any]]:
    """Each agent integrated here: its settings file, whether it has reached gitguard,
    and what to do when it has not."""
    # here, not at the top: every hook event imports this module for `note` alone
    from gitguard.integrations import claude_settings, codex_settings

    found = []
    for agent, path in (("claude-code", claude_settings.settings_path(ws)),
                        ("codex", codex_settings.hooks_path(ws))):
        if not _integrated(path, claude_settings.MARKER):
            continue
        reached = (ws.store_dir / SEEN_DIR / agent).exists()
        found.append({"agent": agent, "settings": str(path), "reached": reached,
                      "hint": None if reached else HINTS[agent]})
    return found
