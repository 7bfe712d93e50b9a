"""Resume after a crash, settle an uncertain call, explain what may run again (DESIGN.md "Resume").

Resume is idempotent and crash-safe: everything it writes happens under the store lock,
in an order where a crash at any point leaves a store the next resume finishes:
a `resume` checkpoint (the end of the interrupted calls' window; reused when nothing
was appended after it), then one ledger append that settles every open call of the
session (`started` -> `uncertain`; `planned` -> `failed`, the tool never ran), then
trace events. A second resume finds nothing open and gives the same answer.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gitguard import clock, faults
from gitguard.calls import timeline
from gitguard.errors import GitguardError, IllegalTransition, UnknownId
from gitguard.git.objects import TreeResult
from gitguard.integrations import rewind
from gitguard.ledger import journal, sessions
from gitguard.ledger.replay import Verdict, blocks, external, never_ran, verdict
from gitguard.ledger.steps import NEVER_STARTED, OPEN_STATUSES, last_completed
from gitguard.models import ToolLedgerEntry
from gitguard.recovery import note as recovery_note
from gitguard.recovery import probes
from gitguard.recovery.scan import (
    Choice,
    WorkspaceCheck,
    check_workspace,
    choose,
    move_incomplete_aside,
    require_session,
    target_session,
    usable,
    with_incomplete,
)
from gitguard.rollback import conflicts as conflict_store
from gitguard.snapshot import checkpoints
from gitguard.snapshot import messages as message_store
from gitguard.storage import trace_log

if TYPE_CHECKING:
    from gitguard.guard_context import GuardContext

INTERRUPTED = "interrupted: found started after a crash; its outcome is unknown"


def never_started(entry: ToolLedgerEntry) -> bool:
    """The tool did not run: planned and never started (a crash), or announced and then
    denied before it ran (replay.never_ran)."""
    return entry.status == "failed" and (entry.started_at is None or never_ran(entry))


@dataclass(frozen=True)
class CallView:
    entry: ToolLedgerEntry
    verdict: Verdict
    probe: probes.Outcome | None = None      # this resume's probe of it, if it ran one

    @classmethod
    def of(cls, entry: ToolLedgerEntry, probe: probes.Outcome | None = None) -> CallView:
        return cls(entry, verdict(entry), probe)

    def fact(self) -> recovery_note.CallFact:
        e = self.entry
        # A probe that could not tell left the call uncertain with its why in the note.
        return recovery_note.CallFact(
            call_id=e.call_id, tool=e.tool_name, status=e.status, summary=e.summary,
            idempotency=e.idempotency, side_effects=e.side_effects,
            error_summary=e.error_summary, never_started=never_started(e),
            probe_result=e.probe_result, probe_said=e.note, rewound_by=e.rewound_by,
            rewound_files=e.rewound_files, external=external(e))

    def to_json(self) -> dict[str, Any]:
        e = self.entry
        return {"callId": e.call_id, "toolName": e.tool_name, "stepId": e.step_id,
                "status": e.status, "summary": e.summary, "errorSummary": e.error_summary,
                "idempotency": e.idempotency, "replayPolicy": self.verdict.policy,
                "classificationReason": e.classification_reason,
                "neverStarted": never_started(e), "replayable": self.verdict.replayable,
                "why": self.verdict.why, "probedAt": e.probed_at, "probeResult": e.probe_result,
                "probeRef": e.probe_ref, "rewoundAt": e.rewound_at, "rewoundBy": e.rewound_by,
                "rewoundFiles": e.rewound_files,
                "probe": self.probe.to_json() if self.probe is not None else None}


@dataclass(frozen=True)
class ResumeResult:
    session_id: str
    choice: Choice
    workspace: WorkspaceCheck
    last_completed_step: str | None
    calls: tuple[CallView, ...]   # since the agent last saved its state (newest ones), uncertain
    earlier_calls: int             # finished calls since then left out of `calls`
    uncertain: tuple[str, ...]
    do_not_repeat: tuple[CallView, ...]
    run_state: dict[str, Any] | None
    messages: list[Any]
    note: str
    probes: tuple[probes.Outcome, ...] = ()

    @property
    def checkpoint_id(self) -> str | None:
        return self.choice.checkpoint.checkpoint_id if self.choice.checkpoint else None

    def to_json(self) -> dict[str, Any]:
        found = self.choice.checkpoint
        return {
            "sessionId": self.session_id, "checkpointId": self.checkpoint_id,
            "checkpointKind": found.kind if found else None,
            "checkpointStep": found.step_id if found else None, "why": self.choice.why,
            "skipped": [s.to_json() for s in self.choice.all_skipped],
            "lastCompletedStep": self.last_completed_step,
            "runState": self.run_state, "messages": self.messages,
            "transcriptPath": found.transcript_path if found else None,
            "workspace": self.workspace.to_json(),
            "conflicts": [c.record.to_json() for c in self.workspace.conflicts],
            "calls": [c.to_json() for c in self.calls], "earlierCalls": self.earlier_calls,
            "uncertain": list(self.uncertain),
            "neverStarted": [c.entry.call_id for c in self.calls if never_started(c.entry)],
            "doNotRepeat": [c.entry.call_id for c in self.do_not_repeat],
            "recoveryNote": self.note,
            "probes": [o.to_json() for o in self.probes],
        }


def _session_entries(state: journal.LedgerState, session_id: str) -> list[ToolLedgerEntry]:
    return [e for e in map(state.entries.__getitem__, state.order) if e.session_id == session_id]


def resume(g: GuardContext, *, checkpoint_id: str | None = None,
           session_id: str | None = None) -> ResumeResult:
    started_clock = time.perf_counter()
    rewind.detect_known(g, session_id)    # the agent's own rewinds, before anything is told
    with g.store.writing():
        # The workspace scan waits on `git status` (about 0.4 s at 100k files) while a
        # fresh process's ledger read is all Python (decode, validate 10,000 entries): the
        # read runs in a thread meanwhile. The scan writes only the snapshot's own caches
        # (as `gitguard status` does), so scanning before a refusal below changes nothing.
        reading = _Reading(g)
        try:
            tree = g.snap.write_tree()
        finally:
            state = reading.result()
        index = checkpoints.read_index(g.store)
        sid = (index.find(checkpoint_id).session_id if checkpoint_id
               else require_session(target_session(g.store, state, session_id)))
        if not _known(g, state, index, sid):
            raise UnknownId(f"no session {sid!r}", "list sessions with `gitguard session list`")
        choice = choose(g.store, g.snap, index, sid, checkpoint_id)
        # Only once nothing can refuse: a failed resume leaves the store as it found it.
        moved = move_incomplete_aside(g.store, index)
        choice = with_incomplete(g.store, index, choice, sid)
        trace_log.emit(g.store, "recovery", "recovery.checkpoint", session_id=sid,
                       **choice.to_json(), movedAside=[p.name for p in moved])
        # The session's calls, gathered once (10,000 after a long run) for every step below.
        entries = _session_entries(state, sid)
        opened = [e for e in entries if e.status in OPEN_STATUSES]
        if opened:
            _settle(g, state, index, sid, tree, opened)
            now = state.entries
            entries = [now[e.call_id] for e in entries]
        plans = probes.plan_all(g, [e for e in entries if e.status == "uncertain"])
        if not any(isinstance(p, probes.Probe) for p in plans.values()):
            return _finish(g, state, index, sid, choice, tree, entries,
                           probes.record(g, state, plans, {}), started_clock)
    # The probes run without the lock (each up to its timeout): the hooks and commands
    # of every session go on meanwhile. Their answers are recorded under it again.
    runs = probes.run_all(g, plans)
    with g.store.writing():
        state = journal.read(g.store)
        index = checkpoints.read_index(g.store)
        outcomes = probes.record(g, state, plans, runs)
        for outcome in outcomes.values():
            if outcome.settled is not None and outcome.probe is not None \
                    and outcome.settled.probe_ref == outcome.evidence_ref:
                _reword_conflicts(g, outcome.call_id, "uncertain", outcome.settled.status)
        return _finish(g, state, index, sid, choice, tree, _session_entries(state, sid),
                       outcomes, started_clock)


def _finish(g: GuardContext, state: journal.LedgerState, index: checkpoints.Index, sid: str,
            choice: Choice, tree: TreeResult, entries: list[ToolLedgerEntry],
            outcomes: dict[str, probes.Outcome], started_clock: float) -> ResumeResult:
    """Check the workspace and tell the result. Under the store lock."""
    check = check_workspace(g.snap, state, index, sid, choice.checkpoint, tree.tree, entries)
    trace_log.emit(g.store, "recovery", "recovery.verify", session_id=sid,
                   headMoved=check.head_then != check.head_now, changed=len(check.changed),
                   conflicts=[c.record.path for c in check.conflicts])
    result = _result(g, state, index, sid, choice, check, entries, outcomes)
    faults.point("resume.before_done")
    trace_log.emit(g.store, "recovery", "recovery.resume", session_id=sid,
                   duration_ms=(time.perf_counter() - started_clock) * 1000,
                   checkpointId=result.checkpoint_id, uncertain=list(result.uncertain),
                   doNotRepeat=len(result.do_not_repeat),
                   conflicts=len(check.conflicts))
    return result


class _Reading:
    """`ledger.read` in a thread; `result()` joins it and returns or raises what it did."""

    def __init__(self, g: GuardContext) -> None:
        self._store = g.store
        self._state: journal.LedgerState | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="gitguard-ledger-read")
        self._thread.start()

    def _run(self) -> None:
        try:
            self._state = journal.read(self._store)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller by result()
            self._error = exc

    def result(self) -> journal.LedgerState:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._state is not None
        return self._state


def _known(g: GuardContext, state: journal.LedgerState, index: checkpoints.Index, sid: str) -> bool:
    return (any(e.session_id == sid for e in state.entries.values())
            or any(r.session_id == sid for r in index.rows)
            or any(s.session_id == sid for s in sessions.read(g.store)))


def _settle(g: GuardContext, state: journal.LedgerState, index: checkpoints.Index, session_id: str,
            tree: TreeResult, opened: list[ToolLedgerEntry]) -> None:
    """Close every open call of a crashed run in one append (under the lock)."""
    faults.point("resume.before_checkpoint")
    marker = _resume_checkpoint(g, state, index, session_id, tree)
    faults.point("resume.after_checkpoint")
    now = clock.stamp()
    # Never-started calls first, so the fault point of the append is `ledger.*_uncertain`
    # whenever something is marked uncertain.
    settled = [e.model_copy(update={"status": "failed", "finished_at": now,
                                    "error_summary": NEVER_STARTED, "note": NEVER_STARTED})
               for e in opened if e.status != "started"]
    settled += [e.model_copy(update={"status": "uncertain", "post_checkpoint_id": marker,
                                     "note": INTERRUPTED})
                for e in opened if e.status == "started"]
    journal.append_entries(g.store, state, settled)
    faults.point("resume.after_mark")
    trace_log.emit(g.store, "recovery", "recovery.mark", session_id=session_id,
                   checkpointId=marker,
                   uncertain=[e.call_id for e in settled if e.status == "uncertain"],
                   neverStarted=[e.call_id for e in settled if e.status == "failed"])


def _resume_checkpoint(g: GuardContext, state: journal.LedgerState, index: checkpoints.Index,
                       session_id: str, tree: TreeResult) -> str:
    """The snapshot that closes the interrupted calls' window; a crashed resume's is reused."""
    latest = index.latest(session_id)
    if latest is not None and latest.kind == "resume":
        found, _ = usable(g.store, g.snap, latest)
        if found is not None and found.ledger_seq == state.last_seq:
            return found.checkpoint_id
    made = checkpoints.write(g.store, g.snap, index, session_id=session_id, kind="resume",
                             tree=tree, ledger_seq=state.last_seq)
    trace_log.emit(g.store, "checkpoint", "checkpoint.resume", session_id=session_id,
                   checkpointId=made.checkpoint_id, files=len(tree.changed))
    return made.checkpoint_id


def _result(g: GuardContext, state: journal.LedgerState, index: checkpoints.Index,
            session_id: str, choice: Choice, check: WorkspaceCheck,
            entries: list[ToolLedgerEntry], outcomes: dict[str, probes.Outcome] | None = None
            ) -> ResumeResult:
    """`entries`: the session's calls in ledger order, as `_session_entries` gives them."""
    first_seq = state.first_seq
    last_step, horizon = last_completed(entries, first_seq, choice.saved,
                                        _step_posts(g, index, session_id, entries))
    # One pass over the session's calls (10,000 after a long run) for what every call adds.
    calls: list[ToolLedgerEntry] = []
    uncertain: list[str] = []
    blocking: list[ToolLedgerEntry] = []
    before = 0          # finished calls before the last completed step: not in the note
    for e in entries:
        status = e.status
        if status == "uncertain":
            calls.append(e)
            uncertain.append(e.call_id)
        elif status not in OPEN_STATUSES:
            # A call denied before it ran is told whenever it was: the agent may retry it;
            # so is one the agent's own rewind dropped: what it left behind is news.
            if horizon is None or first_seq.get(e.call_id, 0) > horizon or never_started(e) \
                    or (e.rewound_at is not None and bool(e.side_effects)):
                calls.append(e)
            else:
                before += 1
        if blocks(e):
            blocking.append(e)
    found = choice.checkpoint
    outcomes = outcomes or {}
    do_not_repeat = tuple(CallView.of(e) for e in blocking)
    shown = tuple(CallView.of(e, outcomes.get(e.call_id)) for e in _cap_finished(calls))
    facts = recovery_note.NoteFacts(
        checkpoint_id=found.checkpoint_id if found else None, last_completed_step=last_step,
        calls=[c.fact() for c in shown], do_not_repeat=[c.fact() for c in do_not_repeat],
        changed=[recovery_note.PathFact(c.path, c.owner, c.confidence) for c in check.changed],
        conflicts=[recovery_note.PathFact(c.record.path, c.call_id, "exact")
                   for c in check.conflicts],
        head_then=check.head_then, head_now=check.head_now, branch_then=check.branch_then,
        branch_now=check.branch_now,
        skipped=[(s.label, f"it {s.reason}") for s in choice.all_skipped],
        earlier_finished=before + len(calls) - len(shown))
    # The JSON carries what the note tells, so its size does not grow with the ledger.
    return ResumeResult(
        session_id=session_id, choice=choice, workspace=check, last_completed_step=last_step,
        calls=shown, earlier_calls=before + len(calls) - len(shown),
        uncertain=tuple(uncertain),
        do_not_repeat=do_not_repeat, run_state=found.run_state if found else None,
        messages=message_store.read_messages(g.snap, found) if found else [],
        note=recovery_note.render(facts), probes=tuple(outcomes.values()))


def _step_posts(g: GuardContext, index: checkpoints.Index, session_id: str,
                entries: list[ToolLedgerEntry]) -> list[tuple[str, int]]:
    """(step, ledgerSeq) of the session's post checkpoints of steps that made no call
    (`checkpoint --kind post --step S`): such a step completed all the same. A step with
    calls completes by its calls; its post checkpoints are its calls' own (thousands on a
    long run), so only the few of call-less steps are loaded."""
    with_calls = {e.step_id for e in entries}
    found: list[tuple[str, int]] = []
    for row in index.rows:
        if (row.session_id != session_id or row.kind != "post" or not row.step_id
                or row.step_id in with_calls):
            continue
        checkpoint, _reason = usable(g.store, g.snap, row)
        if checkpoint is not None:
            found.append((row.step_id, checkpoint.ledger_seq))
    return found


def _cap_finished(calls: list[ToolLedgerEntry]) -> list[ToolLedgerEntry]:
    """Every uncertain call, and only the newest finished ones: the note stays readable."""
    finished = [e for e in calls if e.status != "uncertain"]
    keep = {e.call_id for e in finished[-recovery_note.MAX_FINISHED:]}
    return [e for e in calls if e.status == "uncertain" or e.call_id in keep]


def _uncertain(state: journal.LedgerState, call_id: str) -> ToolLedgerEntry:
    entry = state.get(call_id)
    if entry.status == "started":
        raise IllegalTransition(f"call {call_id} is still started; it may be running",
                                "if its process is gone, run `gitguard resume` first")
    if entry.status != "uncertain":
        raise IllegalTransition(
            f"call {call_id} is {entry.status}, not uncertain: there is nothing to reconcile",
            "only a call a crash left uncertain can be settled; see `gitguard explain`")
    return entry


def reconcile(g: GuardContext, call_id: str, status: str, note: str | None = None
              ) -> ToolLedgerEntry:
    """Settle an uncertain call once someone checked the outside world."""
    if status not in ("succeeded", "failed"):
        raise GitguardError(f"an uncertain call settles as succeeded or failed, not {status!r}",
                            "pass --status succeeded or --status failed")
    with g.store.writing():
        state = journal.read(g.store)
        entry = _uncertain(state, call_id)
        said = note or f"reconciled as {status} after checking outside"
        settled = probes.settle_fields(entry, status, said)
        journal.append_entries(g.store, state, [settled])
        _reword_conflicts(g, call_id, entry.status, status)
        trace_log.emit(g.store, "recovery", "recovery.reconcile", session_id=entry.session_id,
                       callId=call_id, status=status, note=said)
    return settled


def reconcile_by_probe(g: GuardContext, call_id: str) -> probes.Outcome:
    """Run an uncertain call's probe now (`reconcile --probe`) and settle it when the probe
    can tell; GitguardError when the call has no probe. The probe runs without the lock."""
    with g.store.writing():
        entry = _uncertain(journal.read(g.store), call_id)
        planned = probes.plan_all(g, [entry])
    if not isinstance(planned[call_id], probes.Probe):
        raise GitguardError(
            f"{entry.tool_name} ({call_id}) has no probe: {planned[call_id]}",
            f"declare probe = [...] under [tools.{entry.tool_name}] (or a "
            "[commands.\"GLOB\"] table) in .gitguard.toml, or check by hand and run "
            f"`gitguard reconcile {call_id} --status succeeded|failed`")
    runs = probes.run_all(g, planned)
    with g.store.writing():
        outcome = probes.record(g, journal.read(g.store), planned, runs)[call_id]
        if outcome.settled is not None and outcome.settled.probe_ref == outcome.evidence_ref:
            _reword_conflicts(g, call_id, "uncertain", outcome.settled.status)
    return outcome


def _reword_conflicts(g: GuardContext, call_id: str, was: str, status: str) -> None:
    """Pending conflicts that blame this call for never finishing say how it was settled
    (they stay conflicts: what it wrote was never recorded)."""
    old = timeline.interrupted_reason(call_id, was)
    new = timeline.interrupted_reason(call_id, status)
    stale = [c.model_copy(update={"reason": new}) for c in conflict_store.read(g.store)
             if c.resolution == "pending" and c.call_id == call_id and c.reason == old]
    conflict_store.record(g.store, stale)


@dataclass(frozen=True)
class Explanation:
    session_id: str | None
    calls: tuple[CallView, ...]
    choice: Choice | None

    def to_json(self) -> dict[str, Any]:
        ran = [c for c in self.calls
               if c.entry.status not in ("planned", "approved") and not never_started(c.entry)]
        return {
            "sessionId": self.session_id,
            "calls": [c.to_json() for c in self.calls],
            "ran": [c.entry.call_id for c in ran],
            "doNotRepeat": [c.entry.call_id for c in self.calls if not c.verdict.replayable],
            "wouldMarkUncertain": [c.entry.call_id for c in self.calls
                                   if c.entry.status == "started"],
            "checkpoint": self.choice.to_json() if self.choice else None,
        }


def explain(g: GuardContext, session_id: str | None = None) -> Explanation:
    """Read-only: the calls of a session, which may run again and why, and what resume would use."""
    if not g.store.exists():
        return Explanation(None, (), None)
    rewind.detect_known(g, session_id)
    state = journal.read(g.store)
    index = checkpoints.read_index(g.store)
    sid = target_session(g.store, state, session_id)
    if sid is None:
        return Explanation(None, (), None)
    calls = tuple(CallView.of(e) for e in _session_entries(state, sid))
    choice = choose(g.store, g.snap, index, sid)
    return Explanation(sid, calls, with_incomplete(g.store, index, choice, sid))
