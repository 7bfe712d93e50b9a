"""Which of an agent's steps completed: the "Last completed step" of the recovery note.

Apart from recovery/resume.py, so the hooks' ledger-only note
(integrations/session_context.py) applies the very same rule when the full resume
cannot answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gitguard.ledger.replay import rewound_local
from gitguard.models import Checkpoint, ToolLedgerEntry

NEVER_STARTED = "interrupted before the tool started; it did not run"
OPEN_STATUSES = ("planned", "approved", "started")


def interrupted(entry: ToolLedgerEntry) -> bool:
    """A call a crash cut short and nobody settled since: open, uncertain, or closed by
    resume before its tool started (`reconcile` settles an uncertain one)."""
    return (entry.status in OPEN_STATUSES or entry.status == "uncertain"
            or entry.note == NEVER_STARTED)


def last_completed(entries: list[ToolLedgerEntry], first_seq: Mapping[str, int],
                   saved: Checkpoint | None, posts: Sequence[tuple[str, int]] = ()
                   ) -> tuple[str | None, int | None]:
    """The last completed step and the ledger position the note's calls start after.

    The step is the newest one whose calls all finished (none interrupted), or whose post
    checkpoint was written (`posts`: (step, ledgerSeq) of the session's `checkpoint --kind
    post --step` checkpoints) while none of its calls is interrupted, even a step that made
    no call; or where the agent saved its own state (a manual checkpoint with a step) when
    that came later. Never a step with an interrupted call, nor the step name a call's own
    pre checkpoint carries. The note lists the calls from that step's first call on (after
    a call-less step's post checkpoint; from the saved state, if that is newer), plus every
    uncertain one: not the whole session.
    gitguard's own entries (a rollback, a conflict resolution) are not the agent's steps.
    """
    steps: dict[str, list[ToolLedgerEntry]] = {}
    for e in entries:
        # A call the agent's own rewind dropped, with no effect outside, is no longer part
        # of the run (one with an external effect still happened: its step stays).
        if not e.tool_name.startswith("gitguard.") and not rewound_local(e):
            steps.setdefault(e.step_id, []).append(e)
    done: tuple[str, int, int] | None = None        # step, first call's seq, last call's seq
    for step, calls in steps.items():
        if any(interrupted(c) for c in calls):
            continue
        last = max(first_seq.get(c.call_id, 0) for c in calls)
        if done is None or last > done[2]:
            done = (step, min(first_seq.get(c.call_id, 0) for c in calls), last)
    for step, seq in posts:
        # Written when the ledger ended at `seq`: after every call whose first seq is at
        # most `seq`, so it wins a tie. A step with calls starts where its first call does.
        calls = steps.get(step, [])
        if any(interrupted(c) for c in calls):
            continue
        if done is None or seq >= done[2]:
            start = min((first_seq.get(c.call_id, 0) for c in calls), default=seq + 1)
            done = (step, start, seq)
    if saved is not None and (done is None or saved.ledger_seq >= done[2]):
        return saved.step_id or (done[0] if done else None), saved.ledger_seq
    if done is None:
        return None, None
    return done[0], done[1] - 1
