"""Calls an agent began that never ended, settled when its turn or its session ends.

Claude Code runs PreToolUse before its permission rules and its dialog, so a call the
user denies (or another hook blocks) was begun here and never gets a PostToolUse. Left
`started`, its attribution window stays open, every edit the user makes meanwhile is
ambiguous, and a resume would report it as interrupted. By Stop and SessionEnd every tool
of the turn has resolved, so a call still open then either never ran or its PostToolUse
hook failed. The transcript tells the two apart: a tool_result carrying Claude Code's
rejection text means the tool never ran (`failed`, so asking for it again is not a
replay); anything else stays honestly `uncertain`, settled by `gitguard reconcile`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gitguard import ledger, trace
from gitguard.errors import IllegalTransition
from gitguard.integrations import background
from gitguard.models import ToolLedgerEntry

if TYPE_CHECKING:
    from gitguard.api import Guard

# What Claude Code writes as the tool_result of a call that did not run.
REJECTED = "The user doesn't want to proceed with this tool use"
INTERRUPTED = "[Request interrupted by user for tool use]"
TRANSCRIPT_TAIL = 8 << 20       # the calls of one turn are near the end of the transcript

@dataclass(frozen=True)
class Settled:
    checkpoint_id: str
    never_ran: tuple[str, ...]
    uncertain: tuple[str, ...]


NO_END = ("no PostToolUse came for it before the agent's {when} event: the tool may not have run "
          "(denied, blocked) or gitguard's PostToolUse hook failed; check, then "
          "`gitguard reconcile {call} --status succeeded|failed`")


def open_calls(guard: Guard, session_id: str | None) -> list[ToolLedgerEntry]:
    """The agent's calls of this session still `started` (gitguard's own writes excluded,
    and shells running in the background: they did report, and end later)."""
    state = ledger.read(guard.store)
    running = {call for call, _session in background.open_tasks(guard.store).values()}
    return [e for e in state.in_order()
            if e.status == "started" and e.session_id == session_id
            and not e.tool_name.startswith("gitguard") and e.call_id not in running]


def never_ran(transcript_path: str | None, call_ids: Iterable[str]) -> dict[str, str]:
    """Call id -> why, for each call whose tool_result in the transcript says it did not run.
    Unreadable or unfamiliar transcripts give no evidence (the caller stays cautious)."""
    wanted = set(call_ids)
    if not wanted or not transcript_path:
        return {}
    try:
        with open(transcript_path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - TRANSCRIPT_TAIL))
            lines = fh.read().splitlines()
    except OSError:
        return {}
    found: dict[str, str] = {}
    for line in lines:
        if not any(k.encode() in line for k in wanted):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        blocks = _content(record)
        interrupted = any(_text(b).startswith(INTERRUPTED) for b in blocks)
        for block in blocks:
            if block.get("type") != "tool_result" or block.get("tool_use_id") not in wanted:
                continue
            text = _text(block)
            if interrupted:
                found.pop(str(block["tool_use_id"]), None)   # it may have been running
            elif text.startswith(REJECTED):
                found[str(block["tool_use_id"])] = "denied at the permission prompt"
            elif text.startswith("Permission to use") and "has been denied" in text:
                found[str(block["tool_use_id"])] = "denied by a permission rule"
    return found


def settle(guard: Guard, session_id: str | None, transcript_path: str | None,
           step: str) -> Settled:
    """End the calls that never ran, take the `post` checkpoint of the turn (`step`), and
    mark the other open calls uncertain with that checkpoint closing their window."""
    calls = open_calls(guard, session_id)
    evidence = never_ran(transcript_path, (e.call_id for e in calls))
    failed: list[str] = []
    for entry in calls:
        why = evidence.get(entry.call_id)
        if why is None:
            continue
        try:
            guard.end_call(entry.call_id, "failed", f"{why}: the tool did not run".encode())
        except IllegalTransition:
            continue                    # ended meanwhile by a late PostToolUse
        failed.append(entry.call_id)
    made = guard.checkpoint("post", step, session_id=session_id,
                            transcript_path=transcript_path)
    uncertain: list[str] = []
    with guard.store.writing():
        state = ledger.read(guard.store)
        marked = [state.entries[e.call_id].model_copy(update={
                      "status": "uncertain", "post_checkpoint_id": made.checkpoint_id,
                      "note": NO_END.format(when=step, call=e.call_id)})
                  for e in calls if state.entries[e.call_id].status == "started"]
        if marked:
            ledger.append_entries(guard.store, state, marked)
            uncertain = [e.call_id for e in marked]
        if failed or uncertain:
            trace.emit(guard.store, "recovery", "recovery.no_end", session_id=session_id,
                       step=step, neverRan=failed, uncertain=uncertain)
    engine: Any = getattr(guard, "engine", None)
    if uncertain and engine is not None:     # in the daemon: close their windows now
        engine.settle_windows(ledger.read(guard.store))
    return Settled(made.checkpoint_id, tuple(failed), tuple(uncertain))


def _content(record: Any) -> list[dict[str, Any]]:
    message = record.get("message") if isinstance(record, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _text(block: dict[str, Any]) -> str:
    content = block.get("content", block.get("text"))
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""
