"""`GuardContext`: what domain code needs from a guard, so it never depends on the facade.

Calls, recovery, rollback and the daemon client take a `GuardContext`; `api.Guard`
and the daemon's `DaemonGuard` satisfy it (mypy checks that where they pass
themselves in). Only the layers above `gitguard.api` (the CLI, the daemon, the
integrations, the demo) name `Guard` itself; tests/test_import_graph.py holds the line.
Its types are imported for the type checker only: at run time this module is a leaf.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gitguard.models import Idempotency, ReplayPolicy, RiskLevel, ToolLedgerEntry
    from gitguard.settings import Settings
    from gitguard.snapshot.snapshotter import Snapshotter
    from gitguard.storage.store import Store
    from gitguard.workspace import Workspace


class GuardContext(Protocol):
    ws: Workspace                # the guarded workspace: its root, its git dirs
    settings: Settings           # its resolved settings (.gitguard.toml, GITGUARD_*)
    store: Store                 # its store: files, lock, privacy, artifacts
    snap: Snapshotter            # trees of the workspace now, and the repository they live in
    packs_in_background: bool    # True when someone else (the daemon) packs loose objects

    def begin_call(self, tool: str, tool_input: Mapping[str, Any], *,
                   step_id: str | None = None, call_id: str | None = None,
                   writes: Sequence[str] = (), idempotency: Idempotency | None = None,
                   replay: ReplayPolicy | None = None, risk: RiskLevel | None = None,
                   side_effects: Sequence[str] = (), session_id: str | None = None,
                   confirm: bool = False, force_replay: bool = False) -> ToolLedgerEntry:
        """Record a call's start, through the daemon when one serves the workspace."""
        ...

    def end_call(self, call_id: str, status: str = "succeeded",
                 result: str | bytes | None = None) -> ToolLedgerEntry:
        """Record a call's end, through the daemon when one serves the workspace."""
        ...
