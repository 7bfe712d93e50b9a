"""What resume looks at before it writes anything: which session, which checkpoint, and
how the workspace differs from that checkpoint's snapshot (and whose change each path is).

Read-only except `move_incomplete_aside`, which resume calls under the store lock.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2

from gitguard.errors import CorruptRecord, GitguardError
from gitguard.git.objects import entry_id_at
from gitguard.ledger import sessions
from gitguard.ledger.journal import LedgerState
from gitguard.models import (
    Checkpoint,
    CheckpointConflict,
    CheckpointIndexRow,
    FilePatchEntry,
    ToolLedgerEntry,
)
from gitguard.snapshot import checkpoints
from gitguard.snapshot.snapshotter import Snapshotter
from gitguard.storage import durable
from gitguard.storage.store import Store

INCOMPLETE_DIR = "incomplete"
INCOMPLETE_REASON = "is incomplete: it has no index row (a crash came between file and index)"


@dataclass(frozen=True)
class Skipped:
    """A checkpoint resume did not use: a corrupt indexed one, or an unindexed file."""

    checkpoint_id: str | None
    reason: str
    file: str | None = None     # store-relative, for a file no index row names

    @property
    def label(self) -> str:
        return f"checkpoint file {self.file}" if self.file else f"checkpoint {self.checkpoint_id}"

    def to_json(self) -> dict[str, str | None]:
        return {"checkpointId": self.checkpoint_id, "file": self.file, "reason": self.reason}


@dataclass(frozen=True)
class Choice:
    checkpoint: Checkpoint | None
    why: str
    skipped: tuple[Skipped, ...]
    horizon_seq: int | None      # ledgerSeq of the newest usable manual checkpoint, if any
    incomplete: tuple[Skipped, ...] = ()
    saved: Checkpoint | None = None   # that manual checkpoint: where the agent saved its state

    @property
    def all_skipped(self) -> tuple[Skipped, ...]:
        return self.incomplete + self.skipped

    def to_json(self) -> dict[str, Any]:
        found = self.checkpoint
        return {"checkpointId": found.checkpoint_id if found else None,
                "kind": found.kind if found else None, "why": self.why,
                "skipped": [s.to_json() for s in self.all_skipped]}


def target_session(store: Store, state: LedgerState, explicit: str | None) -> str | None:
    """--session, else GITGUARD_SESSION, else the open session, else the newest one with calls."""
    wanted = explicit or os.environ.get("GITGUARD_SESSION") or None
    if wanted:
        return wanted
    opened = sessions.open_session(store)
    if opened is not None:
        return opened.session_id
    if state.order:
        return state.entries[state.order[-1]].session_id
    rows = checkpoints.read_index(store).rows
    return rows[-1].session_id if rows else None


def usable(store: Store, snap: Snapshotter, row: CheckpointIndexRow
           ) -> tuple[Checkpoint | None, str | None]:
    """A checkpoint is complete when its file matches the index and its objects exist."""
    try:
        found = checkpoints.load(store, row)
    except CorruptRecord as exc:
        return None, exc.message.removeprefix(f"checkpoint {row.checkpoint_id} ")
    repo = snap.repo
    if not isinstance(repo.get(found.snapshot_commit), pygit2.Commit):
        return None, "has lost its snapshot commit"
    if any(oid not in repo for oid in found.message_refs):
        return None, "has lost a message blob"
    return found, None


def incomplete_files(store: Store, index: checkpoints.Index) -> list[Path]:
    """Checkpoint files no index row names: a crash came between the file and the index."""
    if not store.checkpoints_dir.is_dir():
        return []
    named = {row.file for row in index.rows}
    return sorted(p for p in store.checkpoints_dir.glob("ckpt_*.json") if p.name not in named)


def move_incomplete_aside(store: Store, index: checkpoints.Index) -> list[Path]:
    """Under the lock. The next checkpoint would reuse the id and overwrite the evidence."""
    moved: list[Path] = []
    aside = store.checkpoints_dir / INCOMPLETE_DIR
    for path in incomplete_files(store, index):
        durable.ensure_dir(aside)
        target = aside / path.name
        number = 0
        while target.exists():
            number += 1
            target = aside / f"{path.stem}.{number}.json"
        os.replace(path, target)
        durable.fsync_dir(aside)
        moved.append(target)
    if moved:
        durable.fsync_dir(store.checkpoints_dir)
    return moved


def _claims(path: Path) -> tuple[str | None, str | None, str | None]:
    """(checkpointId, sessionId, createdAt) an unverified file says it has, where readable."""
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None, None, None
    if not isinstance(value, dict):
        return None, None, None
    found = [value.get(key) for key in ("checkpointId", "sessionId", "createdAt")]
    cid, sid, created = (v if isinstance(v, str) else None for v in found)
    return cid, sid, created


def with_incomplete(store: Store, index: checkpoints.Index, choice: Choice, session_id: str
                    ) -> Choice:
    """Add the unindexed checkpoint files this session's crashes left since the chosen
    checkpoint was written; one a complete checkpoint came after no longer matters."""
    aside = store.checkpoints_dir / INCOMPLETE_DIR
    paths = incomplete_files(store, index) + (sorted(aside.glob("*.json")) if aside.is_dir()
                                              else [])
    since = choice.checkpoint.created_at if choice.checkpoint else ""
    found = []
    for path in paths:
        cid, sid, created = _claims(path)
        # Stamps are UTC ISO-8601 with milliseconds: string order is time order.
        if sid in (session_id, None) and (created is None or created >= since):
            found.append(Skipped(cid, INCOMPLETE_REASON,
                                 path.relative_to(store.root).as_posix()))
    return dataclasses.replace(choice, incomplete=tuple(found))


def choose(store: Store, snap: Snapshotter, index: checkpoints.Index, session_id: str,
           wanted: str | None = None) -> Choice:
    """The newest complete checkpoint of the session (resume checkpoints are markers, not
    restore points), or the one asked for; the corrupt ones passed over are reported."""
    skipped: list[Skipped] = []
    if wanted is not None:
        row = index.find(wanted)
        found, reason = usable(store, snap, row)
        if found is None:
            raise CorruptRecord(f"checkpoint {wanted} cannot be used: it {reason}",
                                "omit --checkpoint to use the newest complete one; "
                                "`gitguard verify` lists the damage")
        saved = _saved(store, snap, index, row.session_id, found)
        return Choice(found, "requested with --checkpoint", tuple(skipped),
                      saved.ledger_seq if saved else None, saved=saved)
    chosen: Checkpoint | None = None
    for row in reversed(index.rows):
        if row.session_id != session_id or row.kind == "resume":
            continue
        found, reason = usable(store, snap, row)
        if found is None:
            skipped.append(Skipped(row.checkpoint_id, reason or "is unusable"))
            continue
        chosen = found
        break
    if chosen is None:
        return Choice(None, f"no complete checkpoint in session {session_id}", tuple(skipped),
                      None)
    what = f"{chosen.kind} checkpoint" + (f" of {chosen.call_id}" if chosen.call_id else "")
    step = f", {chosen.step_id}" if chosen.step_id else ""
    why = (f"the newest complete checkpoint of session {session_id} ({what}{step})"
           + (f"; {len(skipped)} newer one(s) skipped" if skipped else ""))
    saved = _saved(store, snap, index, session_id, chosen)
    return Choice(chosen, why, tuple(skipped), saved.ledger_seq if saved else None, saved=saved)


def _saved(store: Store, snap: Snapshotter, index: checkpoints.Index, session_id: str,
           chosen: Checkpoint) -> Checkpoint | None:
    """The newest manual checkpoint at or before `chosen`: where the agent last saved its
    own state, so the calls after it are what the agent must be told."""
    if chosen.kind == "manual":
        return chosen
    seen = False
    for row in reversed(index.rows):
        seen = seen or row.checkpoint_id == chosen.checkpoint_id
        if seen and row.session_id == session_id and row.kind == "manual":
            found, _ = usable(store, snap, row)
            if found is not None:
                return found
    return None


@dataclass(frozen=True)
class ChangedPath:
    path: str
    change: str
    owner: str
    confidence: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "change": self.change, "owner": self.owner,
                "confidence": self.confidence}


@dataclass(frozen=True)
class Conflict:
    """The agent's last write of a path is gone: continuing blindly builds on the wrong file."""

    record: CheckpointConflict
    call_id: str


@dataclass(frozen=True)
class WorkspaceCheck:
    head_then: str | None
    head_now: str | None
    branch_then: str | None
    branch_now: str | None
    changed: tuple[ChangedPath, ...] = ()
    conflicts: tuple[Conflict, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"headThen": self.head_then, "headNow": self.head_now,
                "branchThen": self.branch_then, "branchNow": self.branch_now,
                "headMoved": self.head_then != self.head_now,
                "changed": [c.to_json() for c in self.changed]}


def _last_writes(entries: list[ToolLedgerEntry]
                 ) -> dict[str, tuple[ToolLedgerEntry, FilePatchEntry]]:
    latest: dict[str, tuple[ToolLedgerEntry, FilePatchEntry]] = {}
    for entry in entries:
        for patch in entry.file_patches:
            latest[patch.path] = (entry, patch)
    return latest


def check_workspace(snap: Snapshotter, state: LedgerState, index: checkpoints.Index,
                    session_id: str, checkpoint: Checkpoint | None, now_tree: str,
                    entries: list[ToolLedgerEntry] | None = None) -> WorkspaceCheck:
    """HEAD then and now, each path changed since the snapshot with its likely owner, and a
    conflict wherever the content the agent last wrote is no longer there. `entries`: the
    session's calls in ledger order when the caller has them already."""
    head, branch = snap.head_info()
    if checkpoint is None:
        return WorkspaceCheck(head, head, branch, branch)
    position = {row.checkpoint_id: i for i, row in enumerate(index.rows)}
    here = position.get(checkpoint.checkpoint_id, len(index.rows))
    if entries is None:
        entries = [state.entries[c] for c in state.order
                   if state.entries[c].session_id == session_id]
    writes = _last_writes(entries)
    # A call still open when the checkpoint was taken may have written anything since. A
    # window closed by a checkpoint `gitguard gc` has pruned closed long before this one.
    # One reconciled after resume closed its window still never recorded what it wrote
    # (`status` reads it the same way).
    def blind(e: ToolLedgerEntry) -> bool:
        end = position.get(e.post_checkpoint_id or "")
        return e.status in ("started", "uncertain") or (
            e.status in ("succeeded", "failed") and end is not None
            and index.rows[end].kind == "resume")

    in_flight = [e.call_id for e in entries if blind(e)
                 and (e.post_checkpoint_id is None
                      or position.get(e.post_checkpoint_id, -1) >= here)]
    suspect = in_flight[-1] if in_flight else None
    base = snap.tree_of(checkpoint.snapshot_commit)
    changed: list[ChangedPath] = []
    conflicts: dict[str, Conflict] = {}
    for change in snap.diff(base, now_tree):
        write = writes.get(change.path)
        if write is not None and write[1].after_hash == change.new_oid:
            declared = change.path in write[0].declared_writes
            owner, confidence = write[0].call_id, "exact" if declared else "window"
        elif suspect is not None:
            owner, confidence = suspect, "ambiguous"
        else:
            owner, confidence = "user", "window"
        changed.append(ChangedPath(change.path, change.status, owner, confidence))
        if write is not None and owner == "user" and change.old_oid == write[1].after_hash:
            conflicts[change.path] = _conflict(write[0], write[1], change.new_oid,
                                               change.old_oid, checkpoint.checkpoint_id)
    if suspect is None:
        for path, (entry, patch) in writes.items():
            later = position.get(entry.post_checkpoint_id or "", -1) > here
            current = entry_id_at(snap.repo, now_tree, path) if later else None
            if later and path not in conflicts and current != patch.after_hash:
                conflicts[path] = _conflict(entry, patch, current,
                                            entry_id_at(snap.repo, base, path),
                                            checkpoint.checkpoint_id)
    return WorkspaceCheck(checkpoint.head, head, checkpoint.branch, branch, tuple(changed),
                          tuple(conflicts[p] for p in sorted(conflicts)))


def _conflict(entry: ToolLedgerEntry, patch: FilePatchEntry, actual: str | None,
              base: str | None, checkpoint_id: str) -> Conflict:
    record = CheckpointConflict(path=patch.path, expected_hash=patch.after_hash,
                                actual_hash=actual, agent_patch_ref=patch.patch_ref,
                                checkpoint_id=checkpoint_id, base_hash=base)
    return Conflict(record, entry.call_id)


def require_session(session_id: str | None) -> str:
    if session_id is None:
        raise GitguardError("there is nothing to resume: no call and no checkpoint is recorded",
                            "start with `gitguard call begin` or `gitguard checkpoint`")
    return session_id

