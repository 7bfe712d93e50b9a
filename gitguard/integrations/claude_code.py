"""Claude Code hook events (Codex sends the same shape) turned into gitguard calls.

`gitguard hook claude-code` reads one event on stdin and prints what `handle()` returns;
the daemon calls `handle()` in-process. The answer is always exit 0 with JSON: decisions
go in the JSON, and an internal error is logged and answered with a `systemMessage`,
never with a blocked tool.

| event                      | gitguard                                                  |
|----------------------------|-----------------------------------------------------------|
| SessionStart               | the session (id = session_id); on `resume` or `compact`   |
|                            | the recovery note goes back as `additionalContext`        |
| PreToolUse                 | call begin (callId = tool_use_id; Edit/Write/MultiEdit    |
|                            | paths declared); a refused replay -> `deny` or `ask`      |
| PostToolUse                | call end succeeded, `tool_response` stored as the result  |
| PostToolUseFailure         | call end failed, `error` stored as the result             |
| PermissionDenied           | call end failed: the tool did not run                     |
| UserPromptSubmit           | a post checkpoint referencing `transcript_path`           |
| Stop, SessionEnd           | the same, after settling calls begun and never ended      |
|                            | (`dangling.py`); SessionEnd also ends the session         |
| Bash `run_in_background`   | PostToolUse leaves the call open (`background.py`) until   |
|                            | TaskOutput/TaskStop shows its end, or Stop no longer      |
|                            | lists the task in `background_tasks`                      |

gitguard never answers `allow`: that would skip the permission prompt the user's own
settings ask for. With no objection it gives no decision and Claude Code decides.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from gitguard import durable, ledger, tools, trace
from gitguard.errors import GitguardError, IllegalTransition, ReplayRefused, UnsafePath
from gitguard.integrations import background, dangling, hooklog
from gitguard.models import TERMINAL
from gitguard.workspace import safe_relpath

if TYPE_CHECKING:
    from gitguard.api import Guard

Answer = dict[str, Any]

# Tools whose input names the file they write, so the path is declared (exact attribution).
PATH_KEYS = {"Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path",
             "NotebookEdit": "notebook_path"}
_PATCH_PATHS = re.compile(r"^\*\*\* (?:Add File|Update File|Delete File|Move to): (.+)$",
                          re.MULTILINE)
_SAFE_ID = re.compile(r"[A-Za-z0-9_.-]{1,100}")
# Prose the model writes beside a command: the same command with other words is the same call.
COSMETIC_KEYS = ("description",)


def handle(guard: Guard, payload: Mapping[str, Any]) -> Answer:
    """The JSON to print for one hook event."""
    event = str(payload.get("hook_event_name") or "")
    handler = _HANDLERS.get(event)
    if handler is None:
        return {}
    try:
        return handler(guard, payload)
    except Exception as exc:  # the agent must keep working whatever gitguard's state
        where = hooklog.log_failure(guard.store.root, f"claude-code {event}", exc)
        what = exc.message if isinstance(exc, GitguardError) else f"{type(exc).__name__}: {exc}"
        return {"systemMessage": f"gitguard: the {event} hook failed ({what}); the tool call "
                                 f"was not blocked. Details: {where}"}


def agent_of(payload: Mapping[str, Any]) -> str:
    return "codex" if "turn_id" in payload else "claude-code"


def session_of(payload: Mapping[str, Any]) -> str | None:
    return _safe_id(payload.get("session_id"), "sess")


def call_id_of(payload: Mapping[str, Any]) -> str | None:
    return _safe_id(payload.get("tool_use_id"), "tool")


def _safe_id(value: Any, prefix: str) -> str | None:
    """The agent's id when it is usable as a ref or file name, else a stable digest of it."""
    if not isinstance(value, str) or not value:
        return None
    if _SAFE_ID.fullmatch(value) and not value.startswith(".") and ".." not in value:
        return value
    return f"{prefix}_{hashlib.sha256(value.encode()).hexdigest()[:16]}"


def _tool(payload: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """Tool name and the input that identifies the call (for the replay guard)."""
    raw = payload.get("tool_input")
    tool_input = {k: v for k, v in raw.items() if k not in COSMETIC_KEYS} \
        if isinstance(raw, Mapping) else {}
    return str(payload.get("tool_name") or "unknown"), tool_input


def declared_writes(guard: Guard, tool: str, tool_input: Mapping[str, Any]) -> list[str]:
    """Workspace paths the tool says it writes; paths outside the workspace are not ours."""
    raw: list[str] = []
    key = PATH_KEYS.get(tool)
    if key and isinstance(tool_input.get(key), str):
        raw.append(tool_input[key])
    if tool == "apply_patch":  # Codex: the patch text names its files
        text = tool_input.get("input") or tool_input.get("patch") or ""
        raw += _PATCH_PATHS.findall(text) if isinstance(text, str) else []
    found: list[str] = []
    for path in raw:
        try:
            found.append(safe_relpath(guard.ws, path.strip()))
        except UnsafePath:
            continue
    return found


def _pre_tool_use(guard: Guard, payload: Mapping[str, Any]) -> Answer:
    tool, tool_input = _tool(payload)
    call_id, session_id = call_id_of(payload), session_of(payload)
    try:
        guard.begin_call(tool, tool_input, call_id=call_id, session_id=session_id,
                         writes=declared_writes(guard, tool, tool_input))
    except ReplayRefused as refused:
        policy = tools.classify(guard.settings, tool, tool_input).replay_policy
        decision = "deny" if policy == "never" else "ask"
        reason = (f"gitguard: {refused.message}. " + (
            "It must not run twice: check what the earlier call did instead of repeating it."
            if decision == "deny" else
            "Running it again may repeat its effect; approve only if that is safe."))
        with guard.store.writing():
            trace.emit(guard.store, "tool", "tool.replay_refused", session_id=session_id,
                       callId=call_id, tool=tool, decision=decision, reason=refused.message)
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse",
                                       "permissionDecision": decision,
                                       "permissionDecisionReason": reason}}
    except IllegalTransition:
        return {}  # the same tool_use_id again: the call is already in the ledger
    return {}


def _post_tool_use(guard: Guard, payload: Mapping[str, Any], status: str,
                   result: bytes) -> Answer:
    tool, tool_input = _tool(payload)
    call_id, session_id = call_id_of(payload), session_of(payload)
    entry = ledger.read(guard.store).entries.get(call_id) if call_id else None
    if entry is not None and entry.status in TERMINAL:
        return {}  # a repeated event
    if entry is None:
        # No PreToolUse began it (hooks added mid-call, or the user approved a replay gitguard
        # asked about): ledger it now. It has run already, so the replay guard cannot apply.
        entry = guard.begin_call(tool, tool_input, call_id=call_id, session_id=session_id,
                                 writes=declared_writes(guard, tool, tool_input),
                                 force_replay=True)
        with guard.store.writing():
            trace.emit(guard.store, "tool", "tool.late_begin", session_id=entry.session_id,
                       callId=entry.call_id, tool=tool)
    task = background.launched(payload) if status == "succeeded" else None
    if task is not None:
        # It goes on running: its window stays open until its end is observed.
        guard.background_call(entry.call_id, task)
    else:
        guard.end_call(entry.call_id, status, result)
    ended = background.ended_by(payload)
    if ended is not None:
        background.end_task(guard, ended)
    return {}


def _post_success(guard: Guard, payload: Mapping[str, Any]) -> Answer:
    response = payload.get("tool_response")
    return _post_tool_use(guard, payload, "succeeded", durable.canonical_json(response))


def _post_failure(guard: Guard, payload: Mapping[str, Any]) -> Answer:
    error = str(payload.get("error") or "the tool failed")
    if payload.get("is_interrupt"):
        error += " (interrupted by the user)"
    return _post_tool_use(guard, payload, "failed", error.encode())


def _checkpoint(step: str) -> Callable[[Guard, Mapping[str, Any]], Answer]:
    def take(guard: Guard, payload: Mapping[str, Any]) -> Answer:
        transcript = payload.get("transcript_path")
        guard.checkpoint("post", step, session_id=session_of(payload),
                         transcript_path=transcript if isinstance(transcript, str) else None)
        return {}
    return take


def _denied(guard: Guard, payload: Mapping[str, Any]) -> Answer:
    """Claude Code refused the call after PreToolUse began it: it never ran."""
    call_id = call_id_of(payload)
    entry = ledger.read(guard.store).entries.get(call_id) if call_id else None
    if entry is None or entry.status != "started":
        return {}
    reason = payload.get("reason") or payload.get("message") or "permission denied"
    with suppress(IllegalTransition):       # a repeated event
        guard.end_call(entry.call_id, "failed", f"denied: {reason}; the tool did not run".encode())
    return {}


def _turn_end(step: str, end_session: bool = False
              ) -> Callable[[Guard, Mapping[str, Any]], Answer]:
    def take(guard: Guard, payload: Mapping[str, Any]) -> Answer:
        transcript = payload.get("transcript_path")
        session_id = session_of(payload)
        background.settle_at_stop(guard, session_id, payload)
        settled = dangling.settle(guard, session_id,
                                  transcript if isinstance(transcript, str) else None, step)
        if end_session and session_id is not None:
            guard.end_session(session_id)
        if not settled.uncertain:
            return {}
        return {"systemMessage": "gitguard: no PostToolUse came for "
                + ", ".join(settled.uncertain) + "; marked uncertain, so it will not be "
                "repeated blindly. If it never ran: `gitguard reconcile CALL --status failed`."}
    return take


def _session_start(guard: Guard, payload: Mapping[str, Any]) -> Answer:
    session_id = session_of(payload)
    guard.start_session(session_id, agent=agent_of(payload))
    if payload.get("source") not in ("resume", "compact"):
        return {}
    # imported here: every other event (a fresh process each, with no daemon) needs none
    from gitguard.integrations.recovery_note import recovery_note

    note = recovery_note(guard, session_id)
    if not note:
        return {}
    return {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": note}}


_HANDLERS: dict[str, Callable[[Guard, Mapping[str, Any]], Answer]] = {
    "SessionStart": _session_start,
    "PreToolUse": _pre_tool_use,
    "PostToolUse": _post_success,
    "PostToolUseFailure": _post_failure,
    "PermissionDenied": _denied,
    "UserPromptSubmit": _checkpoint("user-prompt"),
    "Stop": _turn_end("stop"),
    "SessionEnd": _turn_end("session-end", end_session=True),
}
