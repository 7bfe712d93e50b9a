"""Who owns a change: an agent call or the user, and how sure we are. Pure functions.

Without the daemon, attribution comes from snapshots at call boundaries: what
changed between a call's pre and post snapshot is the call's, what changed between
calls is the user's. A path whose current content is no longer what the agent last
wrote has been changed by the user since.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gitguard.models import Confidence, FilePatchEntry, ToolLedgerEntry

USER = "user"


@dataclass(frozen=True)
class AgentWrite:
    """The agent's last write of a path: which call, what content, whether it was declared."""

    call_id: str
    after_hash: str | None
    declared: bool


def last_agent_writes(entries: Iterable[ToolLedgerEntry]) -> dict[str, AgentWrite]:
    """The newest FilePatchEntry per path over calls in ledger order."""
    latest: dict[str, AgentWrite] = {}
    for entry in entries:
        for patch in entry.file_patches:
            latest[patch.path] = AgentWrite(entry.call_id, patch.after_hash,
                                            patch.path in entry.declared_writes)
    return latest


def owner_of(current_hash: str | None, agent: AgentWrite | None) -> tuple[str, Confidence]:
    """Owner and confidence of a path that differs from the baseline."""
    if agent is None or agent.after_hash != current_hash:
        return USER, "window"
    return agent.call_id, "exact" if agent.declared else "window"


def patches_after(entries: Iterable[ToolLedgerEntry], seq_of: dict[str, int],
                  since_seq: int) -> list[FilePatchEntry]:
    """FilePatchEntries of calls that finished after ledger position `since_seq`."""
    return [p for e in entries if seq_of.get(e.call_id, 0) > since_seq for p in e.file_patches]
