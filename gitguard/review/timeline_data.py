"""The timeline's data: one JSON document (`gitguard.timeline/1`) of everything the store knows
of what happened in this worktree, and what of it is in the working tree now.

`gitguard timeline --json` prints it and the page embeds it (timeline_page.py): the same
document either way. Everything comes from the store as the other commands read it: the
ledger (summaries and results are redacted before they are stored, so nothing here can
show a secret the ledger does not), the checkpoint index, sessions.jsonl, baselines.jsonl
(the git hooks' moves and commits), conflicts.json with `conflicts show`'s three-way view,
and each call's stored patch, the bytes `gitguard diff CALL` prints.

Only the CLI's `timeline` command imports this module: nothing on the hooks' path does.
"""

from __future__ import annotations

import base64
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitguard import clock
from gitguard.calls import attribution_log
from gitguard.calls.attribution import USER, owner_words
from gitguard.calls.lifecycle import patch_of
from gitguard.errors import GitguardError, UnknownId
from gitguard.git.commands import run_git
from gitguard.ledger import git_moves, journal, sessions
from gitguard.models import Attribution, CheckpointIndexRow, Session, ToolLedgerEntry
from gitguard.review import blame
from gitguard.rollback import conflicts
from gitguard.snapshot import checkpoints
from gitguard.workspace import discover

if TYPE_CHECKING:
    from gitguard.guard_context import GuardContext

SCHEMA = "gitguard.timeline/1"
# A diff larger than this is cut in the page (the rest: `gitguard diff CALL`); the 10,000
# calls of a long session must still make a page a browser opens.
DIFF_CAP = 1 << 20
TEXT_CAP = 256 << 10        # each version of a conflicted file in the three-way view
TURN_START = "user-prompt"  # the step of the checkpoint UserPromptSubmit takes
# Who wrote each line of the changed files (`gitguard blame`'s data): files this size or
# smaller, this many at most; the rest say `gitguard blame PATH` prints it.
BLAME_CAP = 256 << 10
BLAME_FILES = 200


@dataclass(frozen=True)
class Narrowing:
    """`--since CKPT` (from that checkpoint on) and `--session S`."""

    since: str | None = None
    session: str | None = None


def collect(g: GuardContext, dirty: Sequence[Mapping[str, str]],
            narrowing: Narrowing = Narrowing()) -> dict[str, Any]:
    """The document. `dirty`: `status`'s changed paths now ({path, owner, confidence,
    change}); the caller has them from the Guard, which this layer does not import."""
    store = g.store
    rows = checkpoints.read_index(store).rows if store.exists() else []
    position = {row.checkpoint_id: at for at, row in enumerate(rows)}
    known = sessions.read(store) if store.exists() else []
    if narrowing.session is not None and narrowing.session not in {
            s.session_id for s in known}:
        raise UnknownId(f"no session {narrowing.session!r}",
                        "list sessions with `gitguard session list`")
    since_row: CheckpointIndexRow | None = None
    if narrowing.since is not None:
        found = [r for r in rows if r.checkpoint_id == narrowing.since]
        if not found:
            raise UnknownId(f"no checkpoint {narrowing.since!r}",
                            "list checkpoints with `gitguard checkpoints`")
        since_row = found[0]
    since_at = position[since_row.checkpoint_id] if since_row else 0

    state = journal.read(store) if store.exists() else None
    entries = state.in_order() if state is not None else []

    def wanted_call(e: ToolLedgerEntry) -> bool:
        if narrowing.session is not None and e.session_id != narrowing.session:
            return False
        if since_row is None:
            return True
        pre = position.get(e.pre_checkpoint_id or "")
        return pre >= since_at if pre is not None else e.planned_at >= since_row.created_at

    calls = [e for e in entries if wanted_call(e)]
    kept_rows = [r for at, r in enumerate(rows) if at >= since_at and (
        narrowing.session is None or r.session_id == narrowing.session)]
    previous = _previous_in_session(rows)
    session_list = [s for s in known
                    if narrowing.session is None or s.session_id == narrowing.session]
    turns = _turns(rows, session_list)
    head, branch = g.snap.head_info()
    moves = [r.to_json() for r in git_moves.read(store)] if store.exists() else []
    start_at = since_row.created_at if since_row else ""
    moves = [m for m in moves if m["at"] >= start_at]
    if narrowing.session is not None and session_list:
        begun = session_list[0].started_at
        moves = [m for m in moves if m["at"] >= begun]
    blamer = blame.Blamer(g)
    for move in moves:
        move["text"] = ("\n".join(git_moves.describe_commit(move)) if move["record"] == "commit"
                        else git_moves.describe_move(move))
    return {
        "schema": SCHEMA,
        "generatedAt": clock.stamp(),
        "workspace": str(g.ws.root),
        "git": g.ws.is_git,
        "head": head,
        "branch": branch,
        "narrowing": {"since": narrowing.since, "session": narrowing.session},
        "worktrees": _worktrees(g),
        "sessions": [_session(s, calls, turns.get(s.session_id, [])) for s in session_list],
        "calls": [_call(g, e, turns.get(e.session_id, [])) for e in calls],
        "checkpoints": [_checkpoint(g, r, previous.get(r.checkpoint_id)) for r in kept_rows],
        "gitEvents": moves,
        "userEdits": _user_edits(g, calls, position, rows, start_at),
        "workingTree": [{**d, "ownerWords": owner_words(d["owner"], d["confidence"]),
                         "byUser": d["owner"] == USER} | _blame(g, d["path"], blamer, i)
                        for i, d in enumerate(dirty)],
        "conflicts": _conflicts(g),
    }


# the parts --------------------------------------------------------------------------------

def _blame(g: GuardContext, path: str, blamer: blame.Blamer, number: int) -> dict[str, Any]:
    """`gitguard blame PATH`'s lines for the page, or why they are not on it."""
    full = g.ws.root / path
    try:
        size = full.lstat().st_size
    except OSError:
        return {"blame": None, "blameNote": "it is not in the working tree now"}
    if number >= BLAME_FILES or size > BLAME_CAP:
        return {"blame": None, "blameNote": f"`gitguard blame {shlex.quote(path)}` prints "
                                            "who wrote each line"}
    try:
        found = blamer.of(str(full))
    except GitguardError as exc:
        return {"blame": None, "blameNote": exc.message}
    return {"blame": [blame.line_json(line) for line in found.lines]}



def undo_command(g: GuardContext, checkpoint_id: str) -> str:
    """The exact command that puts the agent's files back as they were at `checkpoint_id`,
    runnable from any directory."""
    return (f"gitguard -C {shlex.quote(str(g.ws.root))} rollback-files --to "
            f"{shlex.quote(checkpoint_id)}")


def _call(g: GuardContext, e: ToolLedgerEntry, turns: list[dict[str, Any]]) -> dict[str, Any]:
    raw = e.to_json()
    # Fields another gitguard may add (a rewind marks a call rewoundAt/rewoundBy): read
    # from the record's JSON, so an entry without them is simply not rewound.
    rewound_at, rewound_by = raw.get("rewoundAt"), raw.get("rewoundBy")
    marks = [m for m, on in (("uncertain", e.status == "uncertain"),
                             ("probed", e.probed_at is not None),
                             ("rewound", rewound_at is not None)) if on]
    patch = patch_of(g.store, e) if e.file_patches else b""
    return {
        "callId": e.call_id, "sessionId": e.session_id, "stepId": e.step_id,
        "agentId": e.agent_id, "agentType": e.agent_type,
        "agent": e.agent_type or e.agent_id or "main",
        "turn": _turn_of(turns, e.planned_at),
        "tool": e.tool_name, "summary": e.summary, "status": e.status, "marks": marks,
        "probedAt": e.probed_at, "probeResult": e.probe_result,
        "rewoundAt": rewound_at, "rewoundBy": rewound_by,
        "idempotency": e.idempotency, "replayPolicy": e.replay_policy,
        "riskLevel": e.risk_level, "classificationReason": e.classification_reason,
        "sideEffects": list(e.side_effects),
        "plannedAt": e.planned_at, "startedAt": e.started_at, "finishedAt": e.finished_at,
        "durationMs": _duration_ms(e.started_at, e.finished_at),
        "errorSummary": e.error_summary, "note": e.note, "replayOf": e.replay_of,
        "compensates": e.compensates,
        "declaredWrites": list(e.declared_writes),
        "files": [{"path": p.path, "change": _change(p.before_hash, p.after_hash),
                   "beforeHash": p.before_hash, "afterHash": p.after_hash}
                  for p in e.file_patches],
        **_diff_fields(patch),
        "preCheckpointId": e.pre_checkpoint_id, "postCheckpointId": e.post_checkpoint_id,
        # Rolling back to the checkpoint before the call undoes it (and every agent change
        # after it); the user's changes stay, as always.
        "undo": undo_command(g, e.pre_checkpoint_id) if e.pre_checkpoint_id else None,
    }


def _diff_fields(patch: bytes) -> dict[str, Any]:
    shown = patch[:DIFF_CAP]
    try:
        text, encoding = shown.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, encoding = base64.b64encode(shown).decode("ascii"), "base64"
    return {"diff": text if patch else None, "diffEncoding": encoding,
            "diffBytes": len(patch), "diffTruncated": len(patch) > DIFF_CAP}


def _change(before: str | None, after: str | None) -> str:
    return "added" if before is None else "deleted" if after is None else "modified"


def _duration_ms(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    try:
        span = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    except ValueError:
        return None
    return round(span.total_seconds() * 1000, 3)


def _previous_in_session(rows: Sequence[CheckpointIndexRow]) -> dict[str, str]:
    """checkpoint -> the one before it in its session's chain."""
    last: dict[str, str] = {}
    found: dict[str, str] = {}
    for row in rows:
        if row.session_id in last:
            found[row.checkpoint_id] = last[row.session_id]
        last[row.session_id] = row.checkpoint_id
    return found


def _checkpoint(g: GuardContext, row: CheckpointIndexRow, previous: str | None
                ) -> dict[str, Any]:
    return {"checkpointId": row.checkpoint_id, "sessionId": row.session_id, "kind": row.kind,
            "stepId": row.step_id, "createdAt": row.created_at,
            "snapshotCommit": row.snapshot_commit, "previousId": previous,
            # Undoing what this checkpoint recorded: back to the one before it.
            "undo": undo_command(g, previous) if previous else None,
            "backTo": undo_command(g, row.checkpoint_id)}


def _turns(rows: Sequence[CheckpointIndexRow], session_list: Sequence[Session]
           ) -> dict[str, list[dict[str, Any]]]:
    """Per session, its turns: each starts at a UserPromptSubmit checkpoint and ends at the
    next Stop (or StopFailure, SessionEnd) checkpoint of the session."""
    ids = {s.session_id for s in session_list}
    found: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.session_id not in ids:
            continue
        turns = found.setdefault(row.session_id, [])
        if row.step_id == TURN_START:
            turns.append({"turn": len(turns) + 1, "startedAt": row.created_at,
                          "checkpointId": row.checkpoint_id, "endedAt": None})
        elif row.step_id in ("stop", "stop-failure", "session-end", "interrupt") and turns \
                and turns[-1]["endedAt"] is None:
            turns[-1]["endedAt"] = row.created_at
    return found


def _turn_of(turns: Sequence[Mapping[str, Any]], at: str) -> int | None:
    number = None
    for turn in turns:
        if turn["startedAt"] <= at:
            number = turn["turn"]
    return number


def _session(s: Session, calls: Sequence[ToolLedgerEntry], turns: list[dict[str, Any]]
             ) -> dict[str, Any]:
    own = [e for e in calls if e.session_id == s.session_id]
    agents: dict[str, dict[str, Any]] = {"main": {"agentId": None, "agentType": None,
                                                  "name": "main", "calls": 0}}
    for sub in s.subagents:
        agents[sub.agent_id] = {"agentId": sub.agent_id, "agentType": sub.agent_type,
                                "name": sub.agent_type or sub.agent_id, "calls": 0,
                                "startedAt": sub.started_at, "endedAt": sub.ended_at}
    for e in own:
        key = e.agent_id or "main"
        agents.setdefault(key, {"agentId": e.agent_id, "agentType": e.agent_type,
                                "name": e.agent_type or e.agent_id, "calls": 0})["calls"] += 1
    statuses: dict[str, int] = {}
    for e in own:
        statuses[e.status] = statuses.get(e.status, 0) + 1
    for turn in turns:
        turn["calls"] = sum(1 for e in own if _turn_of(turns, e.planned_at) == turn["turn"])
    return {"sessionId": s.session_id, "agent": s.agent, "parentId": s.parent_id,
            "startedAt": s.started_at, "endedAt": s.ended_at, "calls": len(own),
            "statuses": statuses, "agents": list(agents.values()), "turns": turns}


def _user_edits(g: GuardContext, calls: Sequence[ToolLedgerEntry], position: Mapping[str, int],
                rows: Sequence[CheckpointIndexRow], since: str) -> list[dict[str, Any]]:
    """The user's changes: what the daemon's watcher gave the user (attribution.jsonl,
    consecutive records one event), and what changed between one call's end and the next
    call's start in its session, which no call's window held (from the checkpoints, as
    rollback reads them; a gap with the same tree costs nothing), unless the watcher
    already named that path there."""
    seen = [a for a in attribution_log.read(g.store) if a.at >= since] \
        if g.store.attribution_path.exists() else []
    found: list[dict[str, Any]] = []
    run: list[Attribution] = []
    for record in [*seen, None]:
        if record is not None and record.owner == USER:
            run.append(record)
            continue
        if run:
            found.append({"at": run[0].at, "source": "watcher", "sessionId": None,
                          "afterCallId": None, "beforeCallId": None,
                          "paths": [{"path": a.path, "change": "changed",
                                     "confidence": a.confidence} for a in run]})
            run = []
    watched = [(a.path, a.at) for a in seen if a.owner == USER]
    by_session: dict[str, list[ToolLedgerEntry]] = {}
    for e in calls:
        if e.pre_checkpoint_id in position and not e.tool_name.startswith("gitguard."):
            by_session.setdefault(e.session_id, []).append(e)
    for session_calls in by_session.values():
        session_calls.sort(key=lambda e: position[e.pre_checkpoint_id or ""])
        for before, after in zip(session_calls, session_calls[1:], strict=False):
            start = position.get(before.post_checkpoint_id or "")
            end = position[after.pre_checkpoint_id or ""]
            if start is None or start >= end:
                continue
            old, new = rows[start], rows[end]
            paths = [p for p in _changed(g, old.snapshot_commit, new.snapshot_commit)
                     if not any(path == p["path"] and old.created_at <= at <= new.created_at
                                for path, at in watched)]
            if paths:
                found.append({"at": new.created_at, "source": "checkpoints",
                              "sessionId": after.session_id,
                              "afterCallId": before.call_id, "beforeCallId": after.call_id,
                              "fromCheckpointId": old.checkpoint_id,
                              "toCheckpointId": new.checkpoint_id, "paths": paths})
    found.sort(key=lambda edit: str(edit["at"]))
    return found


def _changed(g: GuardContext, old: str, new: str) -> list[dict[str, str]]:
    try:
        old_tree, new_tree = g.snap.tree_of(old), g.snap.tree_of(new)
    except KeyError:          # gc pruned a snapshot: nothing to compare
        return []
    if old_tree == new_tree:
        return []
    names = {"A": "added", "D": "deleted"}
    return [{"path": c.path, "change": names.get(c.status, "modified")}
            for c in g.snap.diff(old_tree, new_tree)]


def _conflicts(g: GuardContext) -> list[dict[str, Any]]:
    if not g.store.exists():
        return []
    found = []
    for item in conflicts.read(g.store):
        if item.resolution != "pending":
            continue
        view = conflicts.three_way(g, item)
        found.append({"conflict": item.to_json(), "path": item.path,
                      "view": _text(conflicts.render(view)),
                      "base": _text(view.base), "agent": _text(view.agent),
                      "current": _text(view.current), "binary": view.binary,
                      "symlink": view.symlink,
                      "resolve": [f"gitguard -C {shlex.quote(str(g.ws.root))} conflicts "
                                  f"resolve {shlex.quote(item.path)} {flag}"
                                  for flag in conflicts.FLAGS.values()]})
    return found


def _text(data: bytes | None) -> str | None:
    if data is None:
        return None
    cut = data[:TEXT_CAP].decode("utf-8", errors="replace")
    return cut + ("\n... (cut; see `gitguard conflicts show PATH --full`)\n"
                  if len(data) > TEXT_CAP else "")


def _worktrees(g: GuardContext) -> list[dict[str, Any]]:
    """This worktree, and the repository's others (`git worktree list`): each keeps its own
    store, so its own timeline."""
    here = {"path": str(g.ws.root), "current": True, "store": g.store.exists(),
            "command": None}
    if not g.ws.is_git:
        return [here]
    listed = run_git(["worktree", "list", "--porcelain", "-z"], git_dir=g.ws.git_dir,
                     check=False)
    others = []
    for field in listed.stdout.split(b"\0") if listed.returncode == 0 else []:
        if not field.startswith(b"worktree "):
            continue
        path = os.fsdecode(field[len(b"worktree "):])
        if Path(path).resolve() == g.ws.root.resolve():
            continue
        try:
            store = (discover(Path(path)).store_dir / "store.json").exists()
        except GitguardError:       # gone (prunable) or unreadable: listed without a store
            store = False
        others.append({"path": path, "current": False, "store": store,
                       "command": f"gitguard -C {shlex.quote(path)} timeline"})
    return [here, *others]
