"""Conflicts a rollback left: conflicts.json, a three-way view, and their resolution.

A conflict is a path the agent changed after the checkpoint and someone else
touched too. Resolving it: `keep_user` (--keep-user) writes nothing; `apply_agent`
(--take-checkpoint, the source chapter's name kept on disk) writes the
checkpoint's content (completing the rollback); `manual_merge` removes the agent's
hunks from the current file and keeps the user's. Both writes go through
workspace_writer.apply, so the user's version stays in a pre_rollback checkpoint and the
resolution itself can be rolled back.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pygit2

from gitguard import clock, fileops
from gitguard.calls.attribution import USER
from gitguard.errors import GitguardError, MergeRefused, UnknownId
from gitguard.fileops import FileState
from gitguard.git import filters, merge
from gitguard.git.objects import LINK, REGULAR, read_blob
from gitguard.ipc import api_client
from gitguard.ledger import journal, sessions
from gitguard.models import CheckpointConflict, ConflictChange, Resolution, RollbackFiles
from gitguard.rollback import merge_proof
from gitguard.rollback.workspace_writer import Applied, Step, apply
from gitguard.snapshot import checkpoints
from gitguard.storage import durable, trace_log
from gitguard.storage.store import Store
from gitguard.workspace import safe_relpath

if TYPE_CHECKING:
    from gitguard.guard_context import GuardContext

How = Literal["keep_user", "apply_agent", "manual_merge"]
TOOL_NAME = "gitguard.resolve_conflict"
FLAGS: dict[str, str] = {"keep_user": "--keep-user", "apply_agent": "--take-checkpoint",
                         "manual_merge": "--merge"}


def read(store: Store) -> list[CheckpointConflict]:
    try:
        raw = store.conflicts_path.read_bytes()
    except FileNotFoundError:
        return []
    # json.loads keeps surrogate-escaped names that are not UTF-8
    return [CheckpointConflict.model_validate(item) for item in json.loads(raw)]


def _write(store: Store, items: list[CheckpointConflict]) -> None:
    durable.atomic_write(store.conflicts_path,
                         durable.canonical_json([c.to_json() for c in items]) + b"\n")


def record(store: Store, new: list[CheckpointConflict]) -> list[CheckpointConflict]:
    """Add conflicts; a new one for a path replaces the old one. Under the store lock."""
    by_path = {c.path: c for c in read(store)}
    for conflict in new:
        by_path[conflict.path] = conflict
    items = list(by_path.values())
    if new:
        _write(store, items)
    return items


def find(g: GuardContext, path: str, where: str | None = None) -> CheckpointConflict:
    """The conflict on `path` (as `gitguard conflicts` lists it, or relative to `where`,
    the directory the user named paths from): a moved file's is found by its destination
    too."""
    conflicts = read(g.store)
    items = {c.moved_to: c for c in conflicts if c.moved_to} | {c.path: c for c in conflicts}
    if path in items:
        return items[path]
    normal = safe_relpath(g.ws, os.path.join(os.path.abspath(where or os.curdir), path))
    if normal in items:
        return items[normal]
    raise UnknownId(f"no conflict for {path}", "list them with `gitguard conflicts`")


# the three-way view ----------------------------------------------------------------------

@dataclass(frozen=True)
class Piece:
    """One change after the checkpoint in working-tree form: who made it, and whether
    --merge takes it out (`agents`: exactly one agent call of the rollback's made it)."""
    change: ConflictChange
    before: bytes | None
    after: bytes | None

    @property
    def label(self) -> str:
        c = self.change
        if c.agents:
            return f"the agent's change ({c.owner})"
        if c.owner == USER:
            return "your change"
        return (f"a change of {c.confidence} origin ({c.owner} or the user): "
                "--merge keeps it as yours")


@dataclass(frozen=True)
class ThreeWay:
    """The versions of a conflicted file, each in working-tree form (as `git checkout`
    writes it where git converts content: eol rules, smudge filters), so that they
    compare and merge line by line with the file on disk.

    The base is the file as it stood right before the first agent change being undone
    (a user edit made since the checkpoint included), not the checkpoint: each hunk is
    then the agent's or the user's as it really was (DESIGN.md, Rollback)."""
    conflict: CheckpointConflict
    base: bytes | None          # right before the agent's first change
    agent: bytes | None         # what the agent last wrote
    current: bytes | None       # the file now
    current_state: FileState | None
    convert: filters.Conversion | None = None   # git's conversion, where it converts
    pieces: tuple[Piece, ...] = ()              # every change after the checkpoint, in order
    checkpoint: bytes | None = None             # the content at the checkpoint

    @property
    def binary(self) -> bool:
        sides = [self.base, self.agent, self.current]
        sides += [side for p in self.pieces for side in (p.before, p.after)]
        return any(side is not None and merge.is_binary(side) for side in sides)

    @property
    def symlink(self) -> bool:
        modes = {self.conflict.base_mode, self.conflict.expected_mode,
                 self.current_state.mode if self.current_state else None}
        modes |= {m for p in self.pieces for m in (p.change.before_mode, p.change.after_mode)}
        return LINK in modes

    def runs(self) -> list[tuple[list[str], bytes | None, bytes | None]]:
        """The stretches of consecutive agent changes --merge takes out, oldest first:
        (calls, content before the first, content after the last)."""
        found: list[tuple[list[str], bytes | None, bytes | None]] = []
        joined = False
        for piece in self.pieces:
            if not piece.change.agents:
                joined = False
                continue
            if joined:
                calls, before, _ = found[-1]
                found[-1] = ([*calls, piece.change.owner] if piece.change.owner not in calls
                             else calls, before, piece.after)
            else:
                found.append(([piece.change.owner], piece.before, piece.after))
            joined = True
        return found


def recorded_changes(conflict: CheckpointConflict) -> tuple[ConflictChange, ...]:
    """The conflict's changes; a record from before they were kept: the agent's, whole."""
    if conflict.changes:
        return conflict.changes
    return (ConflictChange(owner=conflict.call_id or "the agent", confidence="exact",
                           before_hash=conflict.base_hash, after_hash=conflict.expected_hash,
                           before_mode=conflict.base_mode, after_mode=conflict.expected_mode,
                           agents=True),)


def three_way(g: GuardContext, conflict: CheckpointConflict) -> ThreeWay:
    convert = (filters.conversion(g.snap.repo, g.ws.root, g.ws.git_dir, g.snap.scan_index())
               if g.ws.is_git else None)
    changes = recorded_changes(conflict)
    links = LINK in {conflict.base_mode, conflict.expected_mode} | {
        m for c in changes for m in (c.before_mode, c.after_mode)}

    def blob(oid: str | None) -> bytes | None:
        if not oid:
            return None
        if convert is not None and not links:
            return convert.smudge(conflict.path, oid)
        return read_blob(g.snap.repo, oid)

    # A moved file is now at its destination (`moved_to`): that is the user's file.
    where = conflict.moved_to or conflict.path
    state = fileops.current_state(g.ws.root, where)
    current: bytes | None = None
    real = state if isinstance(state, FileState) else None
    if real is not None:
        full = g.ws.root / where
        current = os.readlink(os.fsencode(full)) if real.mode == LINK else full.read_bytes()
    pieces = tuple(Piece(c, blob(c.before_hash), blob(c.after_hash)) for c in changes)
    agents = [p for p in pieces if p.change.agents]
    base = agents[0].before if agents else blob(conflict.base_hash)
    agent = agents[-1].after if agents else blob(conflict.expected_hash)
    return ThreeWay(conflict, base, agent, current, real, convert, pieces,
                    blob(conflict.base_hash))


def _diff(a: bytes | None, b: bytes | None, from_name: str, to_name: str) -> bytes:
    if a is not None and b is not None and a == b:
        return b"  (no difference)\n"
    lines = difflib.diff_bytes(difflib.unified_diff, (a or b"").splitlines(keepends=True),
                               (b or b"").splitlines(keepends=True),
                               from_name.encode(), to_name.encode())
    text = b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines)
    return text or b"  (no difference)\n"


def render(view: ThreeWay, full: bool = False) -> bytes:
    """The human three-way view: every change since the checkpoint as a diff, each named
    the agent's or the user's (the agent's are what --merge takes out), then the user's
    change since; `full`: the three versions whole (base, agent, current)."""
    c = view.conflict
    first = next((p.change.owner for p in view.pieces if p.change.agents), c.call_id)
    head = (f"conflict {c.path}: {c.resolution}\n"
            f"  why: {c.reason or 'changed by someone other than the agent'}\n"
            f"  checkpoint {c.checkpoint_id}, agent call {c.call_id} ({c.agent_patch_ref})\n"
            f"{_moved_line(c)}"
            f"  base (before {first}) {_oid(view.base)}  agent {c.expected_hash or '(deleted)'}"
            f"  current {view.current_state.oid if view.current_state else '(absent)'}\n")
    out = [head.encode()]
    sides = ((f"base: before {first} (the file as the agent found it)", view.base),
             (f"agent {c.call_id}", view.agent), ("current file", view.current))
    if view.binary or view.symlink:
        for name, data in sides:
            size = "absent" if data is None else f"{len(data)} bytes"
            out.append(f"=== {name}: {'symlink' if view.symlink else 'binary'}, {size}\n"
                       .encode())
        out.append(b"Hint: this cannot be merged; choose --keep-user or --take-checkpoint\n")
        return b"".join(out)
    if full:
        for name, data in sides:
            out.append(f"=== {name}\n".encode())
            out.append(data if data is not None else b"  (absent)\n")
            if data and not data.endswith(b"\n"):
                out.append(b"\n")
        return b"".join(out)
    last = view.checkpoint
    for number, piece in enumerate(view.pieces, 1):
        out.append(f"=== {number}. {piece.label}\n".encode())
        out.append(_diff(piece.before, piece.after, f"before/{c.path}", f"after/{c.path}"))
        last = piece.after
    if view.current != last or not view.pieces:
        out.append(b"=== the current file: your change since\n")
        out.append(_diff(last, view.current, f"before/{c.path}", f"current/{c.path}"))
    out.append(f"Hint: --merge takes out the agent's changes and keeps the rest; "
               f"`gitguard conflicts show {c.path} --full` prints the three versions whole; "
               "resolve with --keep-user, --take-checkpoint or --merge\n".encode())
    return b"".join(out)


def _moved_line(c: CheckpointConflict) -> str:
    if not c.moved_to:
        return ""
    back = "put back as it was" if c.moved_to_hash else "removed"
    return (f"  moved: the file is {c.moved_to} now; --merge and --take-checkpoint write it "
            f"to {c.path} and {c.moved_to} is {back}\n")


def _oid(data: bytes | None) -> str:
    return "(absent)" if data is None else str(pygit2.hash(data))[:12]


# resolving -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Resolved:
    conflict: CheckpointConflict
    applied: Applied | None
    markers: int = 0


def merged(g: GuardContext, view: ThreeWay) -> tuple[bytes, int]:
    """The current file with the agent's changes taken out, newest first, each step
    proved before the next (merge_proof): (content, regions left with markers)."""
    assert view.current is not None
    data, regions = view.current, 0
    # A run that changed no byte (a move, a mode change) has nothing to take out.
    runs = [run for run in view.runs() if run[1] != run[2]]
    for calls, before, after in reversed(runs):
        who = "+".join(calls)
        # A step's markers are its own: a later step reads an earlier one's as your lines.
        ours = "current (yours)" if len(runs) == 1 else f"current (yours, vs {who})"
        labels = (ours, f"agent {who}", f"before {who}")
        step = merge.merge3(data, after or b"", before or b"", labels=labels,
                            git_dir=g.ws.git_dir, scratch=g.store.root / "tmp")
        merge_proof.prove(after or b"", data, before or b"", step.data, labels,
                          step.conflicts)
        if step.conflicts and (calls, before, after) != runs[0]:
            # The next step would merge over these markers as if they were your lines
            # and could interleave its own with them: no result anyone can read.
            raise MergeRefused(
                f"your edits overlap {who}'s, and earlier agent changes come before it: "
                "their conflict regions would nest", merge_proof.HINT)
        data, regions = step.data, regions + step.conflicts
    return data, regions


def _target(g: GuardContext, view: ThreeWay, how: How
            ) -> tuple[FileState | None, bytes | None, int]:
    """What the file becomes: (state, content, conflict regions left with markers)."""
    c = view.conflict
    if how == "apply_agent":
        base = FileState(c.base_hash, c.base_mode or REGULAR) if c.base_hash else None
        return base, None, 0
    if view.current_state is None or view.current is None:
        raise GitguardError(f"{c.path} does not exist now: there is nothing of yours to merge",
                            "choose --keep-user (leave it absent) or --take-checkpoint")
    if view.symlink:
        raise GitguardError(f"{c.path} is a symlink on one side: symlinks cannot be merged",
                            "choose --keep-user or --take-checkpoint")
    if view.binary:
        raise GitguardError(f"{c.path} is binary: it cannot be merged line by line",
                            "keep yours with --keep-user, or restore the checkpoint's with "
                            "--take-checkpoint (yours stays in the safety checkpoint)")
    data, regions = merged(g, view)
    # The merge is in working-tree form; the blob is what `git add` would store for it.
    oid = (view.convert.clean(c.path, data, store=True) if view.convert is not None
           else str(g.snap.repo.create_blob(data)))
    return FileState(oid, view.current_state.mode), data, regions


def resolve(g: GuardContext, path: str, how: How, where: str | None = None) -> Resolved:
    with api_client.restoring(g, how == "keep_user"), g.store.writing():
        conflict = find(g, path, where)
        if conflict.resolution != "pending":
            raise GitguardError(f"the conflict on {conflict.path} is already resolved "
                                f"({conflict.resolution})",
                                "run `gitguard rollback-files` again to plan it anew")
        session_id = _session_of(g, conflict)
        state = journal.read(g.store)
        applied: Applied | None = None
        markers = 0
        if how != "keep_user":
            seen = fileops.observe(g.snap.repo, g.ws.root, conflict.path, store_blobs=True)
            if seen.kind in ("beyond", "special"):
                raise GitguardError(f"{conflict.path} cannot be written: "
                                    f"{seen.blocker or 'it'} is not a regular file",
                                    "move it away, then resolve again; or --keep-user")
            view = three_way(g, conflict)
            target, data, markers = _target(g, view, how)
            data = _worktree_bytes(g, conflict.path, target, data)
            if seen.kind == "dir" and fileops.files_under(g.ws.root, conflict.path):
                raise GitguardError(f"{conflict.path} is a directory with files in it now",
                                    "move them away, then resolve again; or --keep-user")
            steps = [Step(conflict.path, seen.state, target, conflict.call_id, data)]
            now = {conflict.path: seen.state}
            if conflict.moved_to:
                steps.append(_moved_back(g, conflict, seen.state, how))
                now[conflict.moved_to] = steps[-1].expected
            steps = [s for s in steps if s.target != s.expected]
            if steps:
                applied = apply(
                    g, state, session_id=session_id, tool_name=TOOL_NAME, id_prefix="resolve",
                    summary=f"conflicts resolve {conflict.path} {FLAGS[how]}",
                    tool_input={"path": conflict.path, "resolution": how},
                    steps=steps, now=now)
                if applied.raced:
                    raise GitguardError(f"{conflict.path} changed while it was being resolved; "
                                        "it was left as it is", "run the command again")
        resolution: Resolution = how
        done = conflict.model_copy(update={"resolution": resolution,
                                           "resolved_at": clock.stamp()})
        record(g.store, [done])
        detail: dict[str, Any] = {"path": conflict.path, "resolution": how, "markers": markers,
                  "entryId": applied.entry.call_id if applied else None,
                  "removedDirs": list(applied.removed_dirs) if applied else [],
                  "madeDirs": list(applied.made_dirs) if applied else [],
                  "safetyCheckpointId": applied.safety.checkpoint_id if applied else None}
        if applied is not None:
            journal.append_action(g.store, state,
                                  RollbackFiles(checkpoint_id=conflict.checkpoint_id or ""),
                                  session_id, detail)
        trace_log.emit(g.store, "conflict", "conflict.resolve", session_id=session_id, **detail)
        return Resolved(done, applied, markers)


def _moved_back(g: GuardContext, conflict: CheckpointConflict, source: FileState | None,
                how: How) -> Step:
    """A moved file's destination step: back to what it held before the move (removed,
    mostly), once the file (merged or the checkpoint's) is written to the source. Not
    over a source that is there again: a merge would overwrite someone's new file."""
    dest = conflict.moved_to
    assert dest is not None
    if how == "manual_merge" and source is not None:
        raise GitguardError(f"{conflict.path} is there again: merging {dest} into it would "
                            "overwrite it", "move it away, then resolve again; or --keep-user")
    seen = fileops.observe(g.snap.repo, g.ws.root, dest, store_blobs=True)
    if seen.kind in ("beyond", "special") or (
            seen.kind == "dir" and fileops.files_under(g.ws.root, dest)):
        raise GitguardError(f"{dest} cannot be put back: it is not a regular file now",
                            "move it away, then resolve again; or --keep-user")
    back = (FileState(conflict.moved_to_hash, conflict.moved_to_mode or REGULAR)
            if conflict.moved_to_hash else None)
    return Step(dest, seen.state, back, conflict.call_id,
                _worktree_bytes(g, dest, back, None))


def _worktree_bytes(g: GuardContext, path: str, target: FileState | None, data: bytes | None
                    ) -> bytes | None:
    """A stored blob to write back in the form `git checkout` writes it, where git converts
    content (eol rules, smudge filters); None: the blob's own bytes."""
    if target is None or target.mode == LINK or data is not None or not g.ws.is_git:
        return data
    convert = filters.conversion(g.snap.repo, g.ws.root, g.ws.git_dir, g.snap.scan_index())
    if convert is None:
        return None
    smudged = convert.smudge(path, target.oid)
    return None if str(pygit2.hash(smudged)) == target.oid else smudged


def _session_of(g: GuardContext, conflict: CheckpointConflict) -> str:
    if conflict.checkpoint_id:
        index = checkpoints.read_index(g.store)
        return index.find(conflict.checkpoint_id).session_id
    return sessions.resolve(g.store, None).session_id
