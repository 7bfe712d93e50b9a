"""Message bodies of a run, stored once each as blobs in the object store and kept
reachable from git gc by a commit under `refs/gitguard/messages/<session>`; a checkpoint
names them by blob id (`Checkpoint.message_refs`), so a message present in 100
checkpoints is stored once."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pygit2

from gitguard import clock
from gitguard.git.objects import read_blob, reference
from gitguard.git.tree_edit import blob_holder
from gitguard.models import Checkpoint
from gitguard.snapshot.snapshotter import Snapshotter
from gitguard.storage import durable

MESSAGES_REF = "refs/gitguard/messages/"


def store_messages(snap: Snapshotter, session_id: str, messages: Sequence[Any]) -> list[str]:
    """One blob per message (identical messages share it); a ref keeps them from git gc.

    Each message is redacted, then sealed when encryption is on (with a synthetic nonce,
    so identical messages still share a blob).
    """
    privacy = snap.store.privacy
    refs = [snap.store_blob(privacy.seal(durable.canonical_json(privacy.redact_json(m)),
                                         "message", deterministic=True))
            for m in messages]
    if refs:
        _keep_reachable(snap, session_id, refs)
    return refs


def _keep_reachable(snap: Snapshotter, session_id: str, blob_ids: list[str]) -> None:
    repo = snap.repo
    ref = reference(repo, MESSAGES_REF + session_id)
    head = repo.get(ref.target) if ref is not None else None
    root = head.tree if isinstance(head, pygit2.Commit) else None
    tree = blob_holder(repo, blob_ids, root)
    if tree is None:        # every one of them is held already
        return
    moment = clock.now()
    sig = pygit2.Signature("gitguard", "gitguard@localhost", int(moment.timestamp()), 0)
    parents: list[pygit2.Oid] = [head.id] if isinstance(head, pygit2.Commit) else []
    commit = repo.create_commit(None, sig, sig, "gitguard messages\n", tree, parents)
    repo.references.create(MESSAGES_REF + session_id, commit, force=True)


def read_messages(snap: Snapshotter, checkpoint: Checkpoint) -> list[Any]:
    privacy = snap.store.privacy
    return [json.loads(privacy.open(read_blob(snap.repo, oid), "message"))
            for oid in checkpoint.message_refs]


def new_blob_bytes(snap: Snapshotter, refs: Sequence[str], previous: Sequence[str]) -> int:
    """Bytes of the blobs among `refs` that `previous` did not already name."""
    known = set(previous)
    total = 0
    for oid in dict.fromkeys(refs):
        obj = snap.repo.get(oid) if oid not in known else None
        total += obj.size if isinstance(obj, pygit2.Blob) else 0
    return total
