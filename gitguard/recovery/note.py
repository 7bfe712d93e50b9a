"""The recovery note handed to an agent after a crash (DESIGN.md "Resume"). Pure.

The note is plain sentences an agent reads before planning its next step: where it
resumed, what finished, what may or may not have happened outside, and what it must
not run again. Long runs are cut to the newest lines so the note stays readable;
`gitguard explain` lists everything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gitguard.calls.attribution import owner_words

MAX_FINISHED = 20
MAX_CHANGED = 20
MAX_DO_NOT_REPEAT = 30

# What to look at outside the workspace before acting, by side effect (first match wins).
_CHECKS: tuple[tuple[str, str], ...] = (
    ("email", "check the recipient's mailbox"),
    ("publish", "check the package registry for the version it would publish"),
    ("vcs_remote", "check the remote repository (`git ls-remote`)"),
    ("database", "check the database rows it would change"),
    ("external", "check the remote service it talks to"),
    ("network", "check the remote service it talks to"),
    ("process", "check the processes it would start or stop"),
    ("filesystem", "check the files it writes (`gitguard status`)"),
)


@dataclass(frozen=True)
class CallFact:
    call_id: str
    tool: str
    status: str
    summary: str = ""
    idempotency: str = "conditional"
    side_effects: tuple[str, ...] = ()
    error_summary: str | None = None
    never_started: bool = False
    # What a probe found: "happened" / "not_happened" (the call is settled, `probe_said`
    # is its fact: "did publish x@1.2.0 (the registry lists it)"), or "unknown" (it stays
    # uncertain; `probe_said`: "its probe `CMD` could not tell (WHY)").
    probe_result: str | None = None
    probe_said: str | None = None
    # The agent's own rewind dropped the call's turn (integrations/rewind.py): by what,
    # whether its files were put back ("restored"/"kept"), and whether it acted outside.
    rewound_by: str | None = None
    rewound_files: str | None = None
    external: bool = False

    @property
    def label(self) -> str:
        return f"{self.tool}({self.call_id})"


@dataclass(frozen=True)
class PathFact:
    path: str
    owner: str            # "user" or a callId
    confidence: str


@dataclass(frozen=True)
class NoteFacts:
    checkpoint_id: str | None
    last_completed_step: str | None
    calls: Sequence[CallFact] = ()              # finished, never started and uncertain, in order
    do_not_repeat: Sequence[CallFact] = ()
    changed: Sequence[PathFact] = ()
    conflicts: Sequence[PathFact] = ()          # owner: the call whose write is gone
    head_then: str | None = None
    head_now: str | None = None
    branch_then: str | None = None
    branch_now: str | None = None
    skipped: Sequence[tuple[str, str]] = ()     # ("checkpoint ID" or "checkpoint file F", reason)
    earlier_finished: int = 0                    # finished calls left out before `calls`


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def outside_check(call: CallFact) -> str:
    """What to verify in the world before doing anything about an uncertain call."""
    for effect, check in _CHECKS:
        if effect in call.side_effects:
            return check
    if call.idempotency == "idempotent":
        return "it is safe to run it again"
    return "check its effect in the workspace (`gitguard status`)"


def _idempotency_phrase(value: str) -> str:
    return {"non_idempotent": "it is not idempotent",
            "conditional": "it is conditional (safe again only if its effect is absent)",
            "idempotent": "it is idempotent"}.get(value, f"it is {value}")


def _rewound_line(call: CallFact, shown: str) -> str:
    files = {"restored": "its file changes were undone",
             "kept": "its file changes are still in the workspace (check them with "
                     "`gitguard status`)"}.get(call.rewound_files or "", "it changed no file")
    return (f"Tool {call.label}{shown} was rewound ({call.rewound_by}): {files}; it may be "
            "run again.")


def call_line(call: CallFact) -> str:
    if call.never_started:
        return f"Tool {call.label} was planned but never started: it did not run."
    shown = f" `{call.summary}`" if call.summary else ""
    if call.rewound_by and not call.external:
        return _rewound_line(call, shown)
    line = _line(call, shown)
    if call.rewound_by:
        line += (f" It was rewound in the conversation ({call.rewound_by}), but the rewind "
                 "did not undo its external effect: do not repeat it.")
    return line


def _line(call: CallFact, shown: str) -> str:
    if call.probe_result == "happened" and call.status == "succeeded":
        return f"Tool {call.label}{shown} {call.probe_said}: do not repeat."
    if call.probe_result == "not_happened" and call.status == "failed":
        return f"Tool {call.label}{shown} {call.probe_said}: it may be run again once."
    if call.status == "uncertain":
        check = outside_check(call)
        tail = check if check.startswith("it is safe") else f"{check} before doing anything"
        probed = (f"; {call.probe_said}"
                  if call.probe_result == "unknown" and call.probe_said else "")
        return (f"Tool {call.label} started but its outcome is unknown: "
                f"{_idempotency_phrase(call.idempotency)}{probed}; {tail}.")
    ran = f" ran `{call.summary}`" if call.summary else " ran"
    line = f"Tool {call.label}{ran}: {call.status}."
    if call.status == "failed" and call.error_summary:
        line += f" Error summary: {_sentence(call.error_summary)}"
    return line


def _short(commit: str | None) -> str:
    return commit[:12] if commit else "(none)"


def _workspace_lines(facts: NoteFacts) -> list[str]:
    lines: list[str] = []
    if facts.head_then != facts.head_now:
        lines.append(f"HEAD moved since the checkpoint: {_short(facts.head_then)} -> "
                     f"{_short(facts.head_now)}.")
    if facts.branch_then != facts.branch_now:
        lines.append(f"The branch changed since the checkpoint: {facts.branch_then or '(detached)'}"
                     f" -> {facts.branch_now or '(detached)'}.")
    if facts.changed:
        shown = [f"{change.path} by {owner_words(change.owner, change.confidence)}"
                 for change in facts.changed[:MAX_CHANGED]]
        more = len(facts.changed) - MAX_CHANGED
        lines.append("Changed since the checkpoint: " + "; ".join(shown)
                     + (f"; and {more} more" if more > 0 else "") + ".")
    for conflict in facts.conflicts:
        lines.append(f"Conflict: {conflict.path} no longer holds what {conflict.owner} wrote; "
                     "decide whether to keep the current content before continuing on it.")
    return lines


def render(facts: NoteFacts) -> str:
    """The recovery note, one sentence per line, in the order of DESIGN.md."""
    lines = ["System resumed from checkpoint."]
    if facts.checkpoint_id is None:
        lines.append("Checkpoint: none (no complete checkpoint; the workspace is as found).")
    else:
        lines.append(f"Checkpoint: {facts.checkpoint_id}")
    for label, reason in facts.skipped:
        lines.append(f"Skipped {label}: {_sentence(reason)}")
    lines.append(f"Last completed step: {facts.last_completed_step or 'none yet'}.")
    lines.extend(_workspace_lines(facts))
    if facts.earlier_finished:
        lines.append(f"{facts.earlier_finished} earlier call(s) finished before these "
                     "(see `gitguard explain`).")
    lines.extend(call_line(call) for call in facts.calls)
    if any(call.status == "uncertain" for call in facts.calls):
        lines.append("Settle an uncertain call with `gitguard reconcile CALL --status "
                     "succeeded|failed` once you have checked.")
    labels = [call.label for call in facts.do_not_repeat[-MAX_DO_NOT_REPEAT:]]
    hidden = len(facts.do_not_repeat) - len(labels)
    prefix = f"{hidden} earlier call(s) and " if hidden > 0 else ""
    lines.append(f"Do not repeat: {prefix}{', '.join(labels)}." if labels
                 else "Do not repeat: nothing.")
    lines.append("Plan the next step from these observations.")
    return "\n".join(lines) + "\n"
