"""Calls an agent began that never ended, closed at the session's next event.

Claude Code runs PreToolUse before its permission rules and its dialog, so a call a rule
denies, the user refuses, or `-p` is not permitted to run was begun here and never gets
a PostToolUse, PostToolUseFailure or PermissionDenied. Left `started`, its window would
stay open over every edit the user makes meanwhile (and rollback would revert them). So
the session's next event closes it (DESIGN.md, Attribution: calls that never ran own
nothing), and the transcript says how:

* its tool_result carries one of Claude Code's denial texts: it never ran. `failed`,
  with an empty window (`calls.close_unrun`): it owns nothing, asking for it again is
  no replay, and it is not under "Do not repeat".
* Codex's rollout holds its output, and the call owns only the paths it declared (a
  patch Codex applied from the shell: Codex 0.171 sends no PostToolUse for it): it has
  ended, `succeeded` or `failed` by the exit code in that output. What else changed in
  its window since the tool finished is not its own, so ending it late costs nothing.
* its tool_result is something else (it ran; our PostToolUse hook failed or never
  came), or, at the end of a turn, there is none: `uncertain`, its window closed by a
  checkpoint taken now. What changed in it is `ambiguous`: rollback makes it a
  conflict, never restores it; a person settles the call with `gitguard reconcile`.

At the next PreToolUse only calls with a tool_result are closed: one with none yet may
be running beside the new one (parallel tool calls). At UserPromptSubmit, Stop and
SessionEnd every tool of the turn has resolved, so every open call of the session closes.
The same code runs in the daemon and without it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gitguard.calls import background, lifecycle
from gitguard.errors import IllegalTransition
from gitguard.integrations import transcript
from gitguard.ledger import journal
from gitguard.models import ToolLedgerEntry
from gitguard.storage import trace_log

if TYPE_CHECKING:
    from gitguard.api import Guard

# Claude Code's texts for a tool call it did not run (from its 2.1 CLI): the tool_result
# it records instead of the tool's output. Each: (a test on the text, why).
REJECTED = "The user doesn't want to proceed with this tool use"
DENIALS: tuple[tuple[tuple[str, ...], str], ...] = (
    ((REJECTED,), "denied at the permission prompt"),
    (("Permission to use ", " has been denied"), "denied by a permission rule"),
    (("Permission for this action has been denied",), "denied by the auto-mode classifier"),
    (("Claude requested permissions to ", "but you haven't granted it yet"),
     "not permitted in this run (no permission rule allows it)"),
    (("Hook PreToolUse:", " denied this tool"), "denied by a PreToolUse hook"),
    (("Hook PreToolUse:", " asked for confirmation for this tool"),
     "held for confirmation by a PreToolUse hook and not approved"),
    (("PreToolUse:", " hook error: "), "blocked by a PreToolUse hook"),
    (("gitguard: ",), "refused by gitguard's replay guard"),
)


@dataclass(frozen=True)
class Scope:
    """Whose calls an event settles. A subagent's calls carry its id: its own events
    (its PreToolUse, SubagentStop) settle them, and the main loop's turn end does not
    while it runs (a background subagent outlives the main loop's Stop)."""

    agent_id: str | None = None                 # None: the session's main loop
    running: frozenset[str] = frozenset()       # subagents still running (main loop only)

    def holds(self, entry: ToolLedgerEntry) -> bool:
        if self.agent_id is not None:
            return entry.agent_id == self.agent_id
        return entry.agent_id is None or entry.agent_id not in self.running


EVERY_CALL = None


@dataclass(frozen=True)
class Settled:
    checkpoint_id: str | None
    never_ran: tuple[str, ...]
    uncertain: tuple[str, ...]
    ended: tuple[str, ...] = ()     # ended by the output in Codex's rollout


NO_END = ("no PostToolUse came for it before the agent's {when} event: {why}; check, then "
          "`gitguard reconcile {call} --status succeeded|failed`")


def open_calls(guard: Guard, session_id: str | None, scope: Scope | None = EVERY_CALL
               ) -> list[ToolLedgerEntry]:
    """The agent's calls of this session still `started` (gitguard's own writes excluded,
    and shells running in the background: they did report, and end later), of `scope`."""
    state = journal.read(guard.store)
    running = {call for call, _session in background.open_tasks(guard.store).values()}
    return [e for e in state.open_entries()
            if e.status == "started" and e.session_id == session_id
            and not e.tool_name.startswith("gitguard") and e.call_id not in running
            and (scope is None or scope.holds(e))]


def denial(text: str) -> str | None:
    """Why the tool did not run, when `text` is one of Claude Code's denial texts."""
    for parts, why in DENIALS:
        if text.startswith(parts[0]) and all(p in text for p in parts[1:]):
            return why
    return None


def never_ran(transcript_path: str | None, call_ids: Iterable[str]) -> dict[str, str]:
    """Call id -> why, for each call whose tool_result in the transcript says it did not run."""
    found = transcript.tool_results(transcript_path, call_ids)
    return {call_id: why for call_id, result in found.items()
            if not result.interrupted and (why := denial(result.text)) is not None}


def settle(guard: Guard, session_id: str | None, transcript_path: str | None,
           step: str, *, turn_over: bool = True, scope: Scope | None = EVERY_CALL
           ) -> Settled:
    """Close the session's open calls of `scope` (all of them when `turn_over`, else those
    with a tool_result in `transcript_path`) and, when a call is marked uncertain or
    `turn_over`, take the `post` checkpoint of `step` that closes their windows."""
    calls_open = open_calls(guard, session_id, scope)
    results = (transcript.tool_results(transcript_path, (e.call_id for e in calls_open))
               if calls_open else {})
    failed: list[str] = []
    ended: list[str] = []
    unsure: dict[str, str] = {}
    for entry in calls_open:
        result = results.get(entry.call_id)
        if result is not None and result.finished and \
                not lifecycle.owns_declared_only(guard, entry):
            # Its output may be in the rollout before its PostToolUse comes (parallel
            # calls): for a call whose window claims what changed in it, no evidence.
            result = None
        why = denial(result.text) if result is not None and not result.interrupted else None
        if why is not None:
            try:
                lifecycle.close_unrun(guard, entry.call_id, f"{why}: the tool did not run")
            except IllegalTransition:
                continue                    # ended meanwhile by a late PostToolUse
            failed.append(entry.call_id)
        elif result is not None and result.finished:
            try:
                guard.end_call(entry.call_id, "failed" if result.is_error else "succeeded",
                               result.text)
            except IllegalTransition:
                continue                    # ended meanwhile by a late PostToolUse
            ended.append(entry.call_id)
        elif result is not None:
            unsure[entry.call_id] = ("the transcript shows it was interrupted" if
                                     result.interrupted else "the transcript shows a result, "
                                     "so it ran, but gitguard never saw its end")
        elif turn_over:
            unsure[entry.call_id] = ("it may not have run (denied, blocked) or gitguard's "
                                     "PostToolUse hook failed")
    if failed:
        guard.settle_windows()
    if not unsure and not turn_over:
        return Settled(None, tuple(failed), (), tuple(ended))
    made = guard.checkpoint("post", step, session_id=session_id,
                            transcript_path=transcript_path)
    uncertain: list[str] = []
    with guard.store.writing():
        state = journal.read(guard.store)
        marked = [state.get(c).model_copy(update={
                      "status": "uncertain", "post_checkpoint_id": made.checkpoint_id,
                      "note": NO_END.format(when=step, why=why, call=c)})
                  for c, why in unsure.items() if state.get(c).status == "started"]
        if marked:
            journal.append_entries(guard.store, state, marked)
            uncertain = [e.call_id for e in marked]
        if failed or uncertain or ended:
            trace_log.emit(guard.store, "recovery", "recovery.no_end", session_id=session_id,
                           step=step, neverRan=failed, uncertain=uncertain, endedByRollout=ended)
    if uncertain:
        guard.settle_windows()
    return Settled(made.checkpoint_id, tuple(failed), tuple(uncertain), tuple(ended))
