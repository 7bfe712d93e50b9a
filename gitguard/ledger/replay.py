"""Whether a call may run again: one rule shared by the replay guard, resume and explain.

Pure functions over ledger entries. A call blocks a replay of the same tool and
input while its outcome is in the world (succeeded) or may be (started, uncertain).
The stricter of the new call's policy and the earlier call's policy applies, and a
non-idempotent earlier call is never replayed automatically (DESIGN.md invariant 4),
so a caller cannot pass `--replay auto` to walk past an earlier `never`.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitguard.models import ReplayPolicy, ToolLedgerEntry

BLOCKING_STATUSES = frozenset({"succeeded", "uncertain", "started"})
_ORDER: tuple[ReplayPolicy, ...] = ("auto", "ask", "never")
_STATUS_PHRASE = {"succeeded": "it succeeded", "uncertain": "its outcome is uncertain",
                  "started": "it started and has not ended"}


_RANK = {policy: rank for rank, policy in enumerate(_ORDER)}


def stricter(*policies: ReplayPolicy) -> ReplayPolicy:
    return max(policies, key=_RANK.__getitem__)


def effective_policy(prior: ToolLedgerEntry, requested: ReplayPolicy) -> ReplayPolicy:
    """The policy that governs running `prior`'s tool and input again."""
    floor = 1 if prior.idempotency == "non_idempotent" else 0      # at least "ask"
    return _ORDER[max(_RANK[requested], _RANK[prior.replay_policy], floor)]


def never_ran(entry: ToolLedgerEntry) -> bool:
    """A call the agent announced and then did not run (denied, blocked): closed failed with
    an empty window (its post checkpoint is its pre), so it owns no change (calls.close_unrun)."""
    return (entry.status == "failed" and entry.pre_checkpoint_id is not None
            and entry.post_checkpoint_id == entry.pre_checkpoint_id)


@dataclass(frozen=True)
class Verdict:
    replayable: bool
    policy: ReplayPolicy
    why: str


# Side effects a rewind can undo: files in the workspace. Anything else (a publish, a
# push, a request, a process) happened outside and stays.
LOCAL_EFFECTS = frozenset({"filesystem"})


def external(entry: ToolLedgerEntry) -> bool:
    """The call acts outside the workspace (or may: an unknown command is `external`)."""
    return bool(set(entry.side_effects) - LOCAL_EFFECTS)


def rewound_local(entry: ToolLedgerEntry) -> bool:
    """The agent's own rewind dropped the call's turn, and it had no external effect:
    nothing of it is left in the world the agent must not repeat (integrations/rewind.py)."""
    return entry.rewound_at is not None and not external(entry)


def blocks(entry: ToolLedgerEntry) -> bool:
    """`not verdict(entry).replayable`, without building the explanation (resume asks this
    of every call in a long ledger)."""
    # effective_policy(entry, entry.replay_policy) is "auto" exactly when the call's own
    # policy is auto and it is not non-idempotent (the floor); spelled out, it is one
    # comparison per call instead of a max over ranks.
    return (entry.status in BLOCKING_STATUSES
            and (entry.replay_policy != "auto" or entry.idempotency == "non_idempotent")
            and not rewound_local(entry))


def verdict(entry: ToolLedgerEntry) -> Verdict:
    """May the agent run this call's tool with this input again without asking anyone?"""
    policy = effective_policy(entry, entry.replay_policy)
    reason = entry.classification_reason or entry.idempotency
    if entry.status in ("planned", "approved"):
        return Verdict(True, policy, "it never started")
    if entry.status == "failed":
        return Verdict(True, policy, "it failed; running it again is allowed")
    if rewound_local(entry):
        return Verdict(True, policy, f"it was rewound ({entry.rewound_by}) and had no "
                                     "external effect; running it again is allowed")
    said = _STATUS_PHRASE.get(entry.status, f"it is {entry.status}")
    if entry.status not in BLOCKING_STATUSES or policy == "auto":
        return Verdict(True, policy, f"{said}; replay is safe: {reason}")
    if entry.rewound_at is not None:
        return Verdict(False, policy, f"{said}; {reason}; replay policy {policy}; it was "
                                      "rewound in the conversation, but the rewind did not "
                                      "undo its external effect")
    return Verdict(False, policy, f"{said}; {reason}; replay policy {policy}")
