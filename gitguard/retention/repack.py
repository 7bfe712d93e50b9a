"""The whole-repository repack at the end of `gitguard gc`, so our objects are deltas.

A pack of gitguard's own cannot store its objects as deltas of the user's (a pack's
deltas name bases inside the same pack), so the first snapshot of each file the agent
touched is stored whole: 2.40 MB for 1,000 one-line edits to 1,000 different files of
the 100k-file bench repository. `git repack` of the whole repository stores them as
deltas of the user's versions instead (0.35 MB there); the user's own next `git gc`
would do the same.

It rewrites the user's packs, so it is done the way git's own gc does it, and no more:
`git repack -a -d -l --cruft` without an expiry keeps every unreachable object (a
dropped stash's, say) in a cruft pack with its mtime, so git's prune schedule still
applies and nothing is lost; packs marked `.keep` stay as they are (git's rule); refs,
reflogs, the index and HEAD are not touched. By default (`[gc] repack_repository`) it
runs when the repository's packs are at most `repack_max_mb`: above that the copy costs
more than our objects save, and `gitguard gc` says so. Cruft packs need git 2.37+;
with an older git the default skips it (and says why), `--repack-repository` refuses.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitguard import faults
from gitguard.errors import GitguardError
from gitguard.git import packing
from gitguard.git.commands import git_version, run_git
from gitguard.storage.store import Store

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


def decide(store: Store, wanted: bool | None, enabled: bool, max_mb: float
           ) -> tuple[bool, str | None]:
    """Whether this gc repacks the repository, and if it does not by default, why.

    `wanted` is the command line's --repack-repository (True) / --no-repack-repository
    (False) / neither (None: the config decides). An explicit request that cannot run
    is an error, raised before gc changes anything.
    """
    if wanted is False or (wanted is None and not enabled):
        return False, None
    if not store.ws.is_git:     # .agent-runtime/: every object is ours and packed already
        if wanted:
            raise GitguardError("--repack-repository needs a git repository; this store "
                                "keeps its objects in .agent-runtime/",
                                "run `gitguard gc` without --repack-repository")
        return False, None
    version = git_version(store.ws.git_dir)
    if version < CRUFT_SINCE:
        why = (f"git {version[0]}.{version[1]} has no cruft packs (2.37+), which keep your "
               f"unreachable objects through a repack")
        if wanted:
            raise GitguardError(f"--repack-repository: {why}",
                                "upgrade git, or run `gitguard gc` without it")
        return False, f"left your packs alone: {why}"
    pack_dir = packing.objects_dir(store.ws) / "pack"
    size_mb = sum(_packs(pack_dir).values()) / 1e6
    if wanted is None and size_mb > max_mb:
        return False, (f"left your packs alone: they take {size_mb:.0f} MB, above "
                       f"[gc] repack_max_mb ({max_mb:g}); `gitguard gc --repack-repository` "
                       f"repacks anyway")
    return True, None


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
