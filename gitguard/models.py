"""The records gitguard persists, named as in the source chapter (camelCase on disk and in --json).

Every persisted record carries `schemaVersion`, so a reader can refuse a record
from a newer gitguard instead of misreading it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

SCHEMA_VERSION = 1

Status = Literal["planned", "approved", "started", "succeeded", "failed", "uncertain"]
Idempotency = Literal["idempotent", "conditional", "non_idempotent"]
ReplayPolicy = Literal["auto", "ask", "never"]
RiskLevel = Literal["low", "medium", "high", "critical"]
Resolution = Literal["pending", "keep_user", "apply_agent", "manual_merge"]
CheckpointKind = Literal["pre", "post", "manual", "pre_rollback", "resume"]
Confidence = Literal["exact", "window", "ambiguous", "unknown"]
ProbeResult = Literal["happened", "not_happened", "unknown"]
TraceType = Literal["checkpoint", "tool", "recovery", "rollback", "conflict", "gc", "session"]

TERMINAL: frozenset[str] = frozenset({"succeeded", "failed"})


class Record(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True,
        defer_build=True,
    )

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class Versioned(Record):
    schema_version: int = SCHEMA_VERSION


class ProbeCheck(Record):
    """One way a probe's run can read: its exit code is one of `exit`, every `stdout` and
    `stderr` regex is found, no `stdout_lacks` regex is. `{name}` in a regex is the field's
    value, matched literally."""

    exit: tuple[int, ...] = (0,)
    stdout: tuple[str, ...] = ()
    stdout_lacks: tuple[str, ...] = ()
    stderr: tuple[str, ...] = ()


class ProbeDefinition(Record):
    """A read-only command whose run says whether a call's effect happened (recovery/probes.py).
    `argv` is a template filled from the call's input (`{name}`); one element stays one
    argument. A run that matches neither list, or both, could not tell."""

    argv: tuple[str, ...]
    happened: tuple[ProbeCheck, ...] = (ProbeCheck(exit=(0,)),)
    not_happened: tuple[ProbeCheck, ...] = (ProbeCheck(exit=(1,)),)
    effect: str | None = None            # "publish {name}@{version}": "did publish ..."
    happened_because: str | None = None  # "the registry lists it"
    not_happened_because: str | None = None
    timeout: float | None = Field(default=None, gt=0)


class ToolDefinition(Versioned):
    name: str
    idempotency: Idempotency = "conditional"
    replay_policy: ReplayPolicy = "ask"
    risk_level: RiskLevel | None = None
    side_effects: tuple[str, ...] = ()
    # argv template filled from the call's input and result: ["gh", "issue", "close", "{number}"]
    compensation: tuple[str, ...] | None = None
    cannot_undo: str | None = None
    # The state a call of this tool acts on, part of its replay identity (replay_state.py):
    # ["file:package.json", "git:HEAD"].
    replay_key: tuple[str, ...] | None = None
    # A read-only command that tells whether an uncertain call's effect happened:
    # `probe = ["argv", ...]` (exit 0: it happened, 1: it did not) or a table.
    probe: ProbeDefinition | None = None

    @field_validator("probe", mode="before")
    @classmethod
    def _probe_argv(cls, value: Any) -> Any:
        return {"argv": value} if isinstance(value, list | tuple) else value


class FilePatchEntry(Versioned):
    path: str
    before_hash: str | None
    after_hash: str | None
    patch_ref: str
    tool_call_id: str
    created_at: str
    before_mode: int | None = None
    after_mode: int | None = None


class ToolLedgerEntry(Versioned):
    call_id: str
    step_id: str
    tool_name: str
    input_hash: str
    status: Status
    risk_level: RiskLevel
    idempotency: Idempotency
    replay_policy: ReplayPolicy
    side_effects: tuple[str, ...] = ()
    started_at: str | None = None
    finished_at: str | None = None
    result_ref: str | None = None
    # gitguard's additions to the chapter's entry
    session_id: str
    planned_at: str
    summary: str = ""
    classification_reason: str = ""
    input_ref: str | None = None
    declared_writes: tuple[str, ...] = ()
    file_patches: tuple[FilePatchEntry, ...] = ()
    pre_checkpoint_id: str | None = None
    post_checkpoint_id: str | None = None
    error_summary: str | None = None
    compensates: str | None = None
    replay_of: str | None = None
    note: str | None = None
    # The replay identity when the state the call acts on is part of it (a `git push`'s
    # commits, a tool's declared replayKey): hash of the input and that state. None: the
    # input hash alone (ledger.run_key).
    replay_key: str | None = None
    # What the call's built-in probe needs, read when it began (a `git push`'s remote, ref
    # and the commit it sends; the name and version `npm publish` publishes): redacted.
    probe_facts: dict[str, str] | None = None
    # Set when a probe settled the call (recovery/probes.py); the evidence is the artifact.
    probed_at: str | None = None
    probe_result: ProbeResult | None = None
    probe_ref: str | None = None
    # Set when the agent's own undo dropped the turn the call ran in (Claude Code's
    # /rewind, a conversation fork; integrations/rewind.py): when gitguard saw it, and what
    # did it ("claude_code.rewind: restored to message M"). Its file changes are no longer
    # the agent's work; an external effect still happened.
    rewound_at: str | None = None
    rewound_by: str | None = None
    # "restored": every file it changed holds again what it held before its turn;
    # "kept": not (a conversation-only rewind, or edits since); None: it changed no file.
    rewound_files: Literal["restored", "kept"] | None = None
    # The subagent that made the call (Claude Code's and Codex's `agent_id`/`agent_type`);
    # None: the session's main loop.
    agent_id: str | None = None
    agent_type: str | None = None


class RollbackFiles(Record):
    type: Literal["rollback_files"] = "rollback_files"
    checkpoint_id: str


class RestoreSession(Record):
    type: Literal["restore_session"] = "restore_session"
    checkpoint_id: str


class CompensateExternalAction(Record):
    type: Literal["compensate_external_action"] = "compensate_external_action"
    ledger_entry_id: str


RecoveryAction = Annotated[
    RollbackFiles | RestoreSession | CompensateExternalAction, Field(discriminator="type")
]


class LedgerEvent(Versioned):
    """One line of ledger.jsonl: a new state of a call, or a recovery action taken."""

    seq: int
    recorded_at: str
    entry: ToolLedgerEntry | None = None
    action: RecoveryAction | None = None
    session_id: str | None = None
    detail: dict[str, Any] | None = None


class Checkpoint(Versioned):
    checkpoint_id: str
    session_id: str
    kind: CheckpointKind
    step_id: str | None = None
    call_id: str | None = None
    created_at: str
    snapshot_commit: str
    head: str | None = None
    branch: str | None = None
    dirty: tuple[str, ...] = ()
    dirty_count: int = 0
    skipped: tuple[str, ...] = ()
    ledger_seq: int = 0
    run_state: dict[str, Any] | None = None
    message_refs: tuple[str, ...] = ()
    transcript_path: str | None = None


class CheckpointIndexRow(Versioned):
    checkpoint_id: str
    session_id: str
    kind: CheckpointKind
    step_id: str | None = None
    file: str
    sha256: str
    created_at: str
    snapshot_commit: str


class ConflictChange(Record):
    """One change to a conflicted path after the checkpoint, in order: who made it and
    from what to what. `agents`: a change exactly one agent call of the rollback's made
    (exact or window): --merge takes its hunks out; every other change (the user's, one
    of ambiguous or unknown origin, another session's) is kept as the user's."""

    owner: str                     # "user" or a callId
    confidence: Confidence
    before_hash: str | None
    after_hash: str | None
    before_mode: int | None = None
    after_mode: int | None = None
    agents: bool = False


class CheckpointConflict(Versioned):
    path: str
    expected_hash: str | None
    actual_hash: str | None
    agent_patch_ref: str
    resolution: Resolution = "pending"
    checkpoint_id: str | None = None
    base_hash: str | None = None
    created_at: str | None = None
    # what a three-way view and a resolution need besides the hashes
    call_id: str | None = None
    reason: str | None = None
    base_mode: int | None = None
    expected_mode: int | None = None
    resolved_at: str | None = None
    # Every change after the checkpoint, oldest first (empty in a record from before it
    # was kept: then the agent's change is taken as base -> expected, one piece).
    changes: tuple[ConflictChange, ...] = ()
    # A file an agent call moved (rollback/moves.py): `path` is where it goes back (the
    # move's source), `moved_to` where it is now, and `moved_to_hash`/`moved_to_mode`
    # what that destination held before the move (none: it was not there). The changes
    # run across both paths: the source's up to the move, the destination's after it.
    moved_to: str | None = None
    moved_to_hash: str | None = None
    moved_to_mode: int | None = None


class Subagent(Record):
    """A subagent a session ran (SubagentStart .. SubagentStop): its calls carry its id."""

    agent_id: str
    agent_type: str | None = None
    started_at: str
    ended_at: str | None = None
    transcript_path: str | None = None      # where its tool results are (SubagentStop)


class Move(Record):
    """The session's working directory changed into this worktree (Claude Code's
    CwdChanged after `cd`): from where, to where, when."""

    from_dir: str | None = None
    to_dir: str
    at: str


class Session(Versioned):
    session_id: str
    started_at: str
    ended_at: str | None = None
    agent: str | None = None
    # The session this one was forked from (Claude Code's --fork-session): the replay guard
    # and the recovery note see the parent's calls as this session's own history.
    parent_id: str | None = None
    subagents: tuple[Subagent, ...] = ()
    moves: tuple[Move, ...] = ()            # the session arrived here by `cd` (newest last)

    def running_subagents(self) -> frozenset[str]:
        return frozenset(a.agent_id for a in self.subagents if a.ended_at is None)


class TraceEvent(Versioned):
    at: str
    type: TraceType
    name: str
    session_id: str | None = None
    duration_ms: float | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class Attribution(Versioned):
    path: str
    owner: str  # "user" or a callId
    confidence: Confidence
    at: str
