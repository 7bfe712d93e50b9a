"""The Python API's calls through the daemon, when one runs for the workspace.

An agent runtime that calls `Guard.begin_call` in its own process gets the same
O(changed) snapshot and the same live attribution as the CLI hooks: the daemon
must know when a call window opens and closes, whoever opens it. With no daemon
(the usual case in tests) these return None and the call runs in-process.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

from gitguard import error_boundary, errors
from gitguard.ipc import client
from gitguard.models import ToolLedgerEntry

if TYPE_CHECKING:
    from gitguard.guard_context import GuardContext


def begin_call(guard: GuardContext, tool: str, tool_input: Mapping[str, Any],
               options: Mapping[str, Any]) -> ToolLedgerEntry | None:
    kwargs = {"tool": tool, "tool_input": dict(tool_input),
              **{k: (list(v) if isinstance(v, tuple) else v) for k, v in options.items()}}
    return _call(guard, "api.begin_call", kwargs)


def end_call(guard: GuardContext, call_id: str, status: str, result: str | bytes | None
             ) -> ToolLedgerEntry | None:
    kwargs: dict[str, Any] = {"call_id": call_id, "status": status, "result": result}
    if isinstance(result, bytes):
        kwargs.update(result=base64.b64encode(result).decode(), result_b64=True)
    return _call(guard, "api.end_call", kwargs)


@contextmanager
def restoring(guard: GuardContext, read_only: bool = False) -> Iterator[None]:
    """Wrap writes gitguard itself makes into the working tree (rollback, conflict
    resolution): with a daemon running, everything seen before is recorded first (after
    a full scan) and these writes are nobody's change. `read_only` (a dry run) only has
    the daemon record what it saw. Without a daemon, nothing to do.

    Call it before taking the store lock: the daemon takes it to record."""
    store = str(guard.store.root)
    if not (guard.store.root / client.SOCKET_NAME).exists():
        yield
        return
    if read_only:
        with suppress(client.Unreachable, client.Broken):
            client.request(store, "flush")
        yield
        return
    with suppress(client.Unreachable, client.Broken):     # no daemon: nothing to tell
        client.request(store, "restore.begin")
    try:
        yield
    finally:
        with suppress(client.Unreachable, client.Broken):
            client.request(store, "restore.end")


def _call(guard: GuardContext, op: str, kwargs: dict[str, Any]) -> ToolLedgerEntry | None:
    if os.environ.get("GITGUARD_FAULT") or not (guard.store.root / client.SOCKET_NAME).exists():
        return None
    try:
        answer = client.request(str(guard.store.root), op,
                                {"kwargs": kwargs, "cwd": str(guard.ws.root),
                                 "env": dict(os.environ)})
    except client.Unreachable:
        return None
    except client.Broken as exc:
        raise errors.DaemonStopped(f"the gitguard daemon stopped while handling {op}: {exc}",
                                   "check `gitguard ledger` before repeating the call") from None
    entry = answer.get("entry")
    if not isinstance(entry, dict):     # raised in the daemon: raised here again, the same
        raise error_boundary.from_wire(answer, op)
    return ToolLedgerEntry.model_validate(entry)
