"""Shell commands an agent left running in the background, and when they end.

Claude Code runs `Bash` with `run_in_background: true` as a task: PostToolUse comes at
once with `tool_response.backgroundTaskId`, while the command goes on writing. The call
stays `started` (its window open, as background) until its end is observed:

* a `TaskOutput` (formerly `BashOutput`) result whose task status is no longer running,
  or a `TaskStop` (formerly `KillShell`/`KillBash`) result, naming the task id;
* Stop: a task of the session missing from the payload's `background_tasks` (the CLI
  lists the work still in flight there) has ended; without the field, every one has.

`background.jsonl` in the store maps each task to its call (one checksummed line per
start and end), so a hook in a fresh process finds the call a later event names; rollback
reads it too: everything in a background window is `ambiguous` (DESIGN.md, Attribution).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gitguard import clock
from gitguard.storage import durable
from gitguard.storage.store import Store

if TYPE_CHECKING:
    from gitguard.guard_context import GuardContext

JOURNAL = "background.jsonl"
OUTPUT_TOOLS = frozenset({"TaskOutput", "BashOutput", "BashOutputTool"})
STOP_TOOLS = frozenset({"TaskStop", "KillShell", "KillBash"})
RUNNING = frozenset({"running", "pending", "in_progress", "started"})
_ID_KEYS = ("task_id", "bash_id", "shell_id")


@dataclass(frozen=True)
class Ended:
    task_id: str
    status: str          # succeeded | failed (the call's ledger status)
    result: str


def launched(payload: Mapping[str, Any]) -> str | None:
    """The task id when this PostToolUse reports a Bash call moved to the background."""
    tool_input = payload.get("tool_input")
    response = payload.get("tool_response")
    if not (isinstance(tool_input, Mapping) and tool_input.get("run_in_background")):
        return None
    if not isinstance(response, Mapping):
        return None
    task = response.get("backgroundTaskId")
    return task if isinstance(task, str) and task else None


def ended_by(payload: Mapping[str, Any]) -> Ended | None:
    """A TaskOutput or TaskStop result that shows a background task has ended."""
    tool = payload.get("tool_name")
    tool_input = payload.get("tool_input")
    response = payload.get("tool_response")
    if tool not in OUTPUT_TOOLS and tool not in STOP_TOOLS:
        return None
    task_id = _task_id(tool_input) or _task_id(response)
    if task_id is None:
        return None
    if tool in STOP_TOOLS:
        return Ended(task_id, "succeeded", "stopped by the agent; it ran until then")
    task = response.get("task") if isinstance(response, Mapping) else None
    info = task if isinstance(task, Mapping) else response
    if not isinstance(info, Mapping):
        return None
    status = info.get("status")
    if not isinstance(status, str) or status in RUNNING:
        return None
    code = next((info[k] for k in ("exitCode", "exit_code", "code") if k in info), None)
    failed = status == "failed" or (isinstance(code, int) and code != 0)
    return Ended(task_id, "failed" if failed else "succeeded",
                 f"background task {task_id} {status}" + (f", exit code {code}"
                                                         if code is not None else ""))


def still_running(payload: Mapping[str, Any]) -> set[str] | None:
    """Task ids Stop lists as in flight; None when the payload does not say."""
    tasks = payload.get("background_tasks")
    if not isinstance(tasks, list):
        return None
    return {t["id"] for t in tasks if isinstance(t, Mapping) and isinstance(t.get("id"), str)
            and t.get("status") in RUNNING | {None}}


def _task_id(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return None
    found = next((value[k] for k in _ID_KEYS if isinstance(value.get(k), str)), None)
    return found or None


# --- the journal --------------------------------------------------------------------------

def note_started(store: Store, task_id: str, call_id: str, session_id: str | None) -> None:
    with store.lock.held():
        durable.append_jsonl(store.root / JOURNAL, [{
            "event": "started", "taskId": task_id, "callId": call_id,
            "sessionId": session_id, "at": clock.stamp()}])


def note_ended(store: Store, task_id: str) -> None:
    with store.lock.held():
        durable.append_jsonl(store.root / JOURNAL, [{
            "event": "ended", "taskId": task_id, "at": clock.stamp()}])


def _records(store: Store) -> list[dict[str, Any]]:
    path = store.root / JOURNAL
    if not path.exists():
        return []
    return [r for r in durable.read_jsonl(path).records if isinstance(r, dict)]


def open_tasks(store: Store) -> dict[str, tuple[str, str | None]]:
    """task id -> (call id, session id) of the background tasks not seen ending."""
    found: dict[str, tuple[str, str | None]] = {}
    for record in _records(store):
        if record.get("event") == "started":
            found[str(record["taskId"])] = (str(record["callId"]), record.get("sessionId"))
        else:
            found.pop(str(record.get("taskId")), None)
    return found


def call_ids(store: Store) -> frozenset[str]:
    """Every call that ever ran in the background (its window's changes are ambiguous)."""
    return frozenset(str(r["callId"]) for r in _records(store)
                     if r.get("event") == "started" and "callId" in r)


def end_task(guard: GuardContext, ended: Ended) -> bool:
    """End the call of a background task that has ended; False when none is open."""
    from gitguard.ledger import journal

    task = open_tasks(guard.store).get(ended.task_id)
    if task is None:
        return False
    entry = journal.read(guard.store).lookup(task[0])
    if entry is not None and entry.status == "started":
        guard.end_call(entry.call_id, ended.status, ended.result)
    note_ended(guard.store, ended.task_id)
    return True


def settle_at_stop(guard: GuardContext, session_id: str | None, payload: Mapping[str, Any]) -> None:
    """At Stop: the session's tasks no longer in flight have ended."""
    running = still_running(payload)
    for task_id, (_call, session) in open_tasks(guard.store).items():
        if session != session_id or (running is not None and task_id in running):
            continue
        end_task(guard, Ended(task_id, "succeeded",
                              f"background task {task_id} ended before Stop"))
