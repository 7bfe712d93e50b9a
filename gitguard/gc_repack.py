"""`gitguard gc --repack-repository`: the whole repository in one pack, on request only.

A pack of gitguard's own cannot store its objects as deltas of the user's (a pack's
deltas name bases inside the same pack), so the first snapshot of each file the agent
touched is stored whole: about 2.4 MB for 1,000 one-line edits to 1,000 different files
of a 100k-file repository. `git repack` of the whole repository stores those as deltas
of the user's versions instead (a few KB); the user's own next `git gc` does the same.

This rewrites the user's packs, which gitguard otherwise never does, so it runs only
when asked (`--repack-repository`, or `[gc] repack_repository = true`) and only with
git's cruft packs (git 2.37+): `git repack -a -d -l --cruft` without an expiry keeps
every unreachable object (a dropped stash's, say) in a cruft pack with its mtime, so
git's own prune schedule still applies and nothing is lost. Packs marked `.keep` stay
as they are (git's rule). Refs, the index, HEAD and the reflogs are not touched.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitguard import faults, packing
from gitguard.errors import GitguardError
from gitguard.gitcmd import run_git
from gitguard.store import Store

CRUFT_SINCE = (2, 37)


@dataclass
class RepackStats:
    packs_before: int
    bytes_before: int
    packs_after: int = 0
    bytes_after: int = 0
    duration_ms: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"packsBefore": self.packs_before, "bytesBefore": self.bytes_before,
                "packsAfter": self.packs_after, "bytesAfter": self.bytes_after,
                "durationMs": round(self.duration_ms, 3)}


def git_version(store: Store) -> tuple[int, int]:
    out = run_git(["version"], git_dir=store.ws.git_dir).stdout.decode(errors="replace")
    found = re.search(r"(\d+)\.(\d+)", out)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def check_possible(store: Store) -> None:
    """Refuse before gc changes anything: a repository repack needs cruft packs."""
    if not store.ws.is_git:
        raise GitguardError("--repack-repository needs a git repository; this store keeps "
                            "its objects in .agent-runtime/",
                            "run `gitguard gc` without --repack-repository")
    version = git_version(store)
    if version < CRUFT_SINCE:
        raise GitguardError(
            f"--repack-repository needs git {CRUFT_SINCE[0]}.{CRUFT_SINCE[1]} or newer "
            f"(cruft packs keep your unreachable objects); this is git "
            f"{version[0]}.{version[1]}",
            "upgrade git, or run `gitguard gc` without it (gitguard packs only its own objects)")


def repack_repository(store: Store) -> RepackStats:
    """One `git repack` of the whole object store; under the caller's store lock."""
    started = time.perf_counter()
    pack_dir = packing.objects_dir(store.ws) / "pack"
    before = _packs(pack_dir)
    stats = RepackStats(packs_before=len(before), bytes_before=sum(before.values()))
    run_git(["repack", "-a", "-d", "-l", "-q", "--cruft"], git_dir=store.ws.git_dir)
    faults.point("gc.after_repack")
    # Our packs went into git's: forget their names, and count loose objects afresh.
    packing.settle(store)
    state = packing.read_state(store)
    state["baseline"] = list(packing.loose_sample(packing.objects_dir(store.ws)))
    packing._write_state(store, state)
    after = _packs(pack_dir)
    stats.packs_after, stats.bytes_after = len(after), sum(after.values())
    stats.duration_ms = (time.perf_counter() - started) * 1000
    return stats


def _packs(pack_dir: Path) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for path in pack_dir.glob("pack-*.pack"):
        name = path.name[:-len(".pack")]
        sizes[name] = packing._pack_size(pack_dir, name)
    return sizes
