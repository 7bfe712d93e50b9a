"""The recovery note a resumed (or compacted) agent session gets back as context.

`gitguard.recovery.resume` owns the real note: it verifies the workspace and settles
interrupted calls. This adapter calls it and, when it cannot answer, builds a minimal
note from the ledger alone: the calls whose outcome is unknown, the finished calls that
must not run again, and what to do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gitguard.integrations import hooklog
from gitguard.ledger import journal, sessions
from gitguard.ledger.steps import interrupted, last_completed
from gitguard.models import ToolLedgerEntry
from gitguard.recovery import resume
from gitguard.snapshot import checkpoints

if TYPE_CHECKING:
    from gitguard.api import Guard

MAX_DETAILS = 20


def recovery_note(guard: Guard, session_id: str | None) -> str:
    """The note for `session_id`; empty when gitguard has nothing to say.

    Whatever goes wrong in the full resume (no checkpoint yet, a bug), the agent still
    gets the ledger's note: the failure is logged, not passed on. A fork with no call of
    its own yet gets its parent's note: that history is what it carries on.
    """
    session_id = _subject(guard, session_id)
    try:
        return resume.resume(guard, session_id=session_id).note
    except Exception as exc:  # noqa: BLE001 - the hook answers with the ledger's note instead
        hooklog.log_failure(guard.store.root, "recovery.resume", exc)
        return ledger_note(guard, session_id)


def _subject(guard: Guard, session_id: str | None) -> str | None:
    """The session whose calls the note is about: `session_id`, or for a fork that has
    made no call yet, the nearest ancestor that has."""
    if session_id is None or not guard.store.exists():
        return session_id
    known = {s.session_id: s for s in guard.sessions()}
    found = known.get(session_id)
    if found is None or found.parent_id is None:
        return session_id
    with_calls = {e.session_id for e in journal.read(guard.store).entries.values()}
    for sid in sessions.lineage(guard.store, found):
        if sid in with_calls:
            return sid
    return session_id


def _label(entry: ToolLedgerEntry) -> str:
    return f"{entry.tool_name}({entry.call_id})"


def _repeatable(entry: ToolLedgerEntry) -> bool:
    return entry.replay_policy == "auto" and entry.idempotency != "non_idempotent"


def ledger_note(guard: Guard, session_id: str | None) -> str:
    """A note from the ledger and the newest checkpoint of the session."""
    entries = journal.read(guard.store).in_order() if guard.store.exists() else []
    mine = [e for e in entries if e.session_id == session_id]
    if not mine and entries:
        # A resumed agent may come back under a new session id: speak about the last one.
        session_id = entries[-1].session_id
        mine = [e for e in entries if e.session_id == session_id]
    if not mine:
        return ""
    lines = ["System resumed; gitguard's ledger of this session says:"]
    row = checkpoints.read_index(guard.store).latest(session_id)
    if row is not None:
        lines.append(f"Checkpoint: {row.checkpoint_id}")
    state = journal.read(guard.store)
    step, since = last_completed(mine, state.first_seq, None)
    if step is not None:
        lines.append(f"Last completed step: {step}.")
    do_not_repeat: list[str] = []
    details: list[str] = []
    for entry in mine:
        if since is not None and state.first_seq.get(entry.call_id, 0) <= since and \
                not interrupted(entry):
            if not _repeatable(entry):
                do_not_repeat.append(_label(entry))
            continue          # before the last completed step: `gitguard explain` lists it
        ran = f"`{entry.summary}`" if entry.summary else "its input"
        if entry.status in ("started", "uncertain", "planned", "approved"):
            safe = "it is idempotent" if _repeatable(entry) else (
                f"it is {entry.idempotency.replace('_', '-')}; check its effect first")
            details.append(f"Tool {_label(entry)} started {ran} but its outcome is unknown: "
                           f"{safe}.")
            if not _repeatable(entry):
                do_not_repeat.append(_label(entry))
        elif entry.status == "failed":
            details.append(f"Tool {_label(entry)} ran {ran}: failed."
                         + (f" Error summary: {entry.error_summary}" if entry.error_summary
                            else ""))
        elif not _repeatable(entry):
            details.append(f"Tool {_label(entry)} ran {ran}: succeeded; it must not run again.")
            do_not_repeat.append(_label(entry))
    if len(details) > MAX_DETAILS:
        lines.append(f"({len(details) - MAX_DETAILS} earlier calls left out: `gitguard ledger`)")
    lines += details[-MAX_DETAILS:]
    if do_not_repeat:
        lines.append(f"Do not repeat: {', '.join(do_not_repeat)}.")
    lines.append("Plan the next step from these observations.")
    return "\n".join(lines)
