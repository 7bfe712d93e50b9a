"""The git hooks' logic: record the user's baseline moves and commits, guard pushes.

The shims (one source, `hooks/shim.sh`) call `gitguard hook git NAME ARGS...`, which calls
`handle()` in-process; the daemon calls the same function to answer hooks fast.

* post-checkout, post-merge, post-rewrite: a `GitMove` (old and new HEAD, the paths the
  move changed, who made it) and a checkpoint of the workspace right after it.
* post-commit: a `CommitRecord` mapping committed blobs to the agent calls that wrote
  them, and a `GitMove` of kind `commit` (no checkpoint: a commit changes no file).
* pre-push: refuse any push that would carry `refs/gitguard/*` (`git push --mirror`).

Nothing happens in a worktree without a gitguard store, except the push check (refs are
shared by every worktree of a repository).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pygit2

from gitguard import clock
from gitguard.calls import attribution
from gitguard.git.commands import run_git
from gitguard.git.objects import EMPTY_TREE
from gitguard.integrations.pushcheck import check_push
from gitguard.ledger import git_moves, journal
from gitguard.ledger.git_moves import CommitRecord, CommittedPatch, GitMove, MoveKind
from gitguard.models import CheckpointIndexRow, Confidence, ToolLedgerEntry
from gitguard.snapshot import checkpoints
from gitguard.storage import trace_log

if TYPE_CHECKING:
    from gitguard.api import Guard

HOOKS = ("post-checkout", "post-merge", "post-rewrite", "post-commit", "pre-push")
_PATHSPECS_PER_RUN = 500     # one ls-files per so many paths keeps argv well under ARG_MAX


def handle(guard: Guard, name: str, args: list[str], stdin: bytes,
           env: Mapping[str, str] | None = None) -> tuple[int, str]:
    """Exit code and a message for stderr. Only pre-push ever returns non-zero: 4 (refused).

    4, not 1: the shim must tell a refusal from a Python that failed to start (exit 1).

    `env` is the hook process's environment (default: this process's); the daemon passes
    the forwarded one, because it tells whether an agent's command ran git.
    """
    env = os.environ if env is None else env
    if name == "pre-push":
        return check_push(args, stdin)
    if name not in HOOKS or not guard.store.exists():
        return 0, ""
    if name in ("post-checkout", "post-commit") and _rebasing(guard):
        # A rebase checks out and commits once per pick; its post-rewrite records the result.
        return 0, ""
    if name == "post-commit":
        return 0, _post_commit(guard, env)
    old, kind = _move_start(guard, name, args, stdin)
    return 0, _record_move(guard, name, kind, old, env)


def _rebasing(guard: Guard) -> bool:
    git_dir = guard.ws.worktree_git_dir
    return git_dir is not None and any(
        (git_dir / d).is_dir() for d in ("rebase-merge", "rebase-apply"))


def _resolve(guard: Guard, name: str) -> str | None:
    try:
        obj = guard.snap.repo.revparse_single(name)
    except (KeyError, ValueError, pygit2.GitError):
        return None
    commit = obj.peel(pygit2.Commit) if obj is not None else None
    return str(commit.id) if commit is not None else None


def _oid(text: str | None) -> str | None:
    return None if not text or set(text) == {"0"} else text


def _move_start(guard: Guard, name: str, args: Sequence[str], stdin: bytes
                ) -> tuple[str | None, MoveKind]:
    """HEAD before the move, and what kind of move it was."""
    if name == "post-checkout":
        previous = _oid(args[0]) if args else None
        whole = len(args) < 3 or args[2] == "1"
        return previous, "checkout" if whole else "checkout-files"
    if name == "post-rewrite" and args and args[0] == "amend":
        first = stdin.decode(errors="replace").split()
        return (_oid(first[0]) if first else None), "amend"
    # merge and rebase leave the HEAD they started from in ORIG_HEAD
    return _resolve(guard, "ORIG_HEAD"), "rebase" if name == "post-rewrite" else "merge"


def _owner(state: journal.LedgerState, env: Mapping[str, str]) -> tuple[str, Confidence]:
    """Who ran the git command: the call whose window it ran in, else the user.

    `gitguard run` marks its child with GITGUARD_CALL_ID; Claude Code marks the commands
    its Bash tool runs with CLAUDECODE=1. Without a marker, git ran in the user's own
    shell, but an open call window makes that ambiguous.
    """
    started = [e for e in state.open_entries() if e.status == "started"]
    marked = env.get("GITGUARD_CALL_ID")
    if marked and any(e.call_id == marked for e in started):
        return marked, "exact"
    if not started:
        return attribution.USER, "exact"
    if env.get("CLAUDECODE") == "1" or marked:
        return started[-1].call_id, "window" if len(started) == 1 else "ambiguous"
    return attribution.USER, "ambiguous"


def _changed_paths(guard: Guard, old: str | None, new: str | None) -> list[str]:
    snap = guard.snap
    return [c.path for c in snap.diff(snap.tree_of(old), snap.tree_of(new))] if old and new else []


def _written_by_git(guard: Guard, base: str, tree: str) -> Callable[[], list[str]]:
    """With HEAD in place (`git checkout -- FILE`, a squash merge): the paths that changed
    since the last snapshot and now hold what the index holds, i.e. what git wrote.

    An agent's edit in the same window differs from the index, so it stays the agent's.

    Returns a function that gives the answer: the `git ls-files` behind it (a read of the
    whole user index, ~15 ms at 100k files) runs in a thread meanwhile, so the caller
    writes its checkpoint (fsyncs) in that time. The thread runs git only: pygit2 objects
    stay on the caller's thread.
    """
    index_file = guard.ws.user_index
    if index_file is None or not index_file.is_file():
        return list
    changes = guard.snap.diff(base, tree)
    if not changes:
        return list
    root, git_dir, paths = guard.ws.root, guard.ws.git_dir, [c.path for c in changes]
    box: list[dict[str, str] | BaseException] = []

    def work() -> None:
        try:
            box.append(staged_blobs(root, git_dir, index_file, paths))
        except BaseException as exc:  # noqa: BLE001 - raised again on the caller's thread
            box.append(exc)

    thread = threading.Thread(target=work, name="gitguard-ls-files", daemon=True)
    thread.start()

    def answer() -> list[str]:
        thread.join()
        staged = box[0]
        if isinstance(staged, BaseException):
            raise staged
        return [c.path for c in changes if staged.get(c.path) == c.new_oid]

    return answer


def staged_blobs(root: Path, git_dir: Path, index_file: Path, paths: list[str]
                 ) -> dict[str, str]:
    """path -> blob id at stage 0 of the user's index, for these paths only.

    `git ls-files` (read only: it never writes the index) rather than pygit2.Index, which
    parses every entry in Python-visible form: ~40 ms and more on a 100k-file index, for
    the handful of paths a checkout hook asks about.
    """
    found: dict[str, str] = {}
    for start in range(0, len(paths), _PATHSPECS_PER_RUN):
        chunk = paths[start:start + _PATHSPECS_PER_RUN]
        out = run_git(["ls-files", "--stage", "-z", "--", *(":(literal)" + p for p in chunk)],
                      git_dir=git_dir, work_tree=root,
                      env={"GIT_INDEX_FILE": str(index_file)}).stdout
        for record in filter(None, out.split(b"\0")):
            head, _, raw = record.partition(b"\t")
            _mode, oid, stage = head.split(b" ")
            if stage == b"0":
                found[os.fsdecode(raw)] = oid.decode()
    return found


def _record_move(guard: Guard, name: str, kind: MoveKind, old: str | None,
                 env: Mapping[str, str]) -> str:
    store, snap = guard.store, guard.snap
    with store.writing():
        state = journal.read(store)
        owner, confidence = _owner(state, env)
        index = checkpoints.read_index(store)
        previous = index.latest()
        tree = snap.write_tree()
        # HEAD in place: ask the index while the checkpoint is written (same answer).
        early = snap.head_info()[0]
        written = _written_by_git(guard, _base(guard, previous), tree.tree) \
            if old is not None and old == early else None
        checkpoint = checkpoints.write(
            store, snap, index, session_id=git_moves.GIT_SESSION, kind="manual", tree=tree,
            ledger_seq=state.last_seq, step_id=f"git:{name}")
        new, branch = checkpoint.head, checkpoint.branch
        if old is not None and old == new:
            if written is None or early != new:     # HEAD moved meanwhile: ask again
                written = _written_by_git(guard, _base(guard, previous), tree.tree)
            paths = written()
        else:
            paths = _changed_paths(guard, old, new)
        move = GitMove(at=clock.stamp(), hook=name, kind=kind, old_head=old, new_head=new,
                       branch=branch, owner=owner, confidence=confidence,
                       paths=tuple(paths[:git_moves.PATH_CAP]), path_count=len(paths),
                       checkpoint_id=checkpoint.checkpoint_id,
                       snapshot_commit=checkpoint.snapshot_commit)
        git_moves.append(store, move)
        trace_log.emit(store, "checkpoint", f"git.{name}", session_id=git_moves.GIT_SESSION,
                       checkpointId=checkpoint.checkpoint_id, kind=kind, oldHead=old, newHead=new,
                       owner=owner, files=len(paths))
    return ""


def _base(guard: Guard, previous: CheckpointIndexRow | None) -> str:
    return guard.snap.tree_of(previous.snapshot_commit) if previous else EMPTY_TREE


def _post_commit(guard: Guard, env: Mapping[str, str]) -> str:
    store, snap = guard.store, guard.snap
    head, branch = snap.head_info()
    if head is None:
        return ""
    commit = snap.repo.get(head)
    if not isinstance(commit, pygit2.Commit):
        return ""
    parent = str(commit.parent_ids[0]) if commit.parent_ids else None
    base = snap.tree_of(parent) if parent else EMPTY_TREE
    changes = snap.diff(base, str(commit.tree_id))
    with store.writing():
        state = journal.read(store)
        written = _agent_blobs(state.in_order())
        agent: list[CommittedPatch] = []
        user: list[str] = []
        for change in changes:
            call_id = written.get((change.path, change.new_oid))
            if call_id is None:
                user.append(change.path)
            else:
                agent.append(CommittedPatch(path=change.path, call_id=call_id,
                                            after_hash=change.new_oid))
        owner, confidence = _owner(state, env)
        git_moves.append(store, CommitRecord(
            at=clock.stamp(), commit=head, parent=parent, branch=branch,
            agent_patches=tuple(agent), user_paths=tuple(user[:git_moves.PATH_CAP])))
        git_moves.append(store, GitMove(
            at=clock.stamp(), hook="post-commit", kind="commit", old_head=_previous_head(guard),
            new_head=head, branch=branch, owner=owner, confidence=confidence,
            paths=tuple(c.path for c in changes[:git_moves.PATH_CAP]), path_count=len(changes)))
        trace_log.emit(store, "checkpoint", "git.post-commit", session_id=git_moves.GIT_SESSION,
                       commit=head, agentPaths=len(agent), userPaths=len(user), owner=owner)
    return ""


def _agent_blobs(entries: Sequence[ToolLedgerEntry]) -> dict[tuple[str, str | None], str]:
    """(path, blob) -> the newest call that left that blob at that path."""
    written: dict[tuple[str, str | None], str] = {}
    for entry in entries:
        for patch in entry.file_patches:
            written[(patch.path, patch.after_hash)] = entry.call_id
    return written


def _previous_head(guard: Guard) -> str | None:
    """HEAD before the commit: the newest HEAD reflog entry (right for amend and reset too)."""
    try:
        newest = next(iter(guard.snap.repo.references["HEAD"].log()), None)
    except (KeyError, pygit2.GitError):
        newest = None
    return _oid(str(newest.oid_old)) if newest is not None else None
