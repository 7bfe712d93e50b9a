"""`restore_session`: hand the runtime the run state and messages stored at a checkpoint.

No file is touched. The ledger records the branch point, so a reader later knows
that the calls recorded after that checkpoint belong to a line of work the
runtime stepped back from (they are listed, not undone: rollback-files does that).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from gitguard.ledger import journal
from gitguard.models import RestoreSession
from gitguard.snapshot import checkpoints
from gitguard.snapshot import messages as message_store
from gitguard.storage import trace_log

if TYPE_CHECKING:
    from gitguard.guard_context import GuardContext


def restore_session(g: GuardContext, checkpoint_id: str) -> dict[str, Any]:
    started_clock = time.perf_counter()
    with g.store.writing():
        index = checkpoints.read_index(g.store)
        checkpoint = checkpoints.load(g.store, index.find(checkpoint_id))
        messages = message_store.read_messages(g.snap, checkpoint)
        state = journal.read(g.store)
        position = {row.checkpoint_id: i for i, row in enumerate(index.rows)}
        here = position[checkpoint_id]
        after = [e for e in state.in_order() if e.session_id == checkpoint.session_id
                 and position.get(e.pre_checkpoint_id or "", -1) >= here]
        branch_point = {"checkpointId": checkpoint_id, "ledgerSeq": checkpoint.ledger_seq,
                        "snapshotCommit": checkpoint.snapshot_commit,
                        "stepId": checkpoint.step_id}
        later = [{"callId": e.call_id, "toolName": e.tool_name, "status": e.status,
                  "idempotency": e.idempotency, "replayPolicy": e.replay_policy,
                  "summary": e.summary} for e in after]
        event = journal.append_action(
            g.store, state, RestoreSession(checkpoint_id=checkpoint_id), checkpoint.session_id,
            {"branchPoint": branch_point, "callsAfter": [c["callId"] for c in later]})
        trace_log.emit(g.store, "recovery", "recovery.restore_session",
                       session_id=checkpoint.session_id, checkpointId=checkpoint_id,
                       messages=len(messages), callsAfter=len(later), ledgerSeq=event.seq,
                       duration_ms=(time.perf_counter() - started_clock) * 1000)
    return {
        "checkpointId": checkpoint_id, "sessionId": checkpoint.session_id,
        "stepId": checkpoint.step_id, "createdAt": checkpoint.created_at,
        "runState": checkpoint.run_state, "messages": messages,
        "transcriptPath": checkpoint.transcript_path, "head": checkpoint.head,
        "branch": checkpoint.branch, "branchPoint": {**branch_point, "recordedSeq": event.seq},
        "callsAfter": later,
        "note": ("The working tree was not touched; use rollback-files --to "
                 f"{checkpoint_id} to undo the files the calls after it changed."),
    }
