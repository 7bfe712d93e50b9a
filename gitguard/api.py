"""`gitguard.Guard`: the Python API that the CLI wraps and agent runtimes call directly.

    guard = Guard.open(".")
    with guard.tool_call("write_file", {"path": "a.txt"}, writes=["a.txt"]) as call:
        Path("a.txt").write_text("hello")
        call.result = "wrote 5 bytes"
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitguard import jsontext
from gitguard.errors import GitguardError
from gitguard.git.objects import EMPTY_TREE, entry_id_at
from gitguard.ledger import journal as ledger
from gitguard.ledger import sessions
from gitguard.models import (
    Checkpoint,
    CheckpointIndexRow,
    CheckpointKind,
    Idempotency,
    ReplayPolicy,
    RiskLevel,
    Session,
    ToolLedgerEntry,
)
from gitguard.progress import Progress, quiet
from gitguard.settings import Settings, load

# calls.lifecycle, ipc.api_client, attribution and attribution_log are imported where they
# are used: `gitguard resume` in a fresh process (no daemon, after a crash) needs none of
# them; recovery.resume (with recovery.scan and recovery.note, ~15-25 ms of CPU)
# likewise: `call begin`, `call end` and the hooks of a fresh process need none of it.
from gitguard.snapshot import checkpoints
from gitguard.snapshot import messages as message_store
from gitguard.snapshot.snapshotter import Snapshotter
from gitguard.storage import trace_log
from gitguard.storage.store import Store
from gitguard.workspace import Workspace, discover

if TYPE_CHECKING:
    from gitguard.recovery import probes
    from gitguard.recovery import resume as recovery


@dataclass
class CallHandle:
    entry: ToolLedgerEntry
    result: str | bytes | None = None

    @property
    def call_id(self) -> str:
        return self.entry.call_id


@dataclass(frozen=True)
class DirtyPath:
    path: str
    owner: str
    confidence: str
    change: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "owner": self.owner, "confidence": self.confidence,
                "change": self.change}


@dataclass(frozen=True)
class Status:
    workspace: str
    git: bool
    head: str | None
    branch: str | None
    session: str | None
    dirty: list[DirtyPath] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    calls: int = 0
    checkpoints: int = 0
    store_bytes: int = 0
    daemon: dict[str, Any] = field(default_factory=dict)
    unknown_tools: list[str] = field(default_factory=list)   # seen, given the safe default

    def to_json(self) -> dict[str, Any]:
        return {"workspace": self.workspace, "git": self.git, "head": self.head,
                "branch": self.branch, "session": self.session,
                "dirty": [d.to_json() for d in self.dirty], "skipped": self.skipped,
                "calls": self.calls, "checkpoints": self.checkpoints,
                "storeBytes": self.store_bytes, "daemon": self.daemon,
                "unknownTools": self.unknown_tools}


class Guard:
    # Without a daemon nobody else packs: `call end` keeps loose objects under git's
    # auto-gc bar itself (DaemonGuard packs in the background instead).
    packs_in_background = False

    def __init__(self, ws: Workspace, settings: Settings | None = None) -> None:
        self.ws = ws
        self.settings = settings or load(ws.root)
        self.store = Store(ws, self.settings)
        self.snap = Snapshotter(self.store, self.settings)

    @classmethod
    def open(cls, path: str | Path = ".") -> Guard:
        return cls(discover(Path(path)))

    @classmethod
    def init(cls, path: str | Path = ".") -> Guard:
        guard = cls.open(path)
        with guard.store.writing():
            pass
        return guard

    def close(self) -> None:
        self.snap.__dict__.pop("repo", None)

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # sessions -------------------------------------------------------------------------
    def start_session(self, session_id: str | None = None, agent: str | None = None,
                      parent_id: str | None = None) -> Session:
        """Start, reopen (an ended id comes back: a resumed agent) or link (`parent_id`:
        a fork) a session."""
        with self.store.writing():
            session = sessions.start(self.store, session_id, agent, parent_id)
            trace_log.emit(self.store, "session", "session.start", session_id=session.session_id,
                           parentId=session.parent_id)
            return session

    def end_session(self, session_id: str | None = None) -> Session:
        with self.store.writing():
            target = session_id or _open_id(self.store)
            session = sessions.end(self.store, target)
            trace_log.emit(self.store, "session", "session.end", session_id=session.session_id)
            return session

    def sessions(self) -> list[Session]:
        return sessions.read(self.store)

    # calls ----------------------------------------------------------------------------
    def begin_call(self, tool: str, tool_input: Mapping[str, Any], *,
                   step_id: str | None = None, call_id: str | None = None,
                   writes: Sequence[str] = (), idempotency: Idempotency | None = None,
                   replay: ReplayPolicy | None = None, risk: RiskLevel | None = None,
                   side_effects: Sequence[str] = (), session_id: str | None = None,
                   confirm: bool = False, force_replay: bool = False,
                   agent_id: str | None = None, agent_type: str | None = None
                   ) -> ToolLedgerEntry:
        from gitguard.calls import lifecycle as calls
        from gitguard.ipc import api_client

        through_daemon = api_client.begin_call(self, tool, tool_input, {
            "step_id": step_id, "call_id": call_id, "writes": writes, "idempotency": idempotency,
            "replay": replay, "risk": risk, "side_effects": side_effects,
            "session_id": session_id, "confirm": confirm, "force_replay": force_replay,
            "agent_id": agent_id, "agent_type": agent_type})
        if through_daemon is not None:
            return through_daemon
        return calls.begin(self, tool, tool_input, step_id=step_id, call_id=call_id,
                           writes=writes, idempotency=idempotency, replay=replay, risk=risk,
                           side_effects=side_effects, session_id=session_id, confirm=confirm,
                           force_replay=force_replay, agent_id=agent_id, agent_type=agent_type)

    def end_call(self, call_id: str, status: str = "succeeded",
                 result: str | bytes | None = None) -> ToolLedgerEntry:
        from gitguard.calls import lifecycle as calls
        from gitguard.ipc import api_client

        through_daemon = api_client.end_call(self, call_id, status, result)
        if through_daemon is not None:
            return through_daemon
        return calls.end(self, call_id, status, result)

    @contextmanager
    def tool_call(self, tool: str, tool_input: Mapping[str, Any], **options: Any
                  ) -> Iterator[CallHandle]:
        """Ledger a call around a block: failed (with the exception) if the block raises."""
        handle = CallHandle(self.begin_call(tool, tool_input, **options))
        try:
            yield handle
        except BaseException as exc:
            self.end_call(handle.call_id, "failed", f"{type(exc).__name__}: {exc}")
            raise
        self.end_call(handle.call_id, "succeeded", handle.result)

    def ledger(self) -> list[ToolLedgerEntry]:
        return ledger.read(self.store).in_order()

    # checkpoints ----------------------------------------------------------------------
    def checkpoint(self, kind: CheckpointKind = "manual", step_id: str | None = None,
                   state: dict[str, Any] | None = None, messages: Sequence[Any] | None = None,
                   transcript_path: str | None = None, session_id: str | None = None,
                   progress: Progress = quiet) -> Checkpoint:
        if state is not None and not isinstance(state, dict):
            raise GitguardError("the run state must be a JSON object",
                                'for example {"plan": [...], "step": 3}')
        with self.store.writing():
            session = sessions.resolve(self.store, session_id)
            refs = (message_store.store_messages(self.snap, session.session_id, messages)
                    if messages is not None else None)
            tree = self.snap.write_tree(progress=progress)
            # checkpoints.write records the trace event (with its duration)
            return checkpoints.write(
                self.store, self.snap, checkpoints.read_index(self.store),
                session_id=session.session_id, kind=kind, tree=tree,
                ledger_seq=ledger.read(self.store).last_seq, step_id=step_id, run_state=state,
                message_refs=refs, transcript_path=transcript_path)

    def checkpoints(self) -> list[CheckpointIndexRow]:
        return checkpoints.read_index(self.store).rows

    def load_checkpoint(self, checkpoint_id: str) -> Checkpoint:
        return checkpoints.load(self.store, checkpoints.read_index(self.store).find(checkpoint_id))

    def messages(self, checkpoint: Checkpoint) -> list[Any]:
        return message_store.read_messages(self.snap, checkpoint)

    # recovery -------------------------------------------------------------------------
    def resume(self, checkpoint_id: str | None = None,
               session_id: str | None = None) -> recovery.ResumeResult:
        from gitguard.recovery import resume as recovery

        return recovery.resume(self, checkpoint_id=checkpoint_id, session_id=session_id)

    def explain(self, session_id: str | None = None) -> recovery.Explanation:
        from gitguard.recovery import resume as recovery

        return recovery.explain(self, session_id)

    def reconcile(self, call_id: str, status: str, note: str | None = None) -> ToolLedgerEntry:
        from gitguard.recovery import resume as recovery

        return recovery.reconcile(self, call_id, status, note)

    def reconcile_by_probe(self, call_id: str) -> probes.Outcome:
        from gitguard.recovery import resume as recovery

        return recovery.reconcile_by_probe(self, call_id)

    def background_call(self, call_id: str, task_id: str) -> None:
        """The call goes on running in the background as `task_id`: it stays open (its
        window too) until `integrations.background` sees the task end."""
        from gitguard.calls import background

        entry = ledger.read(self.store).get(call_id)
        background.note_started(self.store, task_id, call_id, entry.session_id)

    def settle_windows(self) -> None:
        """Close the attribution windows of calls no longer running (denied, ended
        elsewhere, marked uncertain). Only the daemon keeps windows (`DaemonGuard`); a
        Guard in a fresh process has none to close."""

    # queries --------------------------------------------------------------------------
    def status(self, progress: Progress = quiet) -> Status:
        head, branch = self.snap.head_info()
        if not self.store.exists():
            return Status(str(self.ws.root), self.ws.is_git, head, branch, None)
        from gitguard.integrations import rewind

        rewind.detect_known(self)       # the agent's own rewinds first: they are not its work
        with self.store.writing():
            tree = self.snap.write_tree(progress=progress)
            entries = ledger.read(self.store).in_order()
            open_session = sessions.open_session(self.store)
            dirty = self._owned_changes(self._baseline(), tree.tree, entries)
            count = len(checkpoints.read_index(self.store).rows)
        from gitguard.calls.classify_tools import is_unknown_tool

        unknown = sorted({e.tool_name for e in entries
                          if is_unknown_tool(e.classification_reason)})
        return Status(str(self.ws.root), self.ws.is_git, head, branch,
                      open_session.session_id if open_session else None, dirty,
                      list(tree.skipped), len(entries), count, self.store.size_bytes(),
                      self._daemon_info(), unknown)

    def _daemon_info(self) -> dict[str, Any]:
        from gitguard.ipc.control import UNWATCHED_FILE, running_pid, unusable

        pid = running_pid(self.store.root)
        info: dict[str, Any] = {"running": pid is not None, "pid": pid}
        if pid is not None:
            with suppress(OSError, ValueError):
                info["unwatched"] = json.loads((self.store.root / UNWATCHED_FILE).read_text())
        else:
            info["unusable"] = unusable(self.store.root)
        return info

    def diff(self, call_id: str | None = None, side: str | None = None) -> bytes:
        """A call's patch; or every change since the baseline, optionally one side's only."""
        if call_id is not None:
            from gitguard.calls.lifecycle import patch_of

            return patch_of(self.store, ledger.read(self.store).get(call_id))
        with self.store.writing():
            tree = self.snap.write_tree().tree
            base = self._baseline()
            owned = self._owned_changes(base, tree, ledger.read(self.store).in_order())
        from gitguard.calls import attribution

        paths = [d.path for d in owned
                 if side is None or (d.owner == attribution.USER) == (side == "user")]
        return self.snap.patch(base, tree, paths) if paths else b""

    def _baseline(self) -> str:
        """HEAD's tree in git; outside git, the tree of the store's first checkpoint."""
        head, _ = self.snap.head_info()
        if head is not None:
            return self.snap.tree_of(head)
        rows = checkpoints.read_index(self.store).rows
        return self.snap.tree_of(rows[0].snapshot_commit) if rows else EMPTY_TREE

    def _owned_changes(self, base: str, tree: str, entries: list[ToolLedgerEntry]
                       ) -> list[DirtyPath]:
        from gitguard.calls import attribution, attribution_log

        writes = attribution.last_agent_writes(entries)
        records = attribution_log.latest(self.store)
        windows = self._unsettled_windows(entries)
        blind = {call_id for call_id, _, _ in windows}
        at_once = attribution.written_at_once(entries)
        result = []
        for change in self.snap.diff(base, tree):
            record = records.get(change.path)
            owner, confidence = attribution.owner_with_records(
                change.new_oid, writes.get(change.path), record)
            if record is None and owner != attribution.USER and change.path in at_once:
                confidence = "ambiguous"     # two calls ran at once: not the last one's
            elif owner in blind:
                confidence = "ambiguous"     # the watcher saw it, but the call never finished
            elif owner == attribution.USER and (record is None or
                                                record.confidence == "unknown"):
                # Changed inside a window whose call never finished (resume's rule); a
                # rescan's `unknown` record knows no more than the checkpoints do.
                for call_id, then, end in windows:
                    before = entry_id_at(self.snap.repo, then, change.path)
                    after = True if end is None else entry_id_at(self.snap.repo, end, change.path)
                    if attribution.unsettled_owner(before, after, change.new_oid):
                        owner, confidence = call_id, "ambiguous"
                        break
            result.append(DirtyPath(change.path, owner, confidence, change.status))
        return result

    def _unsettled_windows(self, entries: list[ToolLedgerEntry]
                           ) -> list[tuple[str, str, str | None]]:
        """(call, tree at its start, tree at its window's end or None: open) of the calls a
        crash cut short (uncertain, or reconciled after resume closed their window), newest
        first. Their writes were never recorded."""
        index = checkpoints.read_index(self.store)
        rows = {r.checkpoint_id: r for r in index.rows}
        found = []
        for e in reversed(entries):
            pre = rows.get(e.pre_checkpoint_id or "")
            post = rows.get(e.post_checkpoint_id or "")
            blind = e.status in ("started", "uncertain") or (
                e.status in ("succeeded", "failed") and post is not None and post.kind == "resume")
            if pre is None or not blind or e.tool_name.startswith("gitguard."):
                continue
            found.append((e.call_id, self.snap.tree_of(pre.snapshot_commit),
                          self.snap.tree_of(post.snapshot_commit) if post else None))
        return found


def _open_id(store: Store) -> str:
    session = sessions.open_session(store)
    if session is None:
        raise GitguardError("no session is open", "start one with `gitguard session start`")
    return session.session_id


def dumps(value: Any) -> str:
    return jsontext.dumps(value, indent=2)
