"""`rollback_files`: undo what agent calls changed after a checkpoint, and nothing else.

Plan, checks, safety snapshot, apply. The plan is pure: from each candidate path's
history (timeline.py) it decides restore, delete, leave, or conflict. Only paths
that agent calls changed after the checkpoint are candidates; a candidate is
written only when every change to it since the checkpoint was an agent call's and
it still holds exactly what the agent last wrote. Anything else a user touched
becomes a CheckpointConflict and is left as it is.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pygit2

from gitguard import clock, fileops
from gitguard.calls import background, timeline, window_rules
from gitguard.calls.attribution import USER
from gitguard.calls.timeline import UNKNOWN, PathHistory
from gitguard.errors import GitguardError, UnsafePath
from gitguard.fileops import FileState, Observed
from gitguard.git import filters, tree_edit
from gitguard.git.objects import GITLINK, LINK, as_tree
from gitguard.ipc import api_client
from gitguard.ledger import git_moves, journal
from gitguard.models import (
    Attribution,
    Checkpoint,
    CheckpointConflict,
    ConflictChange,
    RecoveryAction,
    RollbackFiles,
    ToolLedgerEntry,
)
from gitguard.progress import Progress, quiet
from gitguard.rollback import conflicts, moves
from gitguard.rollback.moves import Move
from gitguard.rollback.moves import of_entries as moves_of
from gitguard.rollback.workspace_writer import (
    Applied,
    Step,
    apply,
    planned_targets,
    sweep_interrupted,
)
from gitguard.snapshot import checkpoints
from gitguard.storage import trace_log
from gitguard.workspace import NON_GIT_STORE, safe_relpath

if TYPE_CHECKING:
    from gitguard.guard_context import GuardContext

TOOL_NAME = "gitguard.rollback_files"


@dataclass
class Plan:
    checkpoint: Checkpoint
    steps: list[Step] = field(default_factory=list)
    conflicts: list[CheckpointConflict] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)    # already as at the checkpoint
    kept_user: list[str] = field(default_factory=list)    # changed after it by the user only
    left: list[tuple[str, str]] = field(default_factory=list)  # (path, why) never snapshotted
    # Reverted on uncertain ground: a change a call owns only because it fell inside its
    # window (a command whose writes cannot be read from its words): (path, call, since).
    on_window: list[tuple[str, str, str | None]] = field(default_factory=list)
    # Files an agent call moved, judged as one change of two paths (moves.py).
    moves: list[Move] = field(default_factory=list)


@dataclass
class Result:
    plan: Plan
    dry_run: bool
    applied: Applied | None = None
    conflicts: list[CheckpointConflict] = field(default_factory=list)
    stored: list[CheckpointConflict] = field(default_factory=list)   # conflicts.json after
    made_dirs: list[str] = field(default_factory=list)   # empty directories brought back

    @property
    def restored(self) -> list[str]:
        return self._paths("restore")

    @property
    def deleted(self) -> list[str]:
        return self._paths("delete")

    def move_outcome(self, move: Move) -> str:
        """`reverted` (the file is back at its source), `conflict`, or `unchanged`."""
        if any(c.path == move.source for c in self.conflicts):
            return "conflict"
        steps = self.applied.done if self.applied is not None else self.plan.steps
        done = {s.path for s in steps}
        return "reverted" if {move.source, move.dest} & done else "unchanged"

    def _paths(self, action: str) -> list[str]:
        steps = self.applied.done if self.applied is not None else self.plan.steps
        return sorted(s.path for s in steps if s.action == action)

    def to_json(self) -> dict[str, Any]:
        return {
            "checkpointId": self.plan.checkpoint.checkpoint_id, "dryRun": self.dry_run,
            "restored": self.restored, "deleted": self.deleted,
            "conflicts": [c.to_json() for c in self.conflicts],
            "unchanged": sorted(self.plan.unchanged), "keptUser": sorted(self.plan.kept_user),
            "madeDirs": self.made_dirs,
            "left": [{"path": path, "reason": why} for path, why in self.plan.left],
            "moves": [{"from": m.source, "to": m.dest, "callId": m.call_id,
                       "outcome": self.move_outcome(m)} for m in self.plan.moves],
            "windowReverted": [{"path": path, "callId": call, "since": since}
                               for path, call, since in self.plan.on_window
                               if path in self.restored or path in self.deleted],
            "safetyCheckpointId": self.applied.safety.checkpoint_id if self.applied else None,
            "entryId": self.applied.entry.call_id if self.applied else None,
        }


# planning (pure) -------------------------------------------------------------------------

def conflict_for(item: PathHistory, checkpoint: Checkpoint, reason: str,
                 actual: FileState | None,
                 foreign: Mapping[str, str] | None = None) -> CheckpointConflict:
    """The conflict record of a path left as it is, with its whole history after the
    checkpoint: the three-way view and --merge take the agent's changes from it.
    `foreign`: other sessions' calls, whose changes are never this rollback's to undo."""
    agent = item.last_agent_change()
    after = agent.after if agent is not None else None
    call_id = agent.owner if agent is not None else None
    foreign = foreign or {}
    return CheckpointConflict(
        path=item.path, expected_hash=after.oid if after else None,
        actual_hash=actual.oid if actual and actual != UNKNOWN else None,
        agent_patch_ref=(agent.patch_ref if agent and agent.patch_ref
                         else f"artifacts/patch_{call_id}.diff"),
        checkpoint_id=checkpoint.checkpoint_id,
        base_hash=item.base.oid if item.base else None, created_at=clock.stamp(),
        call_id=call_id, reason=reason, base_mode=item.base.mode if item.base else None,
        expected_mode=after.mode if after else None,
        changes=tuple(_conflict_change(c, foreign) for c in item.changes))


def _conflict_change(change: timeline.Change, foreign: Mapping[str, str]) -> ConflictChange:
    def oid(state: FileState | None) -> str | None:
        return state.oid if state is not None and state != UNKNOWN else None

    def mode(state: FileState | None) -> int | None:
        return state.mode if state is not None and state != UNKNOWN else None

    return ConflictChange(owner=change.owner, confidence=change.confidence,
                          before_hash=oid(change.before), after_hash=oid(change.after),
                          before_mode=mode(change.before), after_mode=mode(change.after),
                          agents=change.surely_agent and change.owner not in foreign)


def decide(plan: Plan, items: Iterable[PathHistory], records: list[Attribution],
           foreign: Mapping[str, str] | None = None, moves: Iterable[Move] = ()) -> None:
    """Sort every candidate into a step, a conflict, or a path left alone.

    A path the agent changed and nobody else touched after the agent's first write goes
    back to what it held right before that write (a user edit made between the checkpoint
    and that write included: DESIGN.md, Rollback).

    `foreign`: calls of other sessions (callId -> session) that ran in this worktree; a
    change of theirs to a candidate makes it a conflict (one session's rollback never
    reverts another's work).

    `moves`: files agent calls moved, oldest first; each is judged as one file across its
    two paths (`decide_move`). The newest first: in a chain (a -> b, then b -> c) the
    last move holds the file as it is now, user lines carried through `b` included, so
    it takes `b` and `c`; the earlier move's source is then judged alone and goes back
    to its own restore target (a file's bytes are never deleted on an earlier hop's
    word)."""
    touches = timeline.by_path(records)      # once, not a pass over every record per path
    foreign = foreign or {}
    by_path = {item.path: item for item in items}
    for move in reversed(list(moves)):
        source, dest = by_path.get(move.source), by_path.get(move.dest)
        if source is None or dest is None:
            continue
        if decide_move(plan, move, source, dest, touches, foreign):
            plan.moves.append(move)
            del by_path[move.source], by_path[move.dest]
    for item in by_path.values():
        agent = item.last_agent_change()
        first = item.first_agent_change()
        if agent is None or first is None:
            (plan.unchanged if item.now == item.base else plan.kept_user).append(item.path)
            continue
        if item.now == first.before:
            plan.unchanged.append(item.path)   # already as the agent found it
            continue
        reason = timeline.foreign_touch(item, plan.checkpoint.created_at,
                                        touches.get(item.path, ()))
        if reason is None:
            other = next((c.owner for c in item.changes if c.owner in foreign), None)
            if other is not None:
                reason = f"{other} of session {foreign[other]} changed it too"
        if reason is None and item.now == UNKNOWN:
            reason = "it is neither a file nor a symlink now"
        if reason is None and any(s is not None and s.mode == GITLINK
                                  for s in (item.base, first.before, item.now)):
            reason = "it is a submodule; gitguard does not roll submodules back"
        if reason is None and item.now != agent.after:
            reason = f"it differs from what {agent.owner} last wrote"
        if reason is not None:
            plan.conflicts.append(conflict_for(item, plan.checkpoint, reason, item.now,
                                               foreign))
            continue
        plan.steps.append(Step(item.path, item.now, first.before, agent.owner))
        window = next((c for c in item.changes if c.owner != USER
                       and c.confidence == "window"), None)
        if window is not None:
            plan.on_window.append((item.path, window.owner, window.since))


def decide_move(plan: Plan, move: Move, source: PathHistory, dest: PathHistory,
                touches: Mapping[str, list[Attribution]], foreign: Mapping[str, str]) -> bool:
    """Judge a moved file as one: back as a move (the source gets its restore target, the
    destination what it held before the move), or one conflict at the source whose view
    and --merge read the destination. False: the histories do not show this move (the
    paths are judged alone)."""
    gone = next((c for c in reversed(source.changes)
                 if c.owner == move.call_id and c.after is None), None)
    made = next((c for c in dest.changes if gone is not None and c.position == gone.position
                 and c.owner == move.call_id and c.after is not None), None)
    if gone is None or made is None:
        return False
    at = gone.position
    doubtful = next((c.confidence for c in (gone, made)
                     if c.confidence in ("ambiguous", "unknown")), None)
    confidence = doubtful or ("window" if "window" in (gone.confidence, made.confidence)
                              else made.confidence)
    joined = replace(made, before=gone.before, confidence=confidence,
                     why=gone.why or made.why, since=gone.since)
    earlier = [c for c in source.changes if c.position < at]
    later = [c for c in dest.changes if c.position > at]
    # One file: its history through the source up to the move, the destination after.
    item = PathHistory(move.source, source.base, dest.now, (*earlier, joined, *later))
    # What the destination held before the move, the agent's earlier writes to it undone.
    before_dest = [c for c in dest.changes if c.position < at]
    own = next((c for c in before_dest if c.owner != USER), None)
    dest_target = own.before if own is not None else made.before
    first, agent = item.first_agent_change(), item.last_agent_change()
    assert first is not None and agent is not None
    records = sorted((r.model_copy(update={"path": move.source}) for r in
                      (*touches.get(move.source, ()), *touches.get(move.dest, ()))),
                     key=lambda r: r.at)
    reason = timeline.foreign_touch(item, plan.checkpoint.created_at, records)
    if reason is None and source.changes[-1] is not gone:
        reason = f"{move.source} was written again after {move.call_id} moved it"
    if reason is None and own is not None and any(
            c.owner == USER for c in before_dest[before_dest.index(own):]):
        reason = (f"the user changed {move.dest} after the agent wrote it, before "
                  f"{move.call_id} moved {move.source} over it")
    if reason is None:
        other = next((c.owner for c in item.changes if c.owner in foreign), None)
        if other is not None:
            reason = f"{other} of session {foreign[other]} changed it too"
    reason = _unsafe(item, agent, (item.base, first.before, dest_target), reason)
    if reason is not None:
        conflict = conflict_for(item, plan.checkpoint,
                                f"{move.call_id} moved it to {move.dest}; {reason}",
                                dest.now, foreign)
        plan.conflicts.append(conflict.model_copy(update={
            "moved_to": move.dest, "moved_to_hash": dest_target.oid if dest_target else None,
            "moved_to_mode": dest_target.mode if dest_target else None}))
        return True
    if source.now != first.before:
        plan.steps.append(Step(move.source, source.now, first.before, agent.owner))
    if dest.now != dest_target:
        plan.steps.append(Step(move.dest, dest.now, dest_target, agent.owner))
    window = next((c for c in item.changes if c.owner != USER and c.confidence == "window"),
                  None)
    if window is not None:
        plan.on_window += [(p, window.owner, window.since) for p in (move.source, move.dest)]
    return True


def _unsafe(item: PathHistory, agent: timeline.Change, states: Iterable[FileState | None],
            reason: str | None) -> str | None:
    """The checks decide makes after who touched it: what is there now, submodules, and
    whether it still holds what the agent last wrote."""
    if reason is None and item.now == UNKNOWN:
        reason = "it is neither a file nor a symlink now"
    if reason is None and any(s is not None and s.mode == GITLINK
                              for s in (*states, item.now)):
        reason = "it is a submodule; gitguard does not roll submodules back"
    if reason is None and item.now != agent.after:
        reason = f"it differs from what {agent.owner} last wrote"
    return reason


def obstacles(steps: list[Step], observed: Mapping[str, Observed],
              files_under: Mapping[str, list[str]]) -> dict[str, str]:
    """Writes that something the plan does not remove stands in the way of."""
    deleting = {s.path for s in steps if s.target is None}
    blocked: dict[str, str] = {}
    for step in steps:
        if step.target is None:
            continue
        seen = observed[step.path]
        if seen.kind == "beyond" and seen.blocker not in deleting:
            blocked[step.path] = f"{seen.blocker} is a file or symlink where a directory belongs"
        if seen.kind == "dir" and not set(files_under.get(step.path, ())) <= deleting:
            blocked[step.path] = "a directory with other files in it is in the way"
    return blocked


# running ---------------------------------------------------------------------------------

def sessions_of(state: journal.LedgerState, target: Checkpoint) -> frozenset[str] | None:
    """The sessions whose calls a rollback to `target` undoes: the target's own, when it
    has calls (several agent sessions may share a worktree, and one's rollback must not
    revert another's work); None (every session) for a checkpoint no session's calls
    follow, such as one a git hook took."""
    if target.session_id == git_moves.GIT_SESSION:
        return None
    if any(e.session_id == target.session_id for e in state.entries.values()):
        return frozenset({target.session_id})
    return None


def foreign_calls(state: journal.LedgerState, own: frozenset[str] | None) -> dict[str, str]:
    """callId -> session of the calls outside `own`."""
    if own is None:
        return {}
    return {c: e.session_id for c, e in state.entries.items() if e.session_id not in own}


def _candidates(g: GuardContext, state: journal.LedgerState, line: timeline.Timeline,
                rows: list[Any], own: frozenset[str] | None = None) -> dict[str, str]:
    """Paths agent calls changed after the target, each with where it was read from.

    A call a crash left open has no file patches: its declared paths count, and for an
    agent's call whatever changed from its pre checkpoint to the next one (or to now).
    `own`: only calls of these sessions (None: all).
    """
    paths: dict[str, str] = {}
    for window in line.agent_windows():
        entry = state.entries[window.call_id]
        if own is not None and entry.session_id not in own:
            continue
        source = f"ledger entry {entry.call_id}"
        if window.ended:
            paths.update((p.path, source) for p in entry.file_patches)
            continue
        paths.update((p, source) for p in entry.declared_writes)
        if window.planned is not None:
            continue   # gitguard's own entry declared every path it writes
        start = g.snap.tree_of(rows[window.start].snapshot_commit)
        if window.end == timeline.NOW:
            end, source = g.snap.write_tree().tree, "the working tree"
        else:
            end = g.snap.tree_of(rows[window.end].snapshot_commit)
            source = f"checkpoint {rows[window.end].checkpoint_id}"
        paths.update((c.path, source) for c in g.snap.diff(start, end) if c.path not in paths)
    return paths


def check_path(g: GuardContext, path: str, source: str,
               plain_dirs: dict[str, bool] | None = None,
               real_dirs: set[str] | None = None) -> None:
    """A path from the ledger or a checkpoint must name a file inside the workspace as is.

    Strings only: a symlink on the way (out of the workspace, a loop) is the working
    tree's state, not a sign of an edited store; observe finds it in the way ("beyond")
    and the plan deals with that path alone.

    `plain_dirs` (shared across the paths of one rollback) remembers which parent
    directories are real directories or absent, so a path made of those is accepted by
    string checks and one lstat per new parent, not a Path walk per path. `real_dirs`
    collects the parents those lstats found to be directories (for observe_many).
    """
    if plain_dirs is not None and _plain(g.ws.root, path, plain_dirs, real_dirs):
        return
    try:
        normal = safe_relpath(g.ws, path, links=False)
    except UnsafePath as exc:
        raise UnsafePath(f"{source} names {path!r}: {exc.message}",
                         "the store looks edited by hand; nothing was changed. "
                         "Run `gitguard verify`") from None
    if normal != path:
        raise UnsafePath(f"{source} names {path!r}, which is not a normalised workspace path",
                         "the store looks edited by hand; nothing was changed")


def _plain(root: Path, path: str, plain_dirs: dict[str, bool],
           real_dirs: set[str] | None = None) -> bool:
    """True when `safe_relpath(path) == path` surely holds: a relative path in normal form,
    not in git's or gitguard's store, no parent a symlink. False: ask safe_relpath."""
    parts = path.split("/")
    if not path or path.startswith("/") or parts[0] in (".git", NON_GIT_STORE) or any(
            part in ("", ".", "..") for part in parts):
        return False
    parent = ""
    for part in parts[:-1]:
        parent = f"{parent}/{part}" if parent else part
        if parent not in plain_dirs:
            try:
                mode = os.lstat(os.path.join(root, parent)).st_mode
                plain_dirs[parent] = not stat.S_ISLNK(mode)
                if real_dirs is not None and stat.S_ISDIR(mode):
                    real_dirs.add(parent)
            except FileNotFoundError:
                plain_dirs[parent] = True
            except OSError:
                plain_dirs[parent] = False
        if not plain_dirs[parent]:
            return False
    return True


@dataclass
class Facts:
    """What planning read: the ledger, each candidate's history and its state now.

    Where git converts content (eol rules, filters), `items` compare git's form of each
    file (what a snapshot stores), `on_disk` keeps the bytes' own state of the paths whose
    forms differ (what the last check before a write finds) and `conversion` makes the
    working-tree form of what is written back.
    """

    state: journal.LedgerState
    observed: dict[str, Observed]
    items: dict[str, PathHistory]
    on_disk: dict[str, FileState] = field(default_factory=dict)
    conversion: filters.Conversion | None = None
    foreign: dict[str, str] = field(default_factory=dict)    # other sessions' calls
    moves: list[Move] = field(default_factory=list)          # files agent calls moved
    strays: list[tuple[str, str]] = field(default_factory=list)   # (path, why) left as yours

    def now(self) -> dict[str, FileState | None]:
        """Each path's state now as git stores it (the safety checkpoint's content)."""
        return {p: self.items[p].now if p in self.on_disk else seen.state
                for p, seen in self.observed.items()}


def gather(g: GuardContext, target: Checkpoint, store_blobs: bool,
           index: checkpoints.Index | None = None) -> Facts:
    """Candidates, their checks, their states now and their histories. Under the store lock."""
    index = index if index is not None else checkpoints.read_index(g.store)
    state = journal.read(g.store)
    line = timeline.build(index.rows, g.snap.tree_of, target.checkpoint_id, state.in_order(),
                          lambda entry: planned_targets(g, entry),
                          background=background.call_ids(g.store))
    own = sessions_of(state, target)
    sources = _candidates(g, state, line, index.rows, own)
    plain_dirs: dict[str, bool] = {}
    real_dirs: set[str] = set()
    for path, source in sources.items():
        check_path(g, path, source, plain_dirs, real_dirs)
    # A path whose every parent was just found a real directory needs no second walk up
    # to know none is a symlink or a file (planning only: the writes check again).
    walked = {p for p in sources if all(q in real_dirs for q in _parents(p))}
    repo, root = g.snap.repo, g.ws.root
    # Before any read: the file-system clock the reads are compared with when the writes
    # check each path again (fileops.Fence); a dry run writes nothing and needs none.
    before = fileops.fence(g.store.lock.path) if store_blobs else None
    observed = fileops.observe_many(repo, root, sorted(sources), store_blobs, before, walked)
    cache: dict[tuple[str, str], FileState | None] = {}
    parsed: dict[str, pygit2.Tree] = {}

    def lookup(tree: str, path: str) -> FileState | None:
        if (tree, path) not in cache:
            if tree not in parsed:
                parsed[tree] = as_tree(repo, tree)
            cache[tree, path] = tree_edit.lookup(repo, parsed[tree], path)
        return cache[tree, path]

    convert = (filters.conversion(repo, root, g.ws.git_dir, g.snap.scan_index())
               if g.ws.is_git else None)
    now = {p: _now(seen) for p, seen in observed.items()}
    on_disk: dict[str, FileState] = {}
    if convert is not None:
        for path, seen in observed.items():
            clean = _git_form(convert, root, seen, store_blobs)
            if seen.state is not None and clean is not None and clean != seen.state:
                on_disk[path], now[path] = seen.state, clean
    items = {p: timeline.history(line, p, lookup, now[p]) for p in observed}
    ended = [state.entries[w.call_id] for w in line.agent_windows() if w.ended and (
        own is None or state.entries[w.call_id].session_id in own)]
    return Facts(state, observed, items, on_disk, convert, foreign_calls(state, own),
                 moves_of(g.store, str(g.ws.root), ended),
                 [s for s in strays_of(g, ended, index.rows, line) if s[0] not in items])


def strays_of(g: GuardContext, ended: list[ToolLedgerEntry], rows: list[Any],
              line: timeline.Timeline) -> list[tuple[str, str]]:
    """The files a command whose writes cannot be read from its words did not get, though
    they appeared while it ran (window_rules.strays), that are still there: rollback
    leaves them as the user's, and says so."""
    windows = {w.call_id: w for w in line.agent_windows() if w.ended and w.shell}
    found: list[tuple[str, str]] = []
    for entry in ended:
        window = windows.get(entry.call_id)
        dirs = (moves.command_dirs(g.store, str(g.ws.root), entry)
                if window is not None and not entry.declared_writes else None)
        if window is None or dirs is None:
            continue
        before = g.snap.tree_of(rows[window.start].snapshot_commit)
        after = g.snap.tree_of(rows[window.end].snapshot_commit)
        changes = [(c.path, c.old_oid) for c in g.snap.diff(before, after)]
        patched = {p.path for p in entry.file_patches}
        stray = window_rules.strays(changes, frozenset(),
                                    window_rules.dirs_of(g.snap.repo, before), dirs)
        for path in sorted(stray - patched):
            if os.path.lexists(g.ws.root / path):
                found.append((path, f"created while {entry.call_id} ran, in a directory that "
                                    "command did not otherwise touch, and its words do not name "
                                    "it: yours, so rollback leaves it; delete it if the "
                                    "command made it"))
    return found


def _git_form(convert: filters.Conversion, root: Path, seen: Observed,
              store: bool) -> FileState | None:
    """A regular file's state as `git add` would store it, from the bytes observed; None
    when it is not a regular file or changed since it was hashed (then its own bytes are
    compared, which can only make it a conflict, never an overwrite)."""
    if seen.kind != "file" or seen.state is None:
        return None
    if seen.seen is not None:
        data = seen.seen.data
    else:
        try:
            data = (root / seen.path).read_bytes()
        except OSError:
            return None
        if str(pygit2.hash(data)) != seen.state.oid:
            return None
    return FileState(convert.clean(seen.path, data, store), seen.state.mode)


def _narrow(plan: Plan, only: set[str]) -> None:
    """Keep the plan's entries for these paths (and below them) only."""
    def chosen(path: str) -> bool:
        return path in only or any(path.startswith(p.rstrip("/") + "/") for p in only)

    # A move goes back whole or not at all: its two paths are one file.
    joined = {m.source: m.dest for m in plan.moves} | {m.dest: m.source for m in plan.moves}

    def mine(path: str) -> bool:
        return chosen(path) or (path in joined and chosen(joined[path]))

    plan.steps = [s for s in plan.steps if mine(s.path)]
    plan.conflicts = [c for c in plan.conflicts if mine(c.path)]
    plan.unchanged = [p for p in plan.unchanged if mine(p)]
    plan.kept_user = [p for p in plan.kept_user if mine(p)]
    plan.left = [(p, why) for p, why in plan.left if mine(p)]
    plan.on_window = [w for w in plan.on_window if mine(w[0])]
    plan.moves = [m for m in plan.moves if mine(m.source) or mine(m.dest)]


def make_plan(g: GuardContext, target: Checkpoint, facts: Facts) -> Plan:
    plan = Plan(target)
    decide(plan, facts.items.values(), timeline.read_attributions(g.store, facts.items),
           facts.foreign, facts.moves)
    under = {s.path: fileops.files_under(g.ws.root, s.path) for s in plan.steps
             if facts.observed[s.path].kind == "dir"}
    blocked = obstacles(plan.steps, facts.observed, under)
    for path, reason in blocked.items():
        plan.conflicts.append(conflict_for(facts.items[path], target, reason,
                                           _now(facts.observed[path]), facts.foreign))
    plan.steps = [_worktree_form(facts, s) for s in plan.steps if s.path not in blocked]
    return plan


OWN_STEPS = ("rollback", "resolve")     # the step ids of gitguard's own writes (workspace_writer)
SKIPPED_FILE = ("over the size cap (untracked_size_cap): no snapshot holds it, so rollback "
                "leaves it as it is; delete it yourself if the agent made it")
SKIPPED_DIR = ("in a skipped directory (skip_dirs): no snapshot holds it, so rollback leaves "
               "it as it is; delete it yourself if the agent made it")


def left_out(g: GuardContext, index: checkpoints.Index, target: Checkpoint
             ) -> list[tuple[str, str]]:
    """Paths no rollback can touch, said out loud: what the newest checkpoint left out of
    its snapshot (over the size cap, in a skipped directory) that the target did not, and
    that is still there. Whoever made them, the rollback leaves them as they are."""
    newest: Checkpoint | None = None
    for row in reversed(index.rows):
        if row.checkpoint_id == target.checkpoint_id:
            return []
        # gitguard's own writes build their checkpoints from trees, with no scan that
        # would say what was left out: the newest scanned one says it.
        if row.kind == "pre_rollback" or (row.kind == "post" and row.step_id in OWN_STEPS):
            continue
        try:
            newest = checkpoints.load(g.store, row, open_state=False)
        except GitguardError:
            continue
        break
    if newest is None:
        return []
    before = set(target.skipped)
    return [(path.rstrip("/"), SKIPPED_DIR if path.endswith("/") else SKIPPED_FILE)
            for path in newest.skipped
            if path not in before and os.path.lexists(g.ws.root / path.rstrip("/"))]


def _worktree_form(facts: Facts, step: Step) -> Step:
    """A step whose check and write are in working-tree form: it expects the bytes on
    disk and writes the target as `git checkout` would (eol rules, smudge filters)."""
    if facts.conversion is None:
        return step
    expected = facts.on_disk.get(step.path, step.expected)
    data = step.data
    if step.target is not None and step.target.mode != LINK and data is None:
        data = facts.conversion.smudge(step.path, step.target.oid)
        if str(pygit2.hash(data)) == step.target.oid:
            data = None      # the blob's own bytes: written from the object store as usual
    return Step(step.path, expected, step.target, step.call_id, data)


def rollback_files(g: GuardContext, checkpoint_id: str, dry_run: bool = False,
                   paths: Iterable[str] = (), progress: Progress = quiet) -> Result:
    """Plan, check, take the safety checkpoint, apply; record conflicts and the action.
    `paths`: only these (`--path`: one file put back from a safety checkpoint)."""
    only = {safe_relpath(g.ws, p) for p in paths}
    started_clock = time.perf_counter()
    from gitguard.integrations import rewind

    rewind.detect_known(g)          # what the agent's own rewind put back is not undone again
    # A running daemon records what it saw first and leaves our own writes unattributed;
    # it takes the store lock for that, so this comes before ours.
    with api_client.restoring(g, dry_run), g.store.writing():
        index = checkpoints.read_index(g.store)     # once: gather and apply share it
        target = checkpoints.load(g.store, index.find(checkpoint_id))
        progress(f"reading what changed since {checkpoint_id}")
        facts = gather(g, target, store_blobs=not dry_run, index=index)
        plan = make_plan(g, target, facts)
        plan.left = left_out(g, index, target) + facts.strays
        if only:
            _narrow(plan, only)
        result = Result(plan, dry_run, conflicts=list(plan.conflicts))
        if dry_run or not (plan.steps or plan.conflicts):
            return result
        sweep_interrupted(g, facts.state)

        def recorded(applied: Applied) -> tuple[RecoveryAction, dict[str, Any]]:
            """The action for apply's last ledger append, which carries it with the finished
            entry; the conflicts it names are stored first, as before."""
            result.applied = applied
            for step, found in applied.raced:
                actual = found if isinstance(found, FileState) else None
                result.conflicts.append(conflict_for(
                    facts.items[step.path], target,
                    "it changed while the rollback was writing; it was left as it is", actual,
                    facts.foreign))
            result.stored = conflicts.record(g.store, result.conflicts)
            return RollbackFiles(checkpoint_id=target.checkpoint_id), _detail(result)

        apply(g, facts.state, session_id=target.session_id, tool_name=TOOL_NAME,
              id_prefix="rollback", summary=f"rollback-files --to {checkpoint_id}",
              tool_input={"to": checkpoint_id}, steps=plan.steps,
              now=facts.now(), index=index,
              base=target, seen={p: o.seen for p, o in facts.observed.items() if o.seen},
              action=recorded, progress=progress)
        if result.applied is not None:
            # Only where this rollback wrote or deleted: a directory the user removed since
            # is not made again behind their back.
            touched = {d for s in result.applied.done for d in _parents(s.path)}
            touched |= set(result.applied.removed_dirs)
            result.made_dirs = fileops.make_dirs(
                g.ws.root, [d for d in dirs_at(g, facts.state, target) if d in touched])
        _trace(g, result, time.perf_counter() - started_clock)
        return result


def _detail(result: Result) -> dict[str, Any]:
    assert result.applied is not None
    return {"safetyCheckpointId": result.applied.safety.checkpoint_id,
            "entryId": result.applied.entry.call_id, "restored": result.restored,
            "deleted": result.deleted, "conflicts": [c.path for c in result.conflicts],
            "removedDirs": list(result.applied.removed_dirs),
            "madeDirs": list(result.applied.made_dirs)}


def dirs_at(g: GuardContext, state: journal.LedgerState, target: Checkpoint) -> list[str]:
    """Directories that existed when `target` was taken, as far as gitguard's own write
    whose safety checkpoint it is tells: the parents of every path it wrote or deleted
    (less those it made) and those its deletions left empty and removed. Going back to
    `target` (undoing the write) makes the missing ones again: no snapshot holds an
    empty directory. Only normalised workspace paths."""
    named: set[str] = set()
    for event in state.actions:
        detail = event.detail
        if not detail or detail.get("safetyCheckpointId") != target.checkpoint_id:
            continue
        paths = [*_strings(detail.get("restored")), *_strings(detail.get("deleted")),
                 *_strings([detail.get("path")])]
        made = set(_strings(detail.get("madeDirs")))
        named |= {p for path in paths for p in _parents(path)} - made
        named |= set(_strings(detail.get("removedDirs")))
    found: list[str] = []
    for path in sorted(named):
        try:
            if safe_relpath(g.ws, path, links=False) == path:
                found.append(path)
        except UnsafePath:
            continue
    return found


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _trace(g: GuardContext, result: Result, seconds: float) -> None:
    target = result.plan.checkpoint
    detail = _detail(result)
    trace_log.emit(g.store, "rollback", "rollback.files", session_id=target.session_id,
                   duration_ms=seconds * 1000, checkpointId=target.checkpoint_id, **detail)
    if result.conflicts:
        trace_log.emit(g.store, "conflict", "conflict.pending", session_id=target.session_id,
                       paths=[c.path for c in result.conflicts],
                       pending=sum(1 for c in result.stored if c.resolution == "pending"))


def _parents(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:depth]) for depth in range(1, len(parts))]


def _now(seen: Observed) -> FileState | None:
    return timeline.UNKNOWN if seen.kind == "special" else seen.state


def pending_count(g: GuardContext) -> int:
    return sum(1 for c in conflicts.read(g.store) if c.resolution == "pending")
