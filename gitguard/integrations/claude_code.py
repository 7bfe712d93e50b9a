"""Claude Code hook events (Codex sends the same shape) turned into gitguard calls.

`gitguard hook claude-code` reads one event on stdin and prints what `handle()` returns;
the daemon calls `handle()` in-process. The answer is always exit 0 with JSON: decisions
go in the JSON, and an internal error is logged and answered with a `systemMessage`,
never with a blocked tool.

| event                      | gitguard                                                  |
|----------------------------|-----------------------------------------------------------|
| SessionStart               | the session opened (a known id is reopened: `--resume`,   |
|                            | `--continue`; a fork is linked to its parent); on         |
|                            | `resume` or `compact` the recovery note goes back as      |
|                            | `additionalContext`                                       |
| PreToolUse                 | calls left open that the transcript shows resolved are    |
|                            | closed (`dangling.py`); then call begin (callId =         |
|                            | tool_use_id; Edit/Write/MultiEdit/apply_patch paths       |
|                            | declared); a refused replay -> `deny` (Claude Code: `ask` |
|                            | where the policy asks; Codex never gets `ask`)            |
| PostToolUse                | call end: succeeded, or failed when Codex's command       |
|                            | exited non-zero; `tool_response` stored as the result     |
| PostToolUseFailure         | call end failed, `error` stored as the result             |
| PermissionDenied           | the call never ran: failed, owning nothing                |
| UserPromptSubmit, Stop,    | every call of the main loop still open is closed          |
| StopFailure                | (`dangling.py`; a running subagent's calls stay open),    |
|                            | then a post checkpoint referencing `transcript_path`;     |
|                            | StopFailure (the model API failed) records its `error`    |
| CwdChanged                 | routed by `new_cwd`: the session is opened in the         |
|                            | worktree it entered, the move kept in its lineage there   |
| SubagentStart              | the subagent is running: its calls carry its `agent_id`   |
| SubagentStop               | the subagent's open calls are closed, their results read  |
|                            | from `agent_transcript_path`                              |
| PostToolBatch              | each listed call still open ends; one that had no         |
|                            | Pre/PostToolUse is ledgered now                           |
| Interrupt (Codex)          | every open call of the session is closed (uncertain)      |
| SessionEnd                 | the same; the session is ended until its next event       |
| Agent, Task, spawn_agent.. | a delegation: a container that owns no change and opens   |
|                            | no attribution window; relaunching it is no replay        |
| Bash `run_in_background`   | PostToolUse leaves the call open (`background.py`) until   |
|                            | TaskOutput/TaskStop shows its end, or Stop no longer      |
|                            | lists the task in `background_tasks`                      |

gitguard never answers `allow`: that would skip the permission prompt the user's own
settings ask for. With no objection it gives no decision and Claude Code decides.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any

from gitguard.calls import background, lifecycle, tools
from gitguard.errors import GitguardError, IllegalTransition, ReplayRefused, UnsafePath
from gitguard.integrations import dangling, hooklog, reach, transcript
from gitguard.ledger import journal, sessions
from gitguard.models import TERMINAL
from gitguard.storage import durable, trace_log
from gitguard.workspace import safe_relpath

if TYPE_CHECKING:
    from gitguard.api import Guard

Answer = dict[str, Any]

# Shell tools of Claude Code and Codex: what their command names it writes is declared.
SHELL_TOOLS = frozenset({"Bash", "exec_command", "shell", "local_shell"})
# Tools whose input names the file they write, so the path is declared (exact attribution).
PATH_KEYS = {"Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path",
             "NotebookEdit": "notebook_path"}
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
        reach.note(guard.store.root, agent_of(payload))
        answer = handler(guard, payload)
    except Exception as exc:  # the agent must keep working whatever gitguard's state
        where = hooklog.log_failure(guard.store.root, f"claude-code {event}", exc)
        what = exc.message if isinstance(exc, GitguardError) else f"{type(exc).__name__}: {exc}"
        return {"systemMessage": f"gitguard: the {event} hook failed ({what}); the tool call "
                                 f"was not blocked. Details: {where}"}
    return for_codex(answer) if agent_of(payload) == "codex" else answer


def for_codex(answer: Answer) -> Answer:
    """Codex treats `ask` (and fields it does not know) as a failed hook and runs the tool:
    a refusal goes to it as `deny`, with the reason."""
    specific = answer.get("hookSpecificOutput")
    if isinstance(specific, dict) and specific.get("permissionDecision") == "ask":
        reason = str(specific.get("permissionDecisionReason") or "")
        return {**answer, "hookSpecificOutput": {
            **specific, "permissionDecision": "deny",
            "permissionDecisionReason": reason + " Codex cannot ask the user from a hook: "
            "if running it again is safe, ask the user to approve it."}}
    return answer


def agent_of(payload: Mapping[str, Any]) -> str:
    """Codex sends a `turn_id` with its turn events; its SessionStart has none, but its
    transcript is a rollout file (`.../rollout-<time>-<thread id>.jsonl`)."""
    if "turn_id" in payload:
        return "codex"
    path = payload.get("transcript_path")
    name = path.replace("\\", "/").rsplit("/", 1)[-1] if isinstance(path, str) else ""
    return "codex" if name.startswith("rollout-") else "claude-code"


def session_of(payload: Mapping[str, Any]) -> str | None:
    return _safe_id(payload.get("session_id"), "sess")


def call_id_of(payload: Mapping[str, Any]) -> str | None:
    return _safe_id(payload.get("tool_use_id"), "tool")


def subagent_of(payload: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The subagent an event comes from (`agent_id`, `agent_type`); (None, None) for the
    session's main loop. Claude Code and Codex send a subagent's events under the parent's
    `session_id`."""
    agent_type = payload.get("agent_type")
    return (_safe_id(payload.get("agent_id"), "agent"),
            agent_type[:100] if isinstance(agent_type, str) and agent_type else None)


def _scope(guard: Guard, payload: Mapping[str, Any]) -> dangling.Scope:
    """A subagent's event settles its own calls; the main loop's, the main loop's and those
    of subagents no longer running."""
    agent_id, _ = subagent_of(payload)
    if agent_id is not None:
        return dangling.Scope(agent_id)
    session_id = session_of(payload)
    known = {s.session_id: s for s in guard.sessions()}.get(session_id or "")
    return dangling.Scope(None, known.running_subagents() if known else frozenset())


def _results_transcript(payload: Mapping[str, Any]) -> str | None:
    """Where the event's tool results are written: a subagent's own transcript (named by
    SubagentStop, or beside the session's as Claude Code lays it out), else the session's.
    A Codex subagent's events name its own rollout file as `transcript_path`."""
    named = payload.get("agent_transcript_path")
    if isinstance(named, str) and named:
        return named
    path, agent = _transcript(payload), payload.get("agent_id")
    if agent_of(payload) == "codex":
        return path
    if path is None or not isinstance(agent, str) or not _SAFE_ID.fullmatch(agent):
        return path
    return f"{path.removesuffix('.jsonl')}/subagents/agent-{agent}.jsonl"


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


def declared_writes(guard: Guard, tool: str, tool_input: Mapping[str, Any],
                    cwd: str | None = None) -> list[str]:
    """Workspace paths the tool says it writes, or a shell command's words name
    (`shell_targets`); paths outside the workspace are not ours."""
    raw: list[str] = []
    key = PATH_KEYS.get(tool)
    if key and isinstance(tool_input.get(key), str):
        raw.append(tool_input[key])
    if tool == "apply_patch":  # Codex: the patch text (tool_input.command) names its files
        from gitguard.calls.shell_targets import PATCH_PATHS

        text = (tool_input.get("command") or tool_input.get("input")
                or tool_input.get("patch") or "")
        raw += PATCH_PATHS.findall(text) if isinstance(text, str) else []
    elif tool in SHELL_TOOLS:  # (a patch Codex applies from the shell names its files too)
        from gitguard.calls.shell_targets import written_paths

        redacted = guard.store.privacy.redact_json(dict(tool_input))  # no secret as a path
        command = redacted.get("command") or redacted.get("cmd")
        base = cwd if cwd and os.path.isdir(cwd) else str(guard.ws.root)
        if isinstance(command, str | list):
            raw += written_paths(command, base) or ()
    found: list[str] = []
    for path in raw:
        try:
            found.append(safe_relpath(guard.ws, path.strip()))
        except UnsafePath:
            continue
    return list(dict.fromkeys(p for p in found if p))


def _pre_tool_use(guard: Guard, payload: Mapping[str, Any]) -> Answer:
    tool, tool_input = _tool(payload)
    call_id, session_id = call_id_of(payload), session_of(payload)
    _link_fork(guard, payload)
    # Calls of this session (of this agent) still open whose result the transcript already
    # holds never got their end event: close them before this call's window opens.
    dangling.settle(guard, session_id, _results_transcript(payload), "pre-tool-use",
                    turn_over=False, scope=_scope(guard, payload))
    agent_id, agent_type = subagent_of(payload)
    writes = declared_writes(guard, tool, tool_input, _cwd(payload))
    try:
        try:
            guard.begin_call(tool, tool_input, call_id=call_id, session_id=session_id,
                             writes=writes, agent_id=agent_id, agent_type=agent_type)
        except ReplayRefused:
            # The rare path: before refusing a repeat, read whether the user rewound the
            # turn of the earlier call (no hook fires for /rewind); if that marked a call,
            # ask again. The transcript may lag behind the hook: the resumed prompt that
            # shows the rewind is read once this call's own entry is written after it.
            if not _rewinds(guard, payload, settled=True):
                raise
            guard.begin_call(tool, tool_input, call_id=call_id, session_id=session_id,
                             writes=writes, agent_id=agent_id, agent_type=agent_type)
    except ReplayRefused as refused:
        policy = tools.classify(guard.settings, tool, tool_input).replay_policy
        decision = "deny" if policy == "never" else "ask"
        reason = (f"gitguard: {refused.message}. " + (
            "It must not run twice: check what the earlier call did instead of repeating it."
            if decision == "deny" else
            "Running it again may repeat its effect; approve only if that is safe."))
        with guard.store.writing():
            trace_log.emit(guard.store, "tool", "tool.replay_refused", session_id=session_id,
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
    entry = journal.read(guard.store).lookup(call_id) if call_id else None
    if entry is not None and entry.status in TERMINAL:
        return {}  # a repeated event
    if entry is None:
        # No PreToolUse began it (hooks added mid-call, or the user approved a replay gitguard
        # asked about): ledger it now. It has run already, so the replay guard cannot apply.
        agent_id, agent_type = subagent_of(payload)
        entry = guard.begin_call(tool, tool_input, call_id=call_id, session_id=session_id,
                                 writes=declared_writes(guard, tool, tool_input,
                                                        _cwd(payload)),
                                 force_replay=True, agent_id=agent_id, agent_type=agent_type)
        with guard.store.writing():
            trace_log.emit(guard.store, "tool", "tool.late_begin", session_id=entry.session_id,
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
    result = durable.canonical_json(response)
    failed = codex_failure(payload) if agent_of(payload) == "codex" else None
    if failed is not None:
        return _post_tool_use(guard, payload, "failed", f"{failed}\n".encode() + result)
    return _post_tool_use(guard, payload, "succeeded", result)


def codex_failure(payload: Mapping[str, Any]) -> str | None:
    """Why a Codex call failed, or None. Codex sends only PostToolUse; for a command its
    `tool_response` is the output text, so the exit code comes from a structured response
    when there is one, else from the rollout file (`transcript_path`) Codex writes."""
    response = payload.get("tool_response")
    if isinstance(response, Mapping):
        for key in ("exit_code", "exitCode"):
            code = response.get(key)
            if isinstance(code, int) and not isinstance(code, bool) and code != 0:
                return f"exited with code {code}"
        if response.get("success") is False:
            return "the tool reported failure"
        status = response.get("status")
        if isinstance(status, str) and status.lower() in ("failed", "failure", "error",
                                                          "declined", "rejected"):
            return f"the tool reported status {status}"
        return None
    call_id = payload.get("tool_use_id")
    code = transcript.exit_code(_transcript(payload), call_id) \
        if isinstance(call_id, str) and call_id else None
    if code is None and isinstance(response, str):
        code = transcript.exit_code_in_text(response)
    return f"exited with code {code}" if code is not None and code != 0 else None


def _post_failure(guard: Guard, payload: Mapping[str, Any]) -> Answer:
    error = str(payload.get("error") or "the tool failed")
    if payload.get("is_interrupt"):
        error += " (interrupted by the user)"
    return _post_tool_use(guard, payload, "failed", error.encode())


def _cwd(payload: Mapping[str, Any]) -> str | None:
    cwd = payload.get("cwd")
    return cwd if isinstance(cwd, str) and cwd else None


def _transcript(payload: Mapping[str, Any]) -> str | None:
    path = payload.get("transcript_path")
    return path if isinstance(path, str) and path else None


def _link_fork(guard: Guard, payload: Mapping[str, Any]) -> str | None:
    """Link a forked session (Claude Code's `--fork-session`: a new id whose transcript
    starts with a copy of the parent's history) to its parent, once; the parent's id."""
    session_id = session_of(payload)
    if session_id is None:
        return None
    path = _transcript(payload)
    parent = (_safe_id(payload.get("parent_session_id"), "sess")
              or _safe_id(transcript.fork_parent(path, payload.get("session_id")), "sess")
              or _parent_by_calls(guard, path, session_id))
    if parent is None or parent == session_id:
        return None
    mine = {s.session_id: s for s in guard.sessions()}.get(session_id)
    if mine is None or mine.parent_id in (None, sessions.UNKNOWN_PARENT) \
            or mine.ended_at is not None:
        guard.start_session(session_id, agent=agent_of(payload), parent_id=parent)
    return parent


def _parent_by_calls(guard: Guard, path: str | None, session_id: str) -> str | None:
    """The session that ledgered the first call of the transcript's history, when it is
    another: the copied history of a fork. Stops at the first call gitguard knows."""
    if path is None:
        return None
    state = journal.read(guard.store)
    for tool_use_id in transcript.tool_use_ids(path):
        entry = state.lookup(_safe_id(tool_use_id, "tool") or "")
        if entry is not None:
            return entry.session_id if entry.session_id != session_id else None
    return None


def _denied(guard: Guard, payload: Mapping[str, Any]) -> Answer:
    """Claude Code refused the call after PreToolUse began it: it never ran, owns nothing."""
    reason = payload.get("reason") or payload.get("message") or "permission denied"
    _never_ran(guard, call_id_of(payload), f"denied: {reason}")
    return {}


def _never_ran(guard: Guard, call_id: str | None, why: str) -> None:
    entry = journal.read(guard.store).lookup(call_id) if call_id else None
    if entry is None or entry.status != "started":
        return
    with suppress(IllegalTransition):       # a repeated event
        lifecycle.close_unrun(guard, entry.call_id, f"{why}; the tool did not run")
        guard.settle_windows()


def _turn_end(step: str, end_session: bool = False, every_call: bool = False
              ) -> Callable[[Guard, Mapping[str, Any]], Answer]:
    """A turn ended (or the session, or a subagent): its open calls are settled. The main
    loop's turn leaves running subagents' calls open; `every_call` (the session or the
    turn is over for everyone: SessionEnd, an interrupt) settles them too."""
    def take(guard: Guard, payload: Mapping[str, Any]) -> Answer:
        session_id = session_of(payload)
        if step != "user-prompt":     # Stop and SessionEnd list the tasks still running
            background.settle_at_stop(guard, session_id, payload)
        if step == "stop-failure":
            with guard.store.writing():
                trace_log.emit(guard.store, "session", "session.turn_failed",
                               session_id=session_id,
                               error=str(payload.get("error") or "unknown")[:200],
                               details=str(payload.get("error_details") or "")[:500])
        scope = dangling.EVERY_CALL if every_call else _scope(guard, payload)
        settled = dangling.settle(guard, session_id, _results_transcript(payload), step,
                                  scope=scope)
        if step in ("stop", "session-end") and payload.get("agent_id") is None:
            _rewinds(guard, payload)        # once a turn: did the user /rewind before it?
        agent_id, _ = subagent_of(payload)
        if step == "subagent-stop" and session_id is not None and agent_id is not None:
            with guard.store.writing():
                sessions.subagent_stopped(guard.store, session_id, agent_id,
                                          _results_transcript(payload))
        if end_session and session_id is not None and \
                any(s.session_id == session_id for s in guard.sessions()):
            guard.end_session(session_id)      # until its next event reopens it
        if end_session and session_id is not None:
            _end_elsewhere(guard, payload, session_id)
        if not settled.uncertain:
            return {}
        which = ", ".join(settled.uncertain)
        how = " and ".join(f"`gitguard reconcile {c} --status failed`"
                           for c in settled.uncertain)
        return {"systemMessage": f"gitguard: no PostToolUse came for {which}; marked uncertain, "
                                 "so it will not be repeated blindly, and what changed while it "
                                 f"was open is not rolled back. If it never ran: {how}."}
    return take


def _end_elsewhere(guard: Guard, payload: Mapping[str, Any], session_id: str) -> None:
    """SessionEnd comes to the worktree the session ended in; the other worktrees of the
    repository it acted in (before a `cd`, a subagent's nested `.claude/worktrees/agent-...`)
    see no event of it again: there too its open calls are settled and it is ended."""
    from gitguard import worktrees
    from gitguard.api import Guard as OpenGuard
    from gitguard.workspace import discover

    for root in worktrees.of_repository(guard.ws):
        if root == guard.ws.root:
            continue
        try:
            ws = discover(root)
        except GitguardError:
            continue
        if ws.root != root or not (ws.store_dir / "store.json").is_file():
            continue            # gitguard never acted there
        other = OpenGuard(ws)
        known = next((s for s in other.sessions() if s.session_id == session_id), None)
        if known is None or known.ended_at is not None:
            continue
        dangling.settle(other, session_id, _results_transcript(payload), "session-end",
                        scope=dangling.EVERY_CALL)
        other.end_session(session_id)


def _subagent_start(guard: Guard, payload: Mapping[str, Any]) -> Answer:
    """A subagent began: its calls (they carry its `agent_id`) stay open past the main
    loop's Stop until its SubagentStop."""
    session_id, (agent_id, agent_type) = session_of(payload), subagent_of(payload)
    if session_id is not None and agent_id is not None:
        with guard.store.writing():
            sessions.subagent_started(guard.store, session_id, agent_id, agent_type)
    return {}


def _cwd_changed(guard: Guard, payload: Mapping[str, Any]) -> Answer:
    """The session's working directory changed (`cd`; Claude Code's CwdChanged, routed by
    its `new_cwd`): the session is opened in the worktree it entered, and the move kept in
    its lineage there, so `status --session` shows where it went."""
    session_id, new = session_of(payload), payload.get("new_cwd")
    if session_id is None or not isinstance(new, str) or not new:
        return {}
    old = payload.get("old_cwd")
    with guard.store.writing():
        sessions.moved_in(guard.store, session_id, old if isinstance(old, str) else None, new)
        trace_log.emit(guard.store, "session", "session.cwd_changed", session_id=session_id,
                       old=old if isinstance(old, str) else None, new=new)
    return {}


def _tool_batch(guard: Guard, payload: Mapping[str, Any]) -> Answer:
    """Claude Code's PostToolBatch lists every call of a batch with its response: each one
    still open ends here, and one that had no Pre/PostToolUse at all is ledgered now."""
    calls = payload.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, Mapping) or not isinstance(call.get("tool_use_id"), str):
            continue
        response = call.get("tool_response")
        why = dangling.denial(response) if isinstance(response, str) else None
        if why is not None:
            # Listed with the denial Claude Code answered in its place: it never ran.
            _never_ran(guard, call_id_of(call), why)
            continue
        one = {**payload, "hook_event_name": "PostToolUse",
               **{k: call.get(k) for k in ("tool_name", "tool_input", "tool_use_id",
                                           "tool_response")}}
        _post_success(guard, one)
    return {}


def _rewinds(guard: Guard, payload: Mapping[str, Any], settled: bool = False) -> list[str]:
    """Mark the calls of turns the user rewound (integrations/rewind.py); never fails the
    hook: a transcript it cannot read shows no rewind. `settled`: first wait until the
    transcript holds this call's own entry (what came before it is then on disk)."""
    from gitguard.integrations import rewind

    path = _transcript(payload)
    if path is None or payload.get("agent_id") is not None or agent_of(payload) != "claude-code":
        return []     # Codex has no rewind of its own (docs/recovery.md, "Rewinds")
    tool_use_id = payload.get("tool_use_id")
    if settled and isinstance(tool_use_id, str) and tool_use_id:
        rewind.wait_written(path, tool_use_id)
    try:
        return rewind.detect(guard, session_of(payload), path)
    except (GitguardError, OSError):
        return []


def _session_start(guard: Guard, payload: Mapping[str, Any]) -> Answer:
    session_id = session_of(payload)
    if _link_fork(guard, payload) is None:
        # A resumed or forked session gitguard has never seen is a fork whose copied
        # history Claude Code has not written yet (with the daemon the hook runs before it
        # does): its parent is unknown, so every session here is its past until a later
        # hook names the parent from the transcript.
        known = any(s.session_id == session_id for s in guard.sessions())
        unnamed = (sessions.UNKNOWN_PARENT if payload.get("source") in ("resume", "fork")
                   and not known else None)
        guard.start_session(session_id, agent=agent_of(payload), parent_id=unnamed)
    if payload.get("source") not in ("resume", "compact", "fork"):
        return {}
    _rewinds(guard, payload)
    # imported here: every other event (a fresh process each, with no daemon) needs none
    from gitguard.integrations.session_context import recovery_note

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
    "UserPromptSubmit": _turn_end("user-prompt"),
    "Stop": _turn_end("stop"),
    "StopFailure": _turn_end("stop-failure"),
    "SubagentStart": _subagent_start,
    "SubagentStop": _turn_end("subagent-stop"),
    "PostToolBatch": _tool_batch,
    "CwdChanged": _cwd_changed,
    "Interrupt": _turn_end("interrupt", every_call=True),
    "SessionEnd": _turn_end("session-end", end_session=True, every_call=True),
}
