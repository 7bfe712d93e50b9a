"""What git hooks record: the user's baseline moves and which agent patches went into a commit.

`baselines.jsonl` in the store holds one checksummed line per event, independent of
the tool ledger:

* a `GitMove` when HEAD or the working tree moved under git (checkout, merge, rebase,
  amend, commit): old and new HEAD, the paths the move changed, who made it (the user,
  or the call whose window it ran in) and the checkpoint taken right after it. That
  checkpoint (kind `manual`, step `git:<hook>`, session `git-user`) is a snapshot
  boundary, so the files the git operation changed land between agent calls, where
  attribution gives them to the user.
* a `CommitRecord` after each commit: which agent FilePatchEntries (the blob the agent
  last wrote is the blob committed) went into it, and which committed paths are the
  user's.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pygit2

from gitguard.git.objects import tree_entry
from gitguard.models import Confidence, Versioned
from gitguard.storage import durable
from gitguard.storage.store import Store

if TYPE_CHECKING:
    from gitguard.snapshot.checkpoints import Index
    from gitguard.snapshot.snapshotter import Snapshotter

GIT_SESSION = "git-user"
PATH_CAP = 200

MoveKind = Literal["checkout", "checkout-files", "merge", "rebase", "amend", "commit"]


class GitMove(Versioned):
    record: Literal["move"] = "move"
    at: str
    hook: str
    kind: MoveKind
    old_head: str | None
    new_head: str | None
    branch: str | None = None
    owner: str  # "user" or the callId whose window the git command ran in
    confidence: Confidence
    paths: tuple[str, ...] = ()
    path_count: int = 0
    checkpoint_id: str | None = None
    snapshot_commit: str | None = None


class CommittedPatch(Versioned):
    path: str
    call_id: str
    after_hash: str | None


class CommitRecord(Versioned):
    record: Literal["commit"] = "commit"
    at: str
    commit: str
    parent: str | None
    branch: str | None = None
    agent_patches: tuple[CommittedPatch, ...] = ()
    user_paths: tuple[str, ...] = ()


def journal(store: Store) -> Path:
    return store.baselines_path


def append(store: Store, record: GitMove | CommitRecord) -> None:
    """Under the store lock (which repaired a torn tail: it is one of the store's journals)."""
    durable.append_jsonl(journal(store), [record.to_json()])


def read(store: Store) -> list[GitMove | CommitRecord]:
    found: list[GitMove | CommitRecord] = []
    for raw in durable.read_jsonl(journal(store)).records:
        if raw.get("record") == "commit":
            found.append(CommitRecord.model_validate(raw))
        else:
            found.append(GitMove.model_validate(raw))
    return found


def left_by_user(store: Store, snap: Snapshotter, index: Index, since_checkpoint: str
                 ) -> dict[str, str | None]:
    """path -> the blob (None: deleted) a user's git move left there after `since_checkpoint`.

    A call's pre-to-post diff must not claim these: a `git checkout` the user ran while the
    call was open changed them, not the call.
    """
    if not journal(store).exists():     # the common case
        return {}
    after = index.after(since_checkpoint)      # the call's own rows are the newest
    if after is None:
        return {}
    later = {row.checkpoint_id for row in after}
    left: dict[str, str | None] = {}
    for record in read(store):
        if not (isinstance(record, GitMove) and record.owner == "user" and record.checkpoint_id
                and record.checkpoint_id in later):
            continue
        if record.old_head and record.new_head and record.old_head != record.new_head:
            moved = snap.diff(snap.tree_of(record.old_head), snap.tree_of(record.new_head))
            left.update((c.path, c.new_oid) for c in moved)
        elif record.snapshot_commit:  # files checked out without moving HEAD
            tree = snap.repo.get(snap.tree_of(record.snapshot_commit))
            if not isinstance(tree, pygit2.Tree):
                continue
            for path in record.paths:
                try:
                    left[path] = str(tree_entry(tree, path).id)
                except KeyError:
                    left[path] = None
    return left


def committed_by_user(store: Store, since: str) -> set[str]:
    """The paths of the user's own changes committed at or after `since` (post-commit's
    `CommitRecord.user_paths`): a call open meanwhile did not make them."""
    if not since or not journal(store).exists():
        return set()
    found: set[str] = set()
    for raw in durable.read_jsonl(journal(store)).records:
        if raw.get("record") == "commit" and str(raw.get("at", "")) >= since:
            found.update(CommitRecord.model_validate(raw).user_paths)
    return found


def summary(store: Store, limit: int = 20) -> dict[str, Any]:
    """The newest moves and commits, for `gitguard status`."""
    records = read(store) if store.exists() else []
    moves = [r.to_json() for r in records if isinstance(r, GitMove)][-limit:]
    commits = [r.to_json() for r in records if isinstance(r, CommitRecord)][-limit:]
    return {"moves": moves, "commits": commits}


def describe_move(move: dict[str, Any]) -> str:
    """One human line for a move record (its JSON form)."""
    old, new = (move.get("oldHead") or "-")[:10], (move.get("newHead") or "-")[:10]
    owner = move["owner"] if move["owner"] == "user" else f"call {move['owner']}"
    return (f"{move['hook']}: {move['kind']} {old} -> {new}"
            f"{' on ' + move['branch'] if move.get('branch') else ''}, {move['pathCount']} "
            f"file(s), by {owner} ({move['confidence']})")


def describe_commit(commit: dict[str, Any]) -> list[str]:
    lines = [f"commit {commit['commit'][:10]}"
             f"{' on ' + commit['branch'] if commit.get('branch') else ''}:"]
    lines += [f"    {p['path']} <- {p['callId']}" for p in commit["agentPatches"]]
    lines += [f"    {p} <- user" for p in commit["userPaths"]]
    return lines if len(lines) > 1 else [lines[0] + " no file changes"]
