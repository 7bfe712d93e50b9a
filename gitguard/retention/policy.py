"""Which checkpoints `gitguard gc` keeps: a pure function of the index and the policy.

Kept, each for a named reason: the first `keep_first` and last `keep_last` checkpoints
of every session; every pre_rollback and resume checkpoint; pinned ones (config or
`gitguard pin`); every checkpoint of a session active within `keep_days`; the pre
checkpoint of a call that has not finished (its `call end` diffs against it); the
checkpoint of every pending conflict; and the newest complete checkpoint of each
session (resume starts there). Everything else may go.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from gitguard.models import CheckpointIndexRow
from gitguard.settings import Retention

ALWAYS_KEPT_KINDS = frozenset({"pre_rollback", "resume"})


@dataclass
class Plan:
    keep: dict[str, list[str]] = field(default_factory=dict)   # checkpoint id -> reasons
    prune: list[str] = field(default_factory=list)              # checkpoint ids, index order

    def kept(self, checkpoint_id: str) -> bool:
        return checkpoint_id in self.keep


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def choose(rows: list[CheckpointIndexRow], policy: Retention, now: datetime, *,
           pinned: Iterable[str] = (), in_flight: Iterable[str] = (),
           conflicts: Iterable[str] = (), complete: Iterable[str] | None = None) -> Plan:
    """`complete`: ids that load cleanly (None: all of them)."""
    plan = Plan()
    reasons: dict[str, list[str]] = {}

    def keep(checkpoint_id: str, why: str) -> None:
        reasons.setdefault(checkpoint_id, []).append(why)

    by_session: dict[str, list[CheckpointIndexRow]] = {}
    for row in rows:
        by_session.setdefault(row.session_id, []).append(row)
    complete_ids = set(complete) if complete is not None else {r.checkpoint_id for r in rows}
    young = timedelta(days=policy.keep_days)
    for session_rows in by_session.values():
        for row in session_rows[:policy.keep_first]:
            keep(row.checkpoint_id, "first")
        for row in session_rows[-policy.keep_last:] if policy.keep_last else []:
            keep(row.checkpoint_id, "last")
        newest = max(_parse(r.created_at) for r in session_rows)
        if now - newest < young:
            for row in session_rows:
                keep(row.checkpoint_id, "young session")
        for row in reversed(session_rows):
            if row.checkpoint_id in complete_ids:
                keep(row.checkpoint_id, "newest complete")
                break
    known = {r.checkpoint_id for r in rows}
    for row in rows:
        if row.kind in ALWAYS_KEPT_KINDS:
            keep(row.checkpoint_id, row.kind)
    for checkpoint_id in pinned:
        if checkpoint_id in known:
            keep(checkpoint_id, "pinned")
    for checkpoint_id in in_flight:
        if checkpoint_id in known:
            keep(checkpoint_id, "call in flight")
    for checkpoint_id in conflicts:
        if checkpoint_id in known:
            keep(checkpoint_id, "open conflict")
    for row in rows:
        if row.checkpoint_id in reasons:
            plan.keep[row.checkpoint_id] = reasons[row.checkpoint_id]
        else:
            plan.prune.append(row.checkpoint_id)
    return plan
