"""`gitguard gc`: drop what the retention policy lets go, then pack gitguard's objects.

Order, chosen so a crash at any point leaves a store `gitguard verify` accepts and in
which every indexed checkpoint survives `git gc --prune=now`:

1. new snapshot commits (same trees, parents = the previous *kept* snapshot) and new
   message-holder commits are written, and temporary refs under refs/gitguard/gc/
   keep them reachable;
2. the rewritten checkpoint files are written under new names, then index.jsonl is
   replaced in one atomic rename (the switch from old to new);
3. the session and message refs move to the new commits; the temporary refs go;
4. stale checkpoint files, unreferenced artifacts and old trace events are removed, the
   attribution rows no kept checkpoint can need go (gitguard.retention.attribution), the
   ledger's lines move into ledger.segment and the rest of the trace into trace.segment;
5. gitguard's objects are packed, and what nothing reaches any more is left out.

It never runs `git gc` or `git prune` on the user's repository; at the end it runs the
one whole-repository `git repack` that keeps every object (gitguard.retention.repack).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pygit2

from gitguard import clock, faults
from gitguard import verify as verify_mod
from gitguard.errors import GitguardError
from gitguard.git import packing, spare_objects
from gitguard.git.objects import reference
from gitguard.git.tree_edit import blob_holder
from gitguard.ledger import fold, journal, segment
from gitguard.models import CheckpointIndexRow, ToolLedgerEntry
from gitguard.progress import Progress, quiet
from gitguard.retention import artifacts, attribution
from gitguard.retention import policy as retention
from gitguard.retention import repack as gc_repack
from gitguard.settings import Settings
from gitguard.snapshot import checkpoints
from gitguard.snapshot import messages as message_store
from gitguard.snapshot.snapshotter import AUTHOR, SESSION_REF, Snapshotter
from gitguard.storage import dir_compaction, durable, trace_log
from gitguard.storage.store import Store

TEMP_REF = "refs/gitguard/gc/"
KEEP_CONFLICTS_REF = "refs/gitguard/keep/conflicts"
UNFINISHED = frozenset({"planned", "approved", "started", "uncertain"})
_REWRITTEN = re.compile(r"ckpt_.+\.[0-9a-f]{12}\.json")   # named by _apply


@dataclass
class GcReport:
    dry_run: bool
    kept: dict[str, list[str]] = field(default_factory=dict)
    pruned: list[str] = field(default_factory=list)
    sessions_rewritten: list[str] = field(default_factory=list)
    commits_dropped: int = 0
    message_blobs_dropped: int = 0
    artifacts_removed: list[str] = field(default_factory=list)
    artifacts_bundled: int = 0
    checkpoint_files_removed: int = 0
    trace_events_dropped: int = 0
    attribution_rows_dropped: int = 0
    before: dict[str, int] = field(default_factory=dict)
    after: dict[str, int] = field(default_factory=dict)
    pack: packing.PackStats | None = None
    repack_repository: bool = False
    repack: gc_repack.RepackStats | None = None
    repack_note: str | None = None
    duration_ms: float = 0.0

    @property
    def freed_bytes(self) -> int:
        return sum(self.before.values()) - sum(self.after.values()) if self.after else 0

    def to_json(self) -> dict[str, Any]:
        return {"dryRun": self.dry_run, "kept": self.kept, "pruned": self.pruned,
                "sessionsRewritten": self.sessions_rewritten,
                "commitsDropped": self.commits_dropped,
                "messageBlobsDropped": self.message_blobs_dropped,
                "artifactsRemoved": self.artifacts_removed,
                "artifactsBundled": self.artifacts_bundled,
                "checkpointFilesRemoved": self.checkpoint_files_removed,
                "traceEventsDropped": self.trace_events_dropped,
                "attributionRowsDropped": self.attribution_rows_dropped, "before": self.before,
                "after": self.after, "freedBytes": self.freed_bytes,
                "pack": self.pack.to_json() if self.pack else None,
                "repackRepository": self.repack_repository,
                "repositoryRepack": self.repack.to_json() if self.repack else None,
                "repackNote": self.repack_note,
                "durationMs": round(self.duration_ms, 3)}


@dataclass
class _Chain:
    session_id: str
    head: str
    old: list[str]          # the current first-parent chain, oldest first
    kept: list[str]         # snapshot commits to keep, oldest first


def measure(store: Store) -> dict[str, int]:
    """Bytes in the store, in gitguard's packs, and in all loose objects (count too)."""
    objects = packing.objects_dir(store.ws)
    own = sum(packing._pack_size(objects / "pack", p["name"]) for p in packing.own_packs(store))
    loose_bytes = 0
    for fan in range(256):
        directory = objects / f"{fan:02x}"
        if directory.is_dir():
            loose_bytes += sum(p.stat().st_size for p in directory.iterdir())
    store_bytes = 0
    for path in store.root.rglob("*"):
        if path.is_file() and (store.ws.is_git or store.ws.git_dir not in path.parents):
            store_bytes += path.stat().st_size
    return {"storeFiles": store_bytes, "gitguardPacks": own, "looseObjects": loose_bytes}


def run(store: Store, snap: Snapshotter, settings: Settings, dry_run: bool = False,
        repack_repository: bool | None = None, progress: Progress = quiet) -> GcReport:
    """`repack_repository`: the command line's choice; None leaves it to the settings.
    `progress`: told of each phase, counted (the phases, not the objects in them)."""
    started = time.perf_counter()
    policy = settings.retention
    whole, why_not = gc_repack.decide(store, repack_repository, policy.repack_repository,
                                      policy.repack_max_mb)
    report = GcReport(dry_run=dry_run, repack_repository=whole, repack_note=why_not)
    phases = 2 if dry_run else 6 + whole
    with store.writing():
        progress("checking the store", 0, phases)
        found = verify_mod.problems(store, snap)
        if found:
            raise GitguardError(f"gc changes nothing while the store has problems: {found[0]}",
                                "run `gitguard verify` and fix what it lists first")
        progress("planning what to keep", 1, phases)
        report.before = measure(store)
        index = checkpoints.read_index(store)
        files = {r.checkpoint_id: _raw_checkpoint(store, r) for r in index.rows}
        entries = journal.read(store).in_order()
        plan = _plan(store, index.rows, files, settings, entries)
        report.kept, report.pruned = plan.keep, plan.prune
        chains = _chains(snap.repo, index.rows, files, plan)
        report.commits_dropped = sum(len(c.old) - len(c.kept) for c in chains)
        report.sessions_rewritten = [c.session_id for c in chains]
        messages = _message_plan(snap.repo, index.rows, files, plan)
        report.message_blobs_dropped = sum(len(m[1] - m[2]) for m in messages.values())
        # The ledger's refs by field too: a scan of its bytes alone would miss them once
        # the ledger is stored in another shape.
        named = (artifacts.named(store, files, plan) | artifacts.ledger_named(entries)
                 if store.artifacts_dir.is_dir() else set())
        report.artifacts_removed = artifacts.unreferenced(store, named)
        cutoff = clock.stamp(clock.now() - timedelta(days=settings.retention.trace_days))
        report.trace_events_dropped = sum(1 for r in trace_log.read_records(store)
                                          if str(r.get("at", "")) < cutoff)
        if dry_run:
            report.duration_ms = (time.perf_counter() - started) * 1000
            return report
        # Pack first: what the rewrite unlinks is then in a pack of ours, where the merge
        # below can leave it out; left loose it would count toward git's auto-gc forever.
        progress("packing gitguard's objects", 2, phases)
        first = packing.pack_gitguard_objects(store)
        # Ledger entries keep naming pruned checkpoints; verify must know they went on purpose.
        if plan.prune:
            durable.append_jsonl(store.pruned_path, [checkpoints.pruned_record(plan.prune)])
        progress(f"rewriting {len(chains)} session chain(s)", 3, phases)
        _apply(store, snap, index.rows, files, plan, chains, messages)
        progress("removing what went; compacting the ledger and trace", 4, phases)
        report.checkpoint_files_removed = _remove_stale_files(store, {r.file for r in index.rows})
        for name in report.artifacts_removed:
            (store.artifacts_dir / name).unlink(missing_ok=True)
        report.artifacts_bundled = artifacts.bundle(store, named, entries,
                                                    read_conflicts(store))
        # The entries of what just went still take the directories' blocks: give them back.
        for directory in (store.checkpoints_dir, store.artifacts_dir):
            dir_compaction.shrink(directory)
        kept_created = [r.created_at for r in checkpoints.read_index(store).rows]
        report.attribution_rows_dropped = attribution.compact(store, kept_created)
        _compact_ledger(store)
        trace_log.compact(store, cutoff)
        progress("packing gitguard's objects, leaving out what went", 5, phases)
        report.pack = packing.pack_gitguard_objects(
            store, merge=True, drop_unreachable=True,
            merge_window=packing.MERGE_WINDOW_BEFORE_REPACK if whole else packing.MERGE_WINDOW)
        report.pack.loose_before = first.loose_before
        spare_objects.clear(os.fsencode(store.root))   # kept for the next calls' objects
        # Measured before the repository repack, which folds our pack into the user's:
        # what gc freed is what gitguard stopped holding, not what git's repack moved.
        report.after = measure(store)
        if whole:
            progress("repacking the repository (git repack -a -d --cruft)", 6, phases)
            report.repack = gc_repack.repack_repository(store)
        report.duration_ms = (time.perf_counter() - started) * 1000
        trace_log.emit(store, "gc", "gc.run", duration_ms=report.duration_ms,
                       kept=len(plan.keep), pruned=len(plan.prune),
                       commitsDropped=report.commits_dropped,
                       artifactsRemoved=len(report.artifacts_removed),
                       freedBytes=report.freed_bytes,
                       repackMs=round(report.repack.duration_ms, 3) if report.repack else None)
    return report


def _compact_ledger(store: Store) -> None:
    """The ledger's lines into ledger.segment (xz, ~10x smaller). The fold cache goes: it
    is as large as the ledger was (every entry's newest state), only a cache, and the
    next full read of the ledger rebuilds it (resume's "no fold cache" bench row says what
    that costs once)."""
    segment.compact(store.ledger_path)
    fold.cache_path(store.ledger_path).unlink(missing_ok=True)


# --- planning -------------------------------------------------------------------------

def _raw_checkpoint(store: Store, row: CheckpointIndexRow) -> dict[str, Any]:
    """The checkpoint file as JSON, sealed run state left sealed (gc needs no key)."""
    value = json.loads(checkpoints.file_json((store.checkpoints_dir / row.file).read_bytes()))
    if not isinstance(value, dict):
        raise GitguardError(f"checkpoint {row.checkpoint_id} is not a JSON object",
                            "run `gitguard verify`")
    return value


def read_conflicts(store: Store) -> list[dict[str, Any]]:
    """conflicts.json: a list of CheckpointConflict objects (or {"conflicts": [...]})."""
    try:
        value = json.loads(store.conflicts_path.read_bytes())
    except FileNotFoundError:
        return []
    except ValueError as exc:
        raise GitguardError("conflicts.json is not valid JSON",
                            "run `gitguard verify`; gc keeps everything until it is fixed"
                            ) from exc
    items = value.get("conflicts", []) if isinstance(value, dict) else value
    return [c for c in items if isinstance(c, dict)] if isinstance(items, list) else []


def _pending(store: Store) -> list[dict[str, Any]]:
    return [c for c in read_conflicts(store) if c.get("resolution", "pending") == "pending"]


def read_pins(store: Store) -> list[str]:
    try:
        value = json.loads((store.root / "pins.json").read_bytes())
    except FileNotFoundError:
        return []
    pinned = value.get("pinned", []) if isinstance(value, dict) else []
    return [p for p in pinned if isinstance(p, str)]


def write_pins(store: Store, pinned: list[str]) -> None:
    """Under the store lock."""
    data = {"schemaVersion": 1, "pinned": sorted(set(pinned))}
    durable.atomic_write(store.root / "pins.json", durable.canonical_json(data) + b"\n")


def _plan(store: Store, rows: list[CheckpointIndexRow], files: dict[str, dict[str, Any]],
          settings: Settings, entries: list[ToolLedgerEntry]) -> retention.Plan:
    in_flight = [e.pre_checkpoint_id for e in entries
                 if e.status in UNFINISHED and e.pre_checkpoint_id]
    conflicts = [str(c.get("checkpointId")) for c in _pending(store) if c.get("checkpointId")]
    pinned = [*settings.retention.pinned, *read_pins(store)]
    return retention.choose(rows, settings.retention, clock.now(), pinned=pinned,
                            in_flight=in_flight, conflicts=conflicts, complete=files)


def _first_parent_chain(repo: pygit2.Repository, head: str) -> list[str]:
    chain: list[str] = []
    commit = repo.get(head)
    while isinstance(commit, pygit2.Commit):
        chain.append(str(commit.id))
        commit = repo.get(commit.parent_ids[0]) if commit.parent_ids else None
    return chain[::-1]


def _chains(repo: pygit2.Repository, rows: list[CheckpointIndexRow],
            files: dict[str, dict[str, Any]], plan: retention.Plan) -> list[_Chain]:
    """The sessions whose snapshot chain must change, and how."""
    result = []
    for session_id in dict.fromkeys(r.session_id for r in rows):
        ref = reference(repo, SESSION_REF + session_id)
        if ref is None:
            continue
        head = str(ref.target)
        kept = list(dict.fromkeys(files[r.checkpoint_id]["snapshotCommit"] for r in rows
                                  if r.session_id == session_id and plan.kept(r.checkpoint_id)))
        if head not in kept:
            kept.append(head)   # the newest state: the next snapshot builds on it
        old = _first_parent_chain(repo, head)
        if kept != old:
            result.append(_Chain(session_id, head, old, kept))
    return result


def _message_plan(repo: pygit2.Repository, rows: list[CheckpointIndexRow],
                  files: dict[str, dict[str, Any]], plan: retention.Plan
                  ) -> dict[str, tuple[bool, set[str], set[str]]]:
    """Per session: (has history, blobs held now, blobs still needed), when they differ."""
    result: dict[str, tuple[bool, set[str], set[str]]] = {}
    for session_id in dict.fromkeys(r.session_id for r in rows):
        ref = reference(repo, message_store.MESSAGES_REF + session_id)
        head = repo.get(ref.target) if ref is not None else None
        if not isinstance(head, pygit2.Commit):
            continue
        held = verify_mod.held_blobs(repo, head)
        needed = {oid for r in rows if r.session_id == session_id and plan.kept(r.checkpoint_id)
                  for oid in files[r.checkpoint_id].get("messageRefs", [])}
        if held != needed or head.parent_ids:
            result[session_id] = (bool(head.parent_ids), held, needed)
    return result


# --- applying -------------------------------------------------------------------------

def _apply(store: Store, snap: Snapshotter, rows: list[CheckpointIndexRow],
           files: dict[str, dict[str, Any]], plan: retention.Plan, chains: list[_Chain],
           messages: dict[str, tuple[bool, set[str], set[str]]]) -> None:
    repo = snap.repo
    new_heads: dict[str, str] = {}
    moved: dict[str, str] = {}
    for chain in chains:
        new_heads[chain.session_id] = _rebuild(repo, chain.kept, moved)
    new_messages = {sid: _holder(repo, sorted(needed), "gitguard messages\n")
                    for sid, (_, _, needed) in messages.items()}
    for sid, oid in new_heads.items():
        repo.references.create(TEMP_REF + "sessions/" + sid, oid, force=True)
    for sid, oid in new_messages.items():
        repo.references.create(TEMP_REF + "messages/" + sid, oid, force=True)
    faults.point("gc.after_temp_refs")
    new_rows = []
    for row in rows:
        if not plan.kept(row.checkpoint_id):
            continue
        data = files[row.checkpoint_id]
        commit = moved.get(data["snapshotCommit"], data["snapshotCommit"])
        if commit == data["snapshotCommit"]:
            new_rows.append(row)
            continue
        raw = checkpoints.compressed_file(
            durable.canonical_json({**data, "snapshotCommit": commit}) + b"\n")
        name = f"{row.checkpoint_id}.{commit[:12]}.json"
        durable.atomic_write(store.checkpoints_dir / name, raw)
        new_rows.append(row.model_copy(update={"file": name, "snapshot_commit": commit,
                                               "sha256": hashlib.sha256(raw).hexdigest()}))
    durable.atomic_write(store.index_path, b"".join(durable.encode_line(r.to_json())
                                                    for r in new_rows))
    faults.point("gc.after_index")
    for sid, oid in new_heads.items():
        repo.references.create(SESSION_REF + sid, oid, force=True)
    for sid, oid in new_messages.items():
        repo.references.create(message_store.MESSAGES_REF + sid, oid, force=True)
    _keep_conflict_blobs(store, repo)
    faults.point("gc.after_refs")
    for name in [n for n in repo.references if n.startswith(TEMP_REF)]:
        repo.references.delete(name)


def _rebuild(repo: pygit2.Repository, kept: list[str], moved: dict[str, str]) -> str:
    """A first-parent chain of the kept commits' trees; unchanged prefixes keep their ids."""
    parent: str | None = None
    for old in kept:
        commit = repo.get(old)
        assert isinstance(commit, pygit2.Commit)
        parents = [parent] if parent else []
        if [str(p) for p in commit.parent_ids] == parents:
            new = old
        else:
            new = str(repo.create_commit(None, commit.author, commit.committer, commit.message,
                                         commit.tree_id, [pygit2.Oid(hex=p) for p in parents]))
        moved[old] = new
        parent = new
    assert parent is not None
    return parent


def _holder(repo: pygit2.Repository, blobs: list[str], message: str) -> str:
    """A parentless commit whose tree holds `blobs` (two-level fan-out by oid)."""
    tree = blob_holder(repo, [oid for oid in blobs if oid in repo]) or repo.TreeBuilder().write()
    moment = int(clock.now().timestamp())
    sig = pygit2.Signature(*AUTHOR, moment, 0)
    return str(repo.create_commit(None, sig, sig, message, tree, []))


def _keep_conflict_blobs(store: Store, repo: pygit2.Repository) -> None:
    """The contents a pending conflict names (agent's, user's, base, and each change's
    before and after, which the three-way view and --merge read) outlive their snapshots."""
    wanted = sorted({str(c[k]) for c in _pending(store)
                     for k in ("expectedHash", "actualHash", "baseHash", "movedToHash")
                     if c.get(k)}
                    | {str(step[k]) for c in _pending(store) for step in _steps(c)
                       for k in ("beforeHash", "afterHash") if step.get(k)})
    blobs = [oid for oid in wanted if isinstance(repo.get(oid), pygit2.Blob)]
    if blobs:
        repo.references.create(KEEP_CONFLICTS_REF,
                               _holder(repo, blobs, "gitguard conflict contents\n"), force=True)
    elif KEEP_CONFLICTS_REF in repo.references:
        repo.references.delete(KEEP_CONFLICTS_REF)


def _steps(conflict: dict[str, Any]) -> list[dict[str, Any]]:
    steps = conflict.get("changes")
    return [s for s in steps if isinstance(s, dict)] if isinstance(steps, list) else []


def _remove_stale_files(store: Store, indexed_before: set[str]) -> int:
    """Checkpoint files gc itself made stale: those of dropped checkpoints, the old
    versions of rewritten ones, and what an interrupted gc wrote. A file no index ever
    named (a crash between file and index) is resume's evidence and stays."""
    named = {r.file for r in checkpoints.read_index(store).rows}
    removed = 0
    for path in store.checkpoints_dir.glob("ckpt_*.json"):
        ours = path.name in indexed_before or _REWRITTEN.fullmatch(path.name) is not None
        if ours and path.name not in named:
            path.unlink()
            removed += 1
    return removed
