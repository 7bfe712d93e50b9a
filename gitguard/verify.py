"""`gitguard verify`: checksums, checkpoint files, refs and the objects they need."""

from __future__ import annotations

import pygit2

from gitguard import checkpoints, durable
from gitguard.errors import CorruptRecord
from gitguard.snapshot import SESSION_REF, Snapshotter
from gitguard.store import Store


def problems(store: Store, snap: Snapshotter) -> list[str]:
    found: list[str] = []
    if not store.exists():
        return found
    for journal in (*store.journals, store.attribution_path):
        try:
            read = durable.read_jsonl(journal)
        except CorruptRecord as exc:
            found.append(exc.message)
            continue
        if read.torn:
            found.append(f"{journal.name} ends with {len(read.torn)} torn bytes "
                         "(repaired by the next write)")
    try:
        index = checkpoints.read_index(store)
    except CorruptRecord:
        return found
    repo = snap.repo
    for row in index.rows:
        try:
            checkpoint = checkpoints.load(store, row)
        except CorruptRecord as exc:
            found.append(exc.message)
            continue
        commit = repo.get(checkpoint.snapshot_commit)
        if not isinstance(commit, pygit2.Commit):
            found.append(f"checkpoint {row.checkpoint_id}: snapshot commit "
                         f"{checkpoint.snapshot_commit[:12]} is missing")
        for oid in checkpoint.message_refs:
            if oid not in repo:
                found.append(f"checkpoint {row.checkpoint_id}: message blob {oid[:12]} is missing")
    for name in repo.references:
        if name.startswith("refs/gitguard/"):
            target = repo.references[name].target
            if not isinstance(repo.get(target), pygit2.Commit):
                found.append(f"{name} does not point at a commit")
    heads = {n for n in repo.references if n.startswith(SESSION_REF)}
    for row in index.rows:
        if SESSION_REF + row.session_id not in heads:
            found.append(f"session {row.session_id} has checkpoints but no snapshot ref")
    return found
