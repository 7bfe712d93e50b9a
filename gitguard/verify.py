"""`gitguard verify`: checksums, checkpoint files, refs and the objects they need."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pygit2

from gitguard import checkpoints, durable
from gitguard.errors import CorruptRecord
from gitguard.models import CheckpointIndexRow
from gitguard.snapshot import SESSION_REF, Snapshotter
from gitguard.store import Store


def problems(store: Store, snap: Snapshotter) -> list[str]:
    found: list[str] = []
    if not store.exists():
        return found
    for journal in store.journals:
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
            checkpoint = checkpoints.load(store, row, open_state=False)
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
    found += _unreachable(store, repo, index.rows)
    return found


def _unreachable(store: Store, repo: pygit2.Repository,
                 rows: list[CheckpointIndexRow]) -> list[str]:
    """Checkpoints whose snapshot or messages no gitguard ref keeps (git gc would drop them)."""
    reached: set[str] = set()
    walked_tips: list[pygit2.Oid] = []
    for name in repo.references:
        if not name.startswith("refs/gitguard/"):
            continue
        target = repo.references[name].target
        tip = repo.get(target)
        if str(target) in reached or not isinstance(tip, pygit2.Commit):
            continue
        if "/messages/" in name:
            # each holder commit's tree is its parent's plus new blobs: the tip holds all
            reached |= held_blobs(repo, tip)
        walker = repo.walk(target, pygit2.enums.SortMode.NONE)
        for walked in walked_tips:
            walker.hide(walked)   # history another ref already covered
        walked_tips.append(target)
        reached.update(str(commit.id) for commit in walker)
    found = []
    for row in rows:
        try:
            checkpoint = checkpoints.load(store, row, open_state=False)
        except CorruptRecord:
            continue
        if checkpoint.snapshot_commit not in reached:
            found.append(f"checkpoint {row.checkpoint_id}: snapshot commit "
                         f"{checkpoint.snapshot_commit[:12]} is on no gitguard ref "
                         "(`git gc` would delete it)")
        missing = [m for m in checkpoint.message_refs if m not in reached]
        if missing:
            found.append(f"checkpoint {row.checkpoint_id}: {len(missing)} message blob(s) "
                         "held by no gitguard ref")
    return found


def held_blobs(repo: pygit2.Repository, commit: pygit2.Commit) -> set[str]:
    """The blob ids a message-holder commit keeps (a two-level fan-out tree)."""
    held: set[str] = set()
    for prefix in commit.tree:
        sub = repo.get(prefix.id)
        if isinstance(sub, pygit2.Tree):
            held.update(f"{prefix.name}{leaf.name}" for leaf in sub)
    return held


def permission_problems(store: Store) -> list[str]:
    """Store files must be 0600 and directories 0700, owned by the user running gitguard.

    A private object store (outside git) is checked at its top directory: git decides
    the modes inside it, and a 0700 directory already keeps everyone else out.
    """
    if not store.root.exists():
        return []
    found = []
    uid = os.getuid()
    for directory, dirs, files in os.walk(store.root):
        here = Path(directory)
        if here == store.ws.git_dir and not store.ws.is_git:
            dirs[:], files = [], []
        for path, expected in [(here, durable.DIR_MODE), *((here / f, durable.FILE_MODE)
                                                         for f in files)]:
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                continue  # removed while we looked
            mode = stat.S_IMODE(info.st_mode)
            ok = (mode & 0o077 == 0) if stat.S_ISSOCK(info.st_mode) else mode == expected
            if not ok:
                found.append(f"{path} is {mode:04o}, should be {expected:04o} "
                             f"(fix: chmod {expected:o} {path})")
            if info.st_uid != uid:
                found.append(f"{path} belongs to uid {info.st_uid}, not to you ({uid})")
    return found
