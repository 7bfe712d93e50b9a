"""Writing into the working tree on gitguard's own behalf: safety checkpoint, ledger entry, apply.

Every write gitguard makes (a rollback, a conflict resolution) is recorded like an
agent call: a `pre_rollback` checkpoint holding the current content of every path
involved (user edits included), a `started` ledger entry fsynced before the first
write, the writes, a post checkpoint, and FilePatchEntry rows for what was written.
So a later `rollback-files --to <the pre_rollback checkpoint>` sees these writes as
a call's changes and can revert them, byte for byte, like any agent's.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from gitguard import clock, faults, fileops, workers
from gitguard.errors import CorruptRecord, GitguardError, StoreError
from gitguard.fileops import FileState
from gitguard.git import tree_edit
from gitguard.git.objects import TreeResult
from gitguard.ledger import journal as ledger
from gitguard.models import (
    SCHEMA_VERSION,
    Checkpoint,
    CheckpointIndexRow,
    FilePatchEntry,
    RecoveryAction,
    ToolLedgerEntry,
)
from gitguard.progress import Progress, quiet
from gitguard.rollback import write_patch
from gitguard.snapshot import checkpoints, dirty_delta
from gitguard.storage import durable

if TYPE_CHECKING:
    from gitguard.guard_context import GuardContext


@dataclass(frozen=True)
class Step:
    """One planned write: `expected` must still be there, `target` replaces it (None: delete)."""

    path: str
    expected: FileState | None
    target: FileState | None
    call_id: str | None = None          # the call whose change this undoes
    data: bytes | None = None           # content to write when it is not a stored blob

    @property
    def action(self) -> Literal["restore", "delete"]:
        return "delete" if self.target is None else "restore"


@dataclass(frozen=True)
class Applied:
    safety: Checkpoint
    entry: ToolLedgerEntry
    done: tuple[Step, ...]
    raced: tuple[tuple[Step, FileState | None | Literal["other"]], ...]  # changed under us
    removed_dirs: tuple[str, ...] = ()  # directories the deletions left empty and removed
    made_dirs: tuple[str, ...] = ()     # parent directories the writes had to make


def next_call_id(state: ledger.LedgerState, prefix: str) -> str:
    number = sum(1 for call_id in state.order if call_id.startswith(prefix + "_")) + 1
    while state.known(f"{prefix}_{number}"):
        number += 1
    return f"{prefix}_{number}"


def apply(g: GuardContext, state: ledger.LedgerState, *, session_id: str, tool_name: str,
          id_prefix: str, summary: str, tool_input: dict[str, Any], steps: Sequence[Step],
          now: Mapping[str, FileState | None], index: checkpoints.Index | None = None,
          base: Checkpoint | None = None,
          seen: Mapping[str, fileops.Seen] | None = None,
          action: Callable[[Applied], tuple[RecoveryAction, dict[str, Any]]] | None = None,
          progress: Progress = quiet) -> Applied:
    """Safety checkpoint, started entry, writes, post checkpoint, finished entry. Under lock.

    `now` holds the current state of every path involved, blobs already stored, so the
    safety checkpoint keeps what the user had there. `index`: the checkpoint index as the
    caller read it under the same lock (read here otherwise). `base`: the checkpoint the
    steps put paths back to (a rollback's target), whose tree the post tree may equal.
    `seen`: the bytes the plan read per path, reused by the last check (see _write_all).
    `action`: the recovery action to record for what was applied; it goes into the same
    durable append as the finished entry (one fsync, not two).
    `progress`: told of the safety checkpoint, then of each path written (from the writing
    thread).
    """
    index = index if index is not None else checkpoints.read_index(g.store)
    latest = index.latest()
    if latest is None:
        raise GitguardError("there is no checkpoint to build the safety snapshot on",
                            "take one with `gitguard checkpoint`")
    call_id = next_call_id(state, id_prefix)
    safety_tree = tree_edit.tree_with(g.snap.repo, g.snap.tree_of(latest.snapshot_commit), now)
    targets = {s.path: s.target for s in steps}
    # The patch is of what the writes will produce, rendered while they wait on the disk.
    # Its changes: at simple paths the targets themselves, and the post tree is built
    # later, beside the writes too; else from that tree now.
    changes = dirty_delta.planned_changes(g.snap.repo, safety_tree, targets)
    planned_post: str | None = None
    if changes is None:
        planned_post = tree_edit.tree_with(g.snap.repo, safety_tree, targets)
        changes = write_patch.changes(g, safety_tree, planned_post, list(targets))
    for s in steps:      # a target gone from the object store fails here, before any record
        if s.target is not None and s.data is None and not g.snap.repo.odb.exists(s.target.oid):
            raise KeyError(s.target.oid)
    # The targets make an entry a crash left open still precise: a path holding its target
    # was written by it, anything else there is someone else's.
    tool_input = {**tool_input, "targets": {s.path: _state_json(s.target) for s in steps}}
    # The input is journaled (fsynced) before the `started` entry names it; a kill before
    # leaves it unnamed, as a killed call's input is. It and the bytes to write are made in
    # a thread beside the safety checkpoint (write_patch.prepare): the fsyncs overlap. With
    # a few steps their patch is cheap and goes with the input (one fsync).
    items = [(f"input_{call_id}.json", durable.canonical_json(tool_input))]
    few = len(steps) < fileops.PARALLEL_FROM
    progress("storing the safety checkpoint")
    with workers.Scope() as pool:
        prepared = pool.submit(functools.partial(
            write_patch.prepare, g, session_id, items, steps, seen, changes if few else None,
            f"patch_{call_id}.diff"))
        safety = checkpoints.write(
            g.store, g.snap, index, session_id=session_id, kind="pre_rollback",
            tree=TreeResult(safety_tree, tuple(now), ()), ledger_seq=state.last_seq,
            step_id=id_prefix, call_id=call_id, dirty=_dirty_from(g, latest, safety_tree, now))
        faults.point("rollback.after_safety")
        refs, content, known = prepared.result()
    input_ref, early_ref = refs[0], (refs[1] if len(refs) > 1 else None)
    planned = ToolLedgerEntry(
        call_id=call_id, step_id=id_prefix, tool_name=tool_name,
        input_hash=ledger.input_hash(tool_input), status="planned", risk_level="medium",
        idempotency="non_idempotent", replay_policy="never", session_id=session_id,
        planned_at=clock.stamp(), summary=summary, input_ref=input_ref,
        classification_reason="gitguard's own write into the working tree; undo it with "
                              f"rollback-files --to {safety.checkpoint_id}",
        declared_writes=tuple(s.path for s in steps),
    )
    started = planned.model_copy(update={"status": "started", "started_at": clock.stamp(),
                                         "pre_checkpoint_id": safety.checkpoint_id})
    ledger.append_entries(g.store, state, [planned, started])   # one fsync, before any write

    patch: bytes | None = None
    post: Checkpoint | None = None
    appending: workers.Job[list[str]] | None = None
    journal = workers.Scope()
    try:
        if few:
            planned_post = planned_post or tree_edit.tree_with(g.snap.repo, safety_tree, targets)
            done, raced, read, dirs = _write_all(g, steps, seen, content, progress)
        else:
            # The writes wait on the file system in their threads. This thread meanwhile
            # builds the post tree, renders the patch of what they will write (CPU: about
            # 300 tree writes and 100 diffs at 100 files) and writes the post checkpoint of
            # that tree (commit, file, fsyncs); its index row, which names it, waits for
            # the writes. Should one be left, that file stays unnamed (as a kill at
            # checkpoint.before_index leaves it) and the post checkpoint is written again
            # below, of what was written, under the same id.
            with workers.Scope() as pool:
                writing = pool.submit(functools.partial(_write_all, g, steps, seen, content,
                                                          progress))
                planned_post = planned_post or tree_edit.tree_with(g.snap.repo, safety_tree,
                                                                   targets)
                patch = planned_patch = write_patch.render(g, changes, known)
                planned_dirty = _post_tree(g, safety, safety_tree, targets, base,
                                           planned_post)[1]

                def ready() -> None:
                    nonlocal appending
                    if len(writing.result()[0]) != len(steps):
                        raise _Left
                    # The patch's append overlaps the index row's; both precede the
                    # finished entry, the only record naming either.
                    appending = journal.submit(functools.partial(
                        g.store.append_artifacts, session_id,
                        [(f"patch_{call_id}.diff", planned_patch)]))

                with contextlib.suppress(_Left):
                    post = checkpoints.write(
                        g.store, g.snap, index, session_id=session_id, kind="post",
                        tree=TreeResult(planned_post, tuple(targets), ()),
                        ledger_seq=state.last_seq, step_id=id_prefix, call_id=call_id,
                        dirty=planned_dirty, ready=ready)
                done, raced, read, dirs = writing.result()

        written = {s.path: s.target for s in done}
        if post is None:     # a few steps, or a write was left
            post_tree = planned_post if len(done) == len(steps) else None
            post_tree, post_dirty = _post_tree(g, safety, safety_tree, written, base,
                                               post_tree)
            if post_tree != planned_post:
                # Something changed under a write and was left: the patch of what was
                # written. The bytes the last checks read are what those paths held.
                known.update(read)
                patch = (write_patch.render(g, write_patch.changes(g, safety_tree, post_tree,
                                                                   list(written)), known)
                         if done else None)
            elif patch is None and steps and early_ref is None:
                patch = write_patch.render(g, changes, known)
            # Named only by the finished entry: appended beside the post checkpoint.
            if patch is not None:
                name = f"patch_{call_id}{'_written' if early_ref else ''}.diff"
                appending = journal.submit(functools.partial(
                    g.store.append_artifacts, session_id, [(name, patch)]))
            post = checkpoints.write(
                g.store, g.snap, index, session_id=session_id, kind="post",
                tree=TreeResult(post_tree, tuple(written), ()), ledger_seq=state.last_seq,
                step_id=id_prefix, call_id=call_id, dirty=post_dirty)
        patch_ref = appending.result()[0] if appending is not None else (early_ref or "")
    finally:
        journal.close()
    stamp = clock.stamp()
    # Built from typed values without validating them again (a test reads them back).
    patches = tuple(FilePatchEntry.model_construct(
        schema_version=SCHEMA_VERSION, path=s.path,
        before_hash=s.expected.oid if s.expected else None,
        after_hash=s.target.oid if s.target else None, patch_ref=patch_ref,
        tool_call_id=call_id, created_at=stamp,
        before_mode=s.expected.mode if s.expected else None,
        after_mode=s.target.mode if s.target else None) for s in done)
    finished = started.model_copy(update={
        "status": "succeeded", "finished_at": clock.stamp(), "file_patches": patches,
        "post_checkpoint_id": post.checkpoint_id,
        "note": f"{len(raced)} path(s) changed during the write and were left" if raced else None,
    })
    applied = Applied(safety, finished, tuple(done), tuple(raced), tuple(dirs[0]),
                      tuple(sorted(set(dirs[1]))))
    recorded = action(applied) if action is not None else None
    ledger.append_entries(g.store, state, [finished],
                          actions=[(recorded[0], session_id, recorded[1])] if recorded else ())
    return applied


def _post_tree(g: GuardContext, safety: Checkpoint, safety_tree: str,
               written: Mapping[str, FileState | None], base: Checkpoint | None,
               post_tree: str | None = None) -> tuple[str, tuple[list[str], int] | None]:
    """The tree after the writes and its dirty summary.

    A rollback that put back every path that differed from its target usually ends on
    the target's own tree (tree_with then writes no new object: each one exists); then,
    under the same HEAD, the target's dirty summary is the post checkpoint's too (same
    tree, same HEAD), with no lookups in three trees per path.
    """
    if post_tree is None:
        post_tree = tree_edit.tree_with(g.snap.repo, safety_tree, written)
    if (base is not None and post_tree == g.snap.tree_of(base.snapshot_commit)
            and g.snap.head_info()[0] == base.head):
        return post_tree, (list(base.dirty), base.dirty_count)
    return post_tree, dirty_delta.derive(g.snap, safety, post_tree, written)


def _dirty_from(g: GuardContext, latest: CheckpointIndexRow, tree: str,
                changed: Mapping[str, FileState | None]) -> tuple[list[str], int] | None:
    """The safety tree's dirty summary from the latest checkpoint's, when that one reads."""
    try:
        base = checkpoints.load(g.store, latest, open_state=False)
    except CorruptRecord:
        return None
    if tree == g.snap.tree_of(latest.snapshot_commit) and g.snap.head_info()[0] == base.head:
        return list(base.dirty), base.dirty_count   # the usual case: nothing to look up
    return dirty_delta.derive(g.snap, base, tree, changed)


def _state_json(state: FileState | None) -> list[Any] | None:
    return [state.oid, state.mode] if state is not None else None


def planned_targets(g: GuardContext, entry: ToolLedgerEntry) -> dict[str, FileState | None] | None:
    """What a gitguard write entry meant to put at each path; None for an agent's call."""
    if not entry.tool_name.startswith("gitguard.") or entry.input_ref is None:
        return None
    try:
        recorded = json.loads(g.store.read_artifact(entry.input_ref))
    except (OSError, ValueError, StoreError):
        return None
    targets = recorded.get("targets") if isinstance(recorded, dict) else None
    if not isinstance(targets, dict):
        return None
    return {path: FileState(value[0], int(value[1])) if value else None
            for path, value in targets.items()}


Raced = list[tuple[Step, FileState | None | Literal["other"]]]


class _Left(Exception):
    """A write was left (changed under it): the planned tree is not the post tree."""




def _write_all(g: GuardContext, steps: Sequence[Step], seen: Mapping[str, fileops.Seen] | None,
               content: Mapping[str, bytes], progress: Progress = quiet
               ) -> tuple[list[Step], Raced, dict[str, bytes], tuple[list[str], list[str]]]:
    """Deletions deepest first, then writes shallowest first; each re-checked just before.

    The check reads the file again unless `seen` holds bytes read earlier whose lstat,
    older than a fence, is still the file's (fileops.Fence): a same-size edit keeps the
    size and can keep the mtime (utime, or the mtime's granularity) but always moves the
    ctime, which no program can set back.

    `content`: the bytes to write per path. Also returns the bytes the last checks read
    by blob id (what each path held), for a patch of what was written.

    No working-tree file is fsynced, as `git checkout` fsyncs none (core.fsync covers
    objects, refs and the index, never the worktree). A power cut can lose the newest
    writes: a file then holds what it held before (os.replace is atomic, and ext4's
    auto_da_alloc flushes a file renamed over another) or, on a file system without
    that, may come back empty. The user's bytes are not among what it can cost: a path
    is written only when it holds exactly the agent's last write, and that content is in
    the pre_rollback checkpoint, whose file, index row and `started` entry were fsynced
    before the first write here (its blobs, like every snapshot's, are libgit2's loose
    objects, not fsynced; a path written here had them stored by the agent's post
    checkpoint, earlier). `rollback-files --to` that checkpoint brings every path back;
    one holding neither its old nor its planned content becomes a conflict, never
    overwritten. An fsync per file would be a disk flush per path for content that is
    derivable anyway: what was written is the target checkpoint's.
    """
    root = g.ws.root
    umask = fileops.umask()
    seen = seen or {}
    by_path = {s.path: s for s in steps}
    deletions = [by_path[p] for p in fileops.deepest_first(s.path for s in steps
                                                          if s.target is None)]
    writes = sorted((s for s in steps if s.target is not None),
                    key=lambda s: (s.path.count("/"), s.path))
    done: list[Step] = []
    raced: Raced = []
    known: dict[str, bytes] = {}
    removed: list[str] = []     # directories deletions removed (one by one, this thread)
    made: list[str] = []        # directories writes made (list.extend: one call, atomic)

    def one(step: Step) -> tuple[FileState | None | Literal["other"], bytes | None, bool]:
        found, held, info = fileops.last_check(root, step.path, seen.get(step.path))
        if found != step.expected:
            return found, held, False      # the user got there between plan and write
        try:
            if step.target is None:
                removed.extend(fileops.delete_path(root, step.path))
            else:
                made.extend(fileops.write_state(root, step.path, step.target,
                                                content[step.path], umask, checked=info))
        except OSError:
            return "other", held, False    # something took the place of a parent directory
        return found, held, True

    def settle(step: Step, outcome: tuple[FileState | None | Literal["other"],
                                          bytes | None, bool]) -> None:
        found, held, wrote = outcome
        if not wrote:
            raced.append((step, found))
        else:
            if isinstance(found, FileState) and held is not None:
                known[found.oid] = held
            done.append(step)
            faults.point("rollback.mid_apply")
        progress("putting files back", len(done) + len(raced), len(steps))

    # Deletions go one by one, deepest first: each may remove parents it left empty.
    for step in deletions:
        settle(step, one(step))
    # No write's path lies under another's (a tree holds no file below a file), so the
    # writes are independent and overlap in a few threads (fileops.PARALLEL_FROM); parents
    # two writes share are made once (fileops tolerates the race). A kill can leave a
    # writer's temporary file beside its path (as a kill in a one-by-one loop can):
    # `.NAME.gitguard-XXXXXXXX.tmp`, ours by name, swept by the next rollback of these
    # paths (sweep_interrupted).
    if len(writes) < fileops.PARALLEL_FROM:
        for step in writes:
            settle(step, one(step))
    else:
        for step, outcome in zip(writes, fileops.in_threads(one, writes), strict=True):
            settle(step, outcome)
    return done, raced, known, (removed, made)


def sweep_temps(root: Path, rels: Iterable[str]) -> list[str]:
    """Remove the temporary files a killed write of these paths left beside them.

    Only names write_state makes (`.NAME.gitguard-<8 hex>.tmp` for a NAME in `rels`) are
    touched, and only regular files or symlinks; returns what was removed.
    """
    wanted: dict[str, set[str]] = {}
    for rel in rels:
        head, _, name = rel.rpartition("/")
        wanted.setdefault(head, set()).add(name)
    removed: list[str] = []
    for head, names in sorted(wanted.items()):
        directory = os.path.join(root, head) if head else os.fspath(root)
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            match = _TEMP_NAME.fullmatch(entry.name)
            if (match is None or not fileops.is_temp_of(match.group(1), names)
                    or entry.is_dir(follow_symlinks=False)):
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
            removed.append(f"{head}/{entry.name}" if head else entry.name)
    return removed


_TEMP_NAME = re.compile(r"\.(.+)" + re.escape(fileops.TEMP_INFIX) + r"[0-9a-f]{8}\.tmp", re.DOTALL)


def sweep_interrupted(g: GuardContext, state: ledger.LedgerState) -> list[str]:
    """Temporary files of gitguard writes a crash interrupted (entries left uncertain)."""
    paths = {p for e in state.open_entries()
             if e.tool_name.startswith("gitguard.") and e.status in ("started", "uncertain")
             for p in e.declared_writes}
    return sweep_temps(g.ws.root, paths) if paths else []
