"""`gitguard verify`: checksums, ledger order and transitions, the checkpoint index against
its files, refs and the objects they need, and the artifacts the ledger names.

Problems are damage or broken promises; notes are what a crash legitimately leaves
behind (an incomplete checkpoint file, a torn tail the next write repairs).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2

from gitguard import nativeclient
from gitguard.errors import CorruptRecord, IllegalTransition, StoreError
from gitguard.git.objects import reference
from gitguard.ledger import fold, segment
from gitguard.ledger import journal as ledger
from gitguard.models import CheckpointIndexRow, LedgerEvent
from gitguard.recovery.scan import INCOMPLETE_DIR, incomplete_files
from gitguard.snapshot import checkpoints
from gitguard.snapshot import messages as message_store
from gitguard.snapshot.snapshotter import SESSION_REF, Snapshotter
from gitguard.storage import durable
from gitguard.storage.store import Store


class Problem(str):
    """One problem's text (a str, as callers and `--json` use it) with its own hint: what
    to do about this kind of damage, which is not what to do about another kind."""

    hint: str

    def __new__(cls, text: str, hint: str) -> Problem:
        made = super().__new__(cls, text)
        made.hint = hint
        return made


RECORD_HINT = ("a line fails its checksum or does not parse: the file was edited or damaged "
               "after gitguard wrote it; keep a copy of the store before changing anything")
REPAIR_HINT = ("a ledger line was edited, moved or deleted outside gitguard: `gitguard repair` "
               "sets damaged lines aside in quarantine/ (nothing is deleted), puts moved ones "
               "back in order and marks the calls they touched uncertain")
LEDGER_HINT = ("the ledger contradicts itself or the store (edited, or a file of the store "
               "was removed); keep a copy of the store before changing anything")
CHECKPOINT_HINT = ("`gitguard resume` skips corrupt or incomplete checkpoints and uses the "
                   "newest complete one")
REF_HINT = ("a refs/gitguard/ ref was moved or deleted outside gitguard; until it points at "
            "its session's newest snapshot again, `git gc --prune` may delete checkpoints: "
            "see `git for-each-ref refs/gitguard/`")
MODE_HINT = ("run the chmod shown: the store holds the agent's inputs and outputs, so its "
             "files are 0600 and its directories 0700")
OLD_CLIENT_HINT = ("an older gitguard built its hook client into the store; `gitguard hooks "
                   "install` and `gitguard integrate ...` point the hooks at the installed "
                   "package's client and remove it (`gitguard daemon start` removes it too)")
OWNER_HINT = ("run gitguard as the user who owns the repository, or give the store back to "
              "that user (chown -R)")


@dataclass
class Report:
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def problems(store: Store, snap: Snapshotter) -> list[Problem]:
    return report(store, snap).problems


def report(store: Store, snap: Snapshotter) -> Report:
    found = Report()
    if not store.exists():
        return found
    journals: dict[str, list[dict[str, Any]]] = {}
    for journal in (*store.journals, store.attribution_path):
        try:
            read = _read_journal(journal, journal == store.ledger_path)
        except CorruptRecord as exc:
            found.problems.append(Problem(exc.message, REPAIR_HINT if journal ==
                                          store.ledger_path else RECORD_HINT))
            continue
        journals[journal.name] = read.records
        if read.torn:
            found.notes.append(f"{journal.name} ends with {len(read.torn)} torn bytes "
                               "(repaired by the next write)")
    try:
        index = checkpoints.read_index(store)
    except (CorruptRecord, ValueError) as exc:
        found.problems.append(Problem(f"the checkpoint index cannot be read: {exc}",
                                      RECORD_HINT))
        return found
    last_seq = _check_ledger(store, journals.get(store.ledger_path.name), index, found)
    _check_checkpoints(store, snap, index, last_seq, found)
    _check_refs(snap, index, found)
    found.problems += _unheld_messages(store, snap.repo, index.rows)
    return found


def _read_journal(path: Path, is_ledger: bool) -> durable.JsonlRead:
    """A journal's records; the ledger's include those gc moved into ledger.segment."""
    if not is_ledger:
        return durable.read_jsonl(path)
    raw = segment.read_stream(path)
    return durable.JsonlRead() if raw is None else durable.parse_jsonl(path, raw)


def _check_ledger(store: Store, records: list[dict[str, Any]] | None, index: checkpoints.Index,
                  found: Report) -> int | None:
    """Seqs increase one by one (a gap is a deleted line, unless a repair recorded it),
    every event parses, each call's statuses follow TRANSITIONS, and every checkpoint and
    artifact an entry names exists. Returns the last seq (None: the ledger is unreadable)."""
    if records is None:
        return None
    ids = {row.checkpoint_id for row in index.rows}
    pruned = checkpoints.pruned_ids(store)
    last_seq, gaps, repaired = _check_seqs(records, found)
    current: dict[str, Any] = {}
    # In seq order: lines moved out of place are reported once above, not as a cascade of
    # broken transitions.
    ordered = sorted(records, key=lambda r: r["seq"] if isinstance(r.get("seq"), int) else 0)
    for record in fold.expanded(ordered):    # each change merged into a whole entry
        if "change" in record or "mark" in record:
            found.problems.append(Problem(
                f"ledger seq {record.get('seq')} changes call "
                f"{(record.get('change') or {}).get('callId')}, whose first line is missing",
                REPAIR_HINT))
            continue
        try:
            event = LedgerEvent.model_validate(record)
        except ValueError:
            found.problems.append(Problem(f"ledger event seq {record.get('seq')} does not parse",
                                          RECORD_HINT))
            continue
        entry = event.entry
        if entry is None:
            continue
        if "repairedBy" not in (event.detail or {}):    # a repair rebuilds a state whole
            try:
                if "markOf" in (event.detail or {}) and entry.call_id in current:
                    ledger.check_mark(current[entry.call_id], entry)
                else:
                    ledger.check_transition(current.get(entry.call_id), entry.status,
                                            entry.call_id)
            except IllegalTransition as exc:
                found.problems.append(Problem(f"ledger seq {event.seq}: {exc.message}",
                                              LEDGER_HINT))
        current[entry.call_id] = entry
        for checkpoint_id in (entry.pre_checkpoint_id, entry.post_checkpoint_id):
            if checkpoint_id is not None and checkpoint_id not in ids \
                    and checkpoint_id not in pruned:
                found.problems.append(Problem(
                    f"{entry.call_id} names checkpoint {checkpoint_id}, which is not in the "
                    "index", LEDGER_HINT))
    for first, last in gaps:
        if not any(a <= first and last <= b for a, b in repaired):
            seqs = str(first) if first == last else f"{first}-{last}"
            found.problems.append(Problem(f"ledger seq {seqs} is missing: a line was deleted",
                                          REPAIR_HINT))
    for entry in current.values():
        refs = [entry.input_ref, entry.result_ref, *(p.patch_ref for p in entry.file_patches)]
        for ref in dict.fromkeys(r for r in refs if r):
            trouble = _artifact_trouble(store, ref)
            if trouble is not None:
                found.problems.append(Problem(f"{entry.call_id} names {ref}, {trouble[0]}",
                                              trouble[1]))
    return last_seq


def _check_seqs(records: list[dict[str, Any]], found: Report
                ) -> tuple[int, list[tuple[int, int]], list[tuple[int, int]]]:
    """Each line's seq is the one before plus one. Returns the last seq, the gaps (runs of
    missing seqs) and the runs a `gitguard repair` recorded as gone."""
    last_seq = 0
    repaired: list[tuple[int, int]] = []
    for record in records:
        seq = record.get("seq")
        if not isinstance(seq, int):
            continue                    # reported as not parsing
        if seq <= last_seq:
            found.problems.append(Problem(f"ledger seq {seq} comes after seq {last_seq}: "
                                          "lines are out of order or repeated", REPAIR_HINT))
        last_seq = max(last_seq, seq)
        detail = record.get("detail")
        repair = detail.get("repair") if isinstance(detail, dict) else None
        if isinstance(repair, dict):
            repaired += [(int(a), int(b)) for a, b in repair.get("gaps", ())]
    gaps: list[tuple[int, int]] = []
    previous = 0
    for seq in sorted({r["seq"] for r in records if isinstance(r.get("seq"), int)}):
        if seq > previous + 1:
            gaps.append((previous + 1, seq - 1))
        previous = seq
    return last_seq, gaps, repaired


def _artifact_trouble(store: Store, ref: str) -> tuple[str, str] | None:
    """None when it reads: its file, a journal's line, or the bundle `gitguard gc` moved it
    into (gitguard.storage.artifact_bundle); else what is wrong with it and the hint for that."""
    missing = ("which is missing", LEDGER_HINT)
    try:
        return None if store.has_artifact(ref) else missing
    except CorruptRecord:
        return ("whose journal line fails its checksum: edited or damaged since it was "
                "written", RECORD_HINT)
    except (StoreError, OSError):
        return missing


def _check_checkpoints(store: Store, snap: Snapshotter, index: checkpoints.Index,
                       last_seq: int | None, found: Report) -> None:
    repo = snap.repo
    seen: set[str] = set()
    for row in index.rows:
        if row.checkpoint_id in seen:
            found.problems.append(Problem(f"checkpoint {row.checkpoint_id} is indexed twice",
                                          CHECKPOINT_HINT))
        seen.add(row.checkpoint_id)
        try:
            checkpoint = checkpoints.load(store, row, open_state=False)
        except CorruptRecord as exc:
            found.problems.append(Problem(exc.message, CHECKPOINT_HINT))
            continue
        if (checkpoint.checkpoint_id, checkpoint.session_id, checkpoint.kind,
                checkpoint.snapshot_commit) != (row.checkpoint_id, row.session_id, row.kind,
                                                row.snapshot_commit):
            found.problems.append(Problem(
                f"checkpoint {row.checkpoint_id}: its file and its index row disagree",
                CHECKPOINT_HINT))
        if last_seq is not None and checkpoint.ledger_seq > last_seq:
            found.problems.append(Problem(
                f"checkpoint {row.checkpoint_id} is at ledger seq {checkpoint.ledger_seq}, "
                f"past the ledger's last {last_seq}", CHECKPOINT_HINT))
        commit = repo.get(checkpoint.snapshot_commit)
        if not isinstance(commit, pygit2.Commit):
            found.problems.append(Problem(
                f"checkpoint {row.checkpoint_id}: snapshot commit "
                f"{checkpoint.snapshot_commit[:12]} is missing", CHECKPOINT_HINT))
        for oid in checkpoint.message_refs:
            if oid not in repo:
                found.problems.append(Problem(
                    f"checkpoint {row.checkpoint_id}: message blob {oid[:12]} is missing",
                    CHECKPOINT_HINT))
    for path in incomplete_files(store, index):
        found.notes.append(f"checkpoints/{path.name} has no index row: an incomplete checkpoint "
                           "left by a crash (resume reports it and moves it aside)")
    aside = store.checkpoints_dir / INCOMPLETE_DIR
    if aside.is_dir():
        for path in sorted(aside.glob("*.json")):
            found.notes.append(f"checkpoints/{INCOMPLETE_DIR}/{path.name}: an incomplete "
                               "checkpoint moved aside by resume")


def _check_refs(snap: Snapshotter, index: checkpoints.Index, found: Report) -> None:
    """Refs point at commits, and every checkpoint's commit is reachable from its session's
    ref: otherwise `git gc` would prune it (DESIGN.md invariant 5)."""
    repo = snap.repo
    for ref in repo.references.iterator():
        if (ref.name.startswith("refs/gitguard/")
                and not isinstance(repo.get(ref.target), pygit2.Commit)):
            found.problems.append(Problem(f"{ref.name} does not point at a commit", REF_HINT))
    # An interrupted `gitguard gc` holds rewritten chains under refs/gitguard/gc/ until it
    # moves the session refs: those commits are just as safe from `git gc`.
    held_by_gc: set[str] = set()
    for name in repo.references:
        if name.startswith("refs/gitguard/gc/sessions/"):
            held_by_gc |= _chain(repo, name)
    reachable: dict[str, set[str]] = {}
    for row in index.rows:
        chain = reachable.get(row.session_id)
        if chain is None:
            chain = _chain(repo, SESSION_REF + row.session_id)
            reachable[row.session_id] = chain = chain | held_by_gc if chain else chain
        if not chain:
            found.problems.append(Problem(
                f"session {row.session_id} has checkpoints but no snapshot ref", REF_HINT))
            reachable[row.session_id] = {""}   # report the missing ref once
        elif row.snapshot_commit not in chain and "" not in chain:
            found.problems.append(Problem(
                f"checkpoint {row.checkpoint_id}: snapshot commit {row.snapshot_commit[:12]} "
                f"is not reachable from {SESSION_REF}{row.session_id}", REF_HINT))


def _chain(repo: pygit2.Repository, ref_name: str) -> set[str]:
    ref = reference(repo, ref_name)
    if ref is None or not isinstance(repo.get(ref.target), pygit2.Commit):
        return set()
    return {str(commit.id) for commit in repo.walk(ref.target)}


def _unheld_messages(store: Store, repo: pygit2.Repository,
                     rows: list[CheckpointIndexRow]) -> list[Problem]:
    """Message blobs that no messages ref holds: `git gc` would delete them."""
    held: set[str] = set()
    for ref in repo.references.iterator():
        if ref.name.startswith(message_store.MESSAGES_REF):
            # a holder's tree is its parent's plus new blobs, so the tip holds them all
            tip = repo.get(ref.target)
            if isinstance(tip, pygit2.Commit):
                held |= held_blobs(repo, tip)
    found = []
    for row in rows:
        try:
            checkpoint = checkpoints.load(store, row, open_state=False)
        except CorruptRecord:
            continue
        missing = [m for m in checkpoint.message_refs if m not in held]
        if missing:
            found.append(Problem(f"checkpoint {row.checkpoint_id}: {len(missing)} message "
                                 "blob(s) held by no gitguard ref", REF_HINT))
    return found


def held_blobs(repo: pygit2.Repository, commit: pygit2.Commit) -> set[str]:
    """The blob ids a message-holder commit keeps (a two-level fan-out tree)."""
    held: set[str] = set()
    for prefix in commit.tree:
        sub = repo.get(prefix.id)
        if isinstance(sub, pygit2.Tree):
            held.update(f"{prefix.name}{leaf.name}" for leaf in sub)
    return held


def permission_problems(store: Store) -> list[Problem]:
    """Store files must be 0600 and directories 0700, all owned by the user running
    gitguard; nothing in the store is a program (an older gitguard built one there).

    A private object store (outside git) is checked at its top directory: git decides
    the modes inside it, and a 0700 directory already keeps everyone else out.
    """
    if not store.root.exists():
        return []
    found = []
    uid = os.getuid()
    old = nativeclient.old_program(store.root)
    if old.is_file():
        found.append(Problem(f"{old} is a program older gitguards built, no longer run",
                             OLD_CLIENT_HINT))
    for directory, dirs, files in os.walk(store.root):
        here = Path(directory)
        if here == store.ws.git_dir and not store.ws.is_git:
            dirs[:], files = [], []
        for path, expected in [(here, durable.DIR_MODE),
                               *((here / f, durable.FILE_MODE) for f in files if here / f != old)]:
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                continue  # removed while we looked
            mode = stat.S_IMODE(info.st_mode)
            ok = (mode & 0o077 == 0) if stat.S_ISSOCK(info.st_mode) else mode == expected
            if not ok:
                found.append(Problem(f"{path} is {mode:04o}, should be {expected:04o} "
                                     f"(fix: chmod {expected:o} {path})", MODE_HINT))
            if info.st_uid != uid:
                found.append(Problem(f"{path} belongs to uid {info.st_uid}, not to you ({uid})",
                                     OWNER_HINT))
    return found
