"""Packing gitguard's own objects, so the user's `git commit` never auto-gcs because of us.

Snapshots write loose objects into the user's object database. git counts loose
objects (it samples objects/17/) and starts `git gc --auto` past `gc.auto` (6700).
gitguard packs what only its refs reach into packs of its own under objects/pack/,
moves the loose files it packed into the store for its next loose objects to reuse
(spare_objects), then runs `git prune-packed`, which deletes only loose objects already
in a pack.

What this module never does: run `git gc`, `git prune` or `git repack` on the user's
repository, or delete a pack it did not write. Packs it wrote are listed in the
store (packs.json); merging them writes one pack holding every object of the old ones
(less, at `gitguard gc`, objects that nothing at all reaches any more: no ref, reflog
or index) before the old ones are deleted; if git touched one of them meanwhile (it
"freshens" a pack when a write finds its object there) the old packs stay.
"""

from __future__ import annotations

import json
import os
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import pygit2

from gitguard import faults
from gitguard.errors import GitguardError
from gitguard.git import spare_objects
from gitguard.git.commands import git_version, run_git
from gitguard.storage import durable, trace_log
from gitguard.storage.store import Store
from gitguard.workspace import Workspace

GITGUARD_REFS = "refs/gitguard/"
DEFAULT_GC_AUTO = 6700
MAX_OWN_PACKS = 8          # merge our packs before git's gc.autoPackLimit (50) could count them
GEOMETRIC_FACTOR = 2       # each of our packs at least this many times the next smaller (to_merge)
# Delta search widths. Our packs are small, so a merge can afford a wide search:
# snapshots of the same directories at different times delta well against each other.
INCREMENTAL_WINDOW = 50
MERGE_WINDOW = 250
# When git's whole-repository repack follows (gitguard gc's default) it decides the
# final layout, and a narrower merge costs less for the same result. Measured on the
# 1k bench repository after 1,000 edits: window 250 took 10.0 s of git CPU and left
# 1.82 MB of packs after the repack, window 50 took 3.2 s and left 1.70 MB (without
# the repack, 2.89 MB against 3.12 MB: there the wide search pays).
MERGE_WINDOW_BEFORE_REPACK = 50
PACK_EXTS = (".idx", ".pack", ".rev", ".bitmap", ".mtimes", ".promisor")
STDIN_PACKS_SINCE = (2, 32)     # pack-objects --stdin-packs
TMP_PREFIX = "tmp_gitguard_"  # a snapshot pack being written (pack_writer); git's prune
                              # also removes stale tmp_* files in objects/pack


@dataclass
class PackStats:
    objects: int = 0            # objects written into new packs
    pack_bytes: int = 0         # size of the pack(s) written
    loose_before: int = 0
    set_aside: int = 0          # packed loose files kept for reuse (spare_objects)
    loose_after: int = 0
    merged_packs: int = 0       # own packs merged into one
    dropped: int = 0            # objects nothing reaches, left out of the merged pack
    own_packs: int = 0          # gitguard packs after this run
    own_pack_bytes: int = 0
    duration_ms: float = 0.0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"objects": self.objects, "packBytes": self.pack_bytes,
                "looseBefore": self.loose_before, "looseAfter": self.loose_after,
                "mergedPacks": self.merged_packs, "dropped": self.dropped,
                "ownPacks": self.own_packs, "ownPackBytes": self.own_pack_bytes,
                "durationMs": round(self.duration_ms, 3), "notes": self.notes}


def objects_dir(ws: Workspace) -> Path:
    """The object directory, shared by every worktree of the repository."""
    common = ws.git_dir / "commondir"
    base = ws.git_dir
    if common.is_file():
        base = (ws.git_dir / common.read_text().strip()).resolve()
    return base / "objects"


def _count_dir(directory: Path) -> int:
    try:
        return sum(1 for entry in os.scandir(directory)
                   if len(entry.name) >= 38 and "." not in entry.name)
    except FileNotFoundError:
        return 0


def loose_count(objects: Path) -> tuple[int, int]:
    """(all loose objects, loose objects in 17/: the sample git's auto-gc counts)."""
    counts = [_count_dir(objects / f"{fan:02x}") for fan in range(256)]
    return sum(counts), counts[0x17]


def loose_sample(objects: Path) -> tuple[int, int]:
    """(an estimate of all loose objects from 16 of the 256 fan-out dirs, the count in 17/).

    Cheap enough for every `call end`: object ids are uniform, so 10/ to 1f/ hold a
    sixteenth of them; 17/ is where git's own estimate looks.
    """
    counts = {fan: _count_dir(objects / f"{fan:02x}") for fan in range(0x10, 0x20)}
    return sum(counts.values()) * 16, counts[0x17]


def gc_auto(repo: pygit2.Repository) -> int:
    try:
        value = int(str(repo.config["gc.auto"]))
    except (KeyError, ValueError, pygit2.GitError):
        return DEFAULT_GC_AUTO
    return value if value > 0 else DEFAULT_GC_AUTO


# --- the record of our packs ----------------------------------------------------------

def _state_path(store: Store) -> Path:
    return store.root / "packs.json"


def read_state(store: Store) -> dict[str, Any]:
    try:
        value = json.loads(_state_path(store).read_bytes())
    except (FileNotFoundError, ValueError):
        return {"packs": [], "tips": [], "baseline": [0, 0]}
    return value if isinstance(value, dict) else {"packs": [], "tips": [], "baseline": [0, 0]}


def _write_state(store: Store, state: dict[str, Any]) -> None:
    durable.atomic_write(_state_path(store), durable.canonical_json(state) + b"\n")


def own_packs(store: Store) -> list[dict[str, Any]]:
    """Our packs that still exist (the user's own `git gc` may have folded them away)."""
    pack_dir = objects_dir(store.ws) / "pack"
    return [p for p in read_state(store).get("packs", [])
            if (pack_dir / f"{p['name']}.pack").exists()]


# --- packing --------------------------------------------------------------------------

def maybe_pack(store: Store, repo: pygit2.Repository) -> PackStats | None:
    """The cheap check after each call (no daemon): pack once we added enough loose objects.

    Packs when the loose objects grew by gc.auto/8 since our last pack, or when git's own
    sample (objects/17/) grew by half of what makes `git gc --auto` start. Under the lock.
    """
    limit = gc_auto(repo)
    if len(own_packs(store)) > MAX_OWN_PACKS:      # snapshot packs (pack_writer) add up
        return pack_gitguard_objects(store)
    state = read_state(store)
    base_total, base_17 = state.get("baseline", [0, 0])
    total, in_17 = loose_sample(objects_dir(store.ws))
    sample_limit = -(-limit // 256)
    if total - base_total < max(limit // 8, 64) and in_17 - base_17 < max(1, sample_limit // 2):
        return None
    return pack_gitguard_objects(store)


def pack_gitguard_objects(store: Store, *, merge: bool = False,
                          drop_unreachable: bool = False,
                          merge_window: int = MERGE_WINDOW) -> PackStats:
    """Pack the loose objects only gitguard's refs reach; merge our packs as they add up.

    The store lock is taken only to read and change the record of our packs (packs.json)
    and to delete packs: git writes a pack without it, so a daemon packing on its own
    thread keeps answering calls meanwhile (a merge of 40,000 objects took 22 s while
    holding the lock). A caller that holds the lock already (`gitguard gc`) keeps it
    throughout. The daemon calls this periodically, `call end` through `maybe_pack`;
    `gitguard gc` asks for a merge of all our packs that drops objects nothing reaches
    (`merge_window`: the merge's delta search width).
    """
    started = time.perf_counter()
    stats = PackStats()
    ws = store.ws
    objects = objects_dir(ws)
    repo = pygit2.Repository(str(ws.git_dir))
    with store.writing():
        state = settle(store)
        stats.loose_before = loose_count(objects)[0]
        # The tips as they are now: this run packs what they reach; the next one stops there.
        tips = sorted({str(ref.target) for ref in repo.references.iterator()
                       if ref.name.startswith(GITGUARD_REFS)})
    if tips:
        _pack_new(store, repo, tips, state, stats)
    packs = own_packs(store)
    if drop_unreachable or merge:
        chosen = packs if drop_unreachable or len(packs) > 1 else []
    else:
        # Beside the agent's calls (the daemon's packer, `call end`): a narrower search on
        # one thread. gitguard gc's merge is where size is the point.
        chosen = to_merge(objects / "pack", packs)
        merge_window = INCREMENTAL_WINDOW
    if chosen:
        _merge(store, repo, tips, chosen, stats, drop_unreachable, merge_window,
               threads=None if merge or drop_unreachable else 1)
    run_git(["prune-packed", "-q"], git_dir=ws.git_dir)
    with store.writing():
        stats.loose_after = loose_count(objects)[0]
        state = read_state(store)
        state["baseline"] = list(loose_sample(objects))
        state["tips"] = tips
        _write_state(store, state)
        packs = own_packs(store)
        stats.own_packs = len(packs)
        stats.own_pack_bytes = sum(_pack_size(objects / "pack", p["name"]) for p in packs)
        stats.duration_ms = (time.perf_counter() - started) * 1000
        trace_log.emit(store, "gc", "gc.pack", duration_ms=stats.duration_ms,
                       objects=stats.objects, packBytes=stats.pack_bytes,
                       looseBefore=stats.loose_before, looseAfter=stats.loose_after,
                       mergedPacks=stats.merged_packs, dropped=stats.dropped)
    return stats


def to_merge(pack_dir: Path, packs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Which of our packs to merge now: git's geometric rule (`git repack --geometric=2`).

    Sorted by object count, each pack should hold at least twice the next smaller one.
    The smaller packs below the largest break of that rule are merged, and with them any
    larger pack the merged one would not be half of. Like a binary counter, an object is
    rewritten about log2(packs) times over a session, where merging all our packs once
    they were many rewrote every object each time (at 13,000 calls on the 1k bench
    repository one such merge took 22 s). Past MAX_OWN_PACKS (far below git's
    gc.autoPackLimit) the smallest are merged whatever their sizes.
    """
    sized = sorted(((_pack_count(pack_dir, p["name"]), p) for p in packs
                    if (pack_dir / f"{p['name']}.idx").exists()), key=lambda s: s[0])
    split = 0
    for i in range(len(sized) - 1, 0, -1):
        if sized[i][0] < GEOMETRIC_FACTOR * sized[i - 1][0]:
            split = i + 1
            break
    if split:
        total = sum(count for count, _ in sized[:split])
        while split < len(sized) and sized[split][0] < GEOMETRIC_FACTOR * total:
            total += sized[split][0]
            split += 1
    while len(sized) - max(split - 1, 0) > MAX_OWN_PACKS:
        split = max(split + 1, 2)
    return [p for _, p in sized[:split]]


def _user_side(repo: pygit2.Repository) -> list[str]:
    """rev-list options naming everything the user's state reaches (to leave it out).

    Commits alone are not enough: rev-list marks only *edge* commits' trees
    uninteresting, and our snapshot chains share no history with the user's. The
    index and HEAD's tree name the blobs and trees a snapshot shares with the user.
    """
    args = ["--not", "--exclude=refs/gitguard/*", "--all", "--indexed-objects"]
    if not repo.is_bare and not repo.head_is_unborn:
        args.append(f"{repo.head.target}^{{tree}}")
    return args


def _rev_list(ws: Workspace, revs: list[str], options: list[str]) -> list[tuple[str, str]]:
    """`git rev-list --objects`: `revs` (refs, ^oids) on stdin, pseudo-options after."""
    out = run_git(["rev-list", "--objects", "--stdin", *options], git_dir=ws.git_dir,
                  stdin="".join(f"{r}\n" for r in revs).encode()).stdout
    listed = []
    for line in out.decode(errors="surrogateescape").splitlines():
        oid, _, path = line.partition(" ")
        listed.append((oid, path))
    return listed


def _is_loose(objects: Path, oid: str) -> bool:
    return (objects / oid[:2] / oid[2:]).exists()


def _pack_new(store: Store, repo: pygit2.Repository, tips: list[str], state: dict[str, Any],
              stats: PackStats) -> None:
    objects = objects_dir(store.ws)
    # Tips packed last time: their objects are packed, so the walk stops there.
    seen = [f"^{t}" for t in state.get("tips", []) if t in repo]
    listed = _rev_list(store.ws, [*tips, *seen], _user_side(repo))
    loose = [(oid, path) for oid, path in listed if _is_loose(objects, oid)]
    if not loose:
        return
    name = _write_pack(store, loose, incremental=True)
    if name is not None:
        with store.writing():
            record(store, name)
        stats.objects += _pack_count(objects / "pack", name)
        stats.pack_bytes += _pack_size(objects / "pack", name)
        # The loose files of what the new pack holds (by its index, not by what we asked
        # for) are the next loose objects' files; the rest is prune-packed's to check.
        table = _oid_table(objects / "pack", name)
        held = {table[at:at + 20] for at in range(0, len(table), 20)}
        stats.set_aside = spare_objects.set_aside(
            os.fsencode(store.root), os.fsencode(objects),
            [oid for oid, _ in loose if bytes.fromhex(oid) in held])


def _write_pack(store: Store, listed: list[tuple[str, str]], incremental: bool,
                recompress: bool = False, window: int = MERGE_WINDOW) -> str | None:
    objects = objects_dir(store.ws)
    args = ["pack-objects", "-q", "--delta-base-offset",
            f"--window={INCREMENTAL_WINDOW if incremental else window}", "--depth=50"]
    if incremental:
        args.append("--incremental")
    if recompress:
        # Snapshot packs store trees uncompressed (pack_writer: cheaper per call), and a merge
        # that reuses entries keeps the trees git leaves as delta bases that way. `gitguard
        # gc`, where size is the point, deflates and delta-searches every object afresh.
        args.append("--no-reuse-object")
    payload = "\n".join(f"{oid} {path}".rstrip() for oid, path in listed) + "\n"
    out = run_git([*args, str(objects / "pack" / "pack")], git_dir=store.ws.git_dir,
                  stdin=payload.encode(errors="surrogateescape")).stdout.decode().strip()
    if not out:
        return None
    name = f"pack-{out.splitlines()[-1]}"
    if _pack_count(objects / "pack", name) == 0:
        # --incremental found everything packed already: the empty pack is ours to drop.
        _delete_pack(objects / "pack", name)
        return None
    return name


def _mtime(pack_dir: Path, name: str) -> int:
    try:
        return (pack_dir / f"{name}.pack").stat().st_mtime_ns
    except FileNotFoundError:
        return -1


def record(store: Store, name: str, state: dict[str, Any] | None = None,
           sync: bool = True) -> None:
    """Name a pack of ours in packs.json: before it is visible, for a new one.

    `sync=False` (a snapshot's pack, pack_writer.publish): replaced but not fsynced, two
    fsyncs fewer per 100-file snapshot (4-6 ms each on a slow disk). The record is the
    intent for a killed writer (`settle`), and a kill leaves the page cache: it is
    read back. A power cut may lose it, as it may lose the snapshot's loose commit
    (not fsynced, as libgit2's): the pack stays an ordinary pack, which git's gc
    handles and ours leaves alone."""
    state = read_state(store) if state is None else state
    packs = [p for p in state.get("packs", []) if p["name"] != name]
    packs.append({"name": name})
    state["packs"] = packs
    if sync:
        _write_state(store, state)
        return
    path = _state_path(store)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, durable.FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(durable.canonical_json(state) + b"\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _merge(store: Store, repo: pygit2.Repository, tips: list[str],
           packs: list[dict[str, Any]], stats: PackStats, drop_unreachable: bool,
           window: int, threads: int | None = None) -> None:
    """One pack of ours in place of `packs`, written without the store lock (see
    pack_gitguard_objects); recorded, and the old ones deleted, under it."""
    ws = store.ws
    pack_dir = objects_dir(ws) / "pack"
    if not drop_unreachable and git_version(ws.git_dir) >= STDIN_PACKS_SINCE:
        new = _write_pack_of_packs(store, packs, window, threads)
        lacking = [p["name"] for p in packs if not _holds_all(pack_dir, new, p["name"])]
        if lacking:
            raise GitguardError(f"the merged gitguard pack {new} lacks objects of {lacking[0]}",
                                "nothing was deleted; run `git fsck` and report this")
        _replace(store, packs, new, stats)
        return
    members: set[str] = set()
    for pack in packs:
        members |= _pack_members(ws, pack_dir, pack["name"])
    # git "freshens" (touches) a pack when a write finds its object there: a change of
    # mtime while we merge means someone just began to use an object we might drop.
    started = {p["name"]: _mtime(pack_dir, p["name"]) for p in packs}
    # The walk names each object by its path: pack-objects deltas blobs of one path together.
    named = _rev_list(ws, tips, _user_side(repo)) if tips else []
    keep = members
    if drop_unreachable:
        reached = {oid for oid, _ in _rev_list(ws, [], ["--all", "--reflog",
                                                         "--indexed-objects"])}
        keep = members & reached
    in_named = {oid for oid, _ in named}
    listed = [(oid, path) for oid, path in named if oid in keep]
    listed += [(oid, "") for oid in sorted(keep - in_named)]
    if not listed:
        return
    made = _write_pack(store, listed, incremental=False, recompress=drop_unreachable,
                       window=window)
    if made is None:
        return
    if not keep <= _pack_members(ws, pack_dir, made):
        raise GitguardError("the merged gitguard pack lacks objects of the packs it replaces",
                            "nothing was deleted; run `git fsck` and report this")
    _replace(store, packs, made, stats, started if keep != members else None,
             len(members - keep))


def _write_pack_of_packs(store: Store, packs: list[dict[str, Any]], window: int,
                         threads: int | None) -> str:
    """`pack-objects --stdin-packs`: one pack of every object of `packs`, which git reads
    and names (for its delta search) itself. Listing them in Python instead (a rev-list
    of every snapshot: 40,000 lines at 13,000 calls) made a peak of small objects on the
    daemon's packer thread that the process kept as half-used arenas: RSS grew ~3 MiB per
    1,000 calls on the 1k bench repository."""
    pack_dir = objects_dir(store.ws) / "pack"
    names = "".join(f"{p['name']}.pack\n" for p in packs)
    # threads: None lets git use every core (pack.threads); a merge beside the agent's
    # calls takes one and leaves the others to them.
    many = [] if threads is None else [f"--threads={threads}"]
    out = run_git(["pack-objects", "-q", "--stdin-packs", "--delta-base-offset", *many,
                   f"--window={window}", "--depth=50", str(pack_dir / "pack")],
                  git_dir=store.ws.git_dir, stdin=names.encode()).stdout.decode().strip()
    return f"pack-{out.splitlines()[-1]}"


def _replace(store: Store, packs: list[dict[str, Any]], new: str, stats: PackStats,
             started: dict[str, int] | None = None, dropped: int = 0) -> None:
    """Record the merged pack `new`, then delete `packs`, under the lock. `started`: the
    old packs' mtimes before a merge that left objects out (see _merge)."""
    pack_dir = objects_dir(store.ws) / "pack"
    with store.writing():
        record(store, new)
        faults.point("pack.before_delete")
        if started is not None and any(_mtime(pack_dir, n) != m for n, m in started.items()):
            stats.notes.append("kept the old packs: git used one of them while we merged")
            return
        old = [p["name"] for p in packs if p["name"] != new]
        for name in old:
            _delete_pack(pack_dir, name)
        state = read_state(store)
        state["packs"] = [p for p in state["packs"] if p["name"] not in old]
        _write_state(store, state)
    stats.merged_packs += len(old)
    stats.dropped += dropped
    stats.objects += _pack_count(pack_dir, new)
    stats.pack_bytes += _pack_size(pack_dir, new)


def settle(store: Store, state: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a killed snapshot-pack writer (pack_writer.publish) left: a recorded pack
    without its .idx was never published, and nothing names its objects (the commit
    and its ref come after both renames), so its files go. Under the store lock.
    Returns the state as it is now (`state`: packs.json as just read by the caller)."""
    state = read_state(store) if state is None else state
    pack_dir = objects_dir(store.ws) / "pack"
    kept = []
    for pack in state.get("packs", []):
        name = pack["name"]
        if (pack_dir / f"{name}.idx").exists():
            kept.append(pack)
            continue
        # Also a pack the user's `git gc` folded away: both files are gone already.
        for path in (pack_dir / f"{TMP_PREFIX}{name}.pack", pack_dir / f"{TMP_PREFIX}{name}.idx",
                     pack_dir / f"{name}.pack"):
            path.unlink(missing_ok=True)
    if len(kept) != len(state.get("packs", [])):
        state["packs"] = kept
        _write_state(store, state)
    return state


def _pack_members(ws: Workspace, pack_dir: Path, name: str) -> set[str]:
    with open(pack_dir / f"{name}.idx", "rb") as fh:
        out = run_git(["show-index"], git_dir=ws.git_dir, stdin=fh.read()).stdout
    return {line.split()[1] for line in out.decode().splitlines() if line.strip()}


def _pack_count(pack_dir: Path, name: str) -> int:
    """The object count from the .idx header."""
    with open(pack_dir / f"{name}.idx", "rb") as fh:
        return _idx_count(fh, name)


def _oid_table(pack_dir: Path, name: str) -> bytes:
    """The sorted 20-byte object ids of a pack index, as one bytes object."""
    with open(pack_dir / f"{name}.idx", "rb") as fh:
        return fh.read(20 * _idx_count(fh, name))


def _idx_count(fh: BinaryIO, name: str) -> int:
    """Reads a version 2 index's header (magic, version, 256-entry fan-out): its count."""
    head = fh.read(8 + 256 * 4)
    if head[:4] != b"\xfftOc":
        raise GitguardError(f"{name}.idx is not a version 2 pack index",
                            "run `git fsck`; gitguard only reads indexes it wrote")
    return int(struct.unpack(">I", head[-4:])[0])


def _holds_all(pack_dir: Path, name: str, other: str) -> bool:
    """Whether pack `name` has every object of pack `other`: a walk of both sorted id
    tables, no set of 40,000 strings."""
    have, want = _oid_table(pack_dir, name), _oid_table(pack_dir, other)
    at = 0
    for start in range(0, len(want), 20):
        oid = want[start:start + 20]
        while at < len(have) and have[at:at + 20] < oid:
            at += 20
        if have[at:at + 20] != oid:
            return False
    return True


def _pack_size(pack_dir: Path, name: str) -> int:
    total = 0
    for ext in PACK_EXTS:
        try:
            total += (pack_dir / f"{name}{ext}").stat().st_size
        except FileNotFoundError:
            continue
    return total


def _delete_pack(pack_dir: Path, name: str) -> None:
    if (pack_dir / f"{name}.keep").exists():
        return  # someone asked git to keep it; so do we
    for ext in PACK_EXTS:  # .idx first: no new reader finds the pack while it goes
        (pack_dir / f"{name}{ext}").unlink(missing_ok=True)
