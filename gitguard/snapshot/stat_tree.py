"""The no-daemon snapshot between scans: the tree last written, and where the private
stat index lags behind it.

`git update-index` rewrites the whole stat index (7.8 MB and its SHA-1 at 100k
files, ~90 ms) and `git write-tree` reads it all again (~100 ms), for a call that
changed one file. Instead the new tree is the previous one plus the changed paths
(`tree_build.IncrementalTree`, the daemon's builder, same rules as the scan), and the
stat index is left behind at those paths: they are the *lag*. What holds:

    the state's tree == the stat index's tree, except at the lag paths.

So a scan's changes since the state's tree are what `git status` reports against
the stat index plus the lag paths (a lag path may have gone back to the index's
content, which git then no longer reports). The lag is flushed (update-index of the
lag paths and write-tree, the old way) once it holds more than `LAG_MAX` paths, so
git's scan never re-hashes more than that many lagging files.

The state is valid only for the stat index it was saved with (its trailing
checksum): git status rewrites the index only to refresh stat data or its untracked
cache, never an entry's content, and the state is saved again with the new checksum
after each scan. Any other index, a lost or torn state file, a tree not in the
repository: the git way runs and a new state is saved. It is not fsynced: an older
state whose checksum still matches stays true (the index did not change since, and
the lag it names is still where the index may differ), so a lost write only costs a
git write-tree later.

Content git converts on the way in (attributes, autocrlf: `filters.needs_git_filters`),
a changed `.gitattributes`, a name that is not UTF-8, a nested repository and a
workspace outside git keep the git way throughout.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pygit2

from gitguard import faults
from gitguard.errors import GitguardError
from gitguard.git.objects import GITLINK
from gitguard.storage import durable

if TYPE_CHECKING:
    from gitguard.git.objects import TreeResult
    from gitguard.snapshot.snapshotter import Snapshotter

LAG_MAX = 256               # lagging paths before a flush: each costs git a re-hash a scan
STATE_NAME = "stat.state"
_ATTRIBUTES = b".gitattributes"


@dataclass(frozen=True)
class LagState:
    index: str                      # the stat index's trailing checksum it goes with
    tree: str                       # the tree last written
    lag: frozenset[bytes]           # paths where the stat index may differ from `tree`
    skipped: tuple[str, ...]        # what `tree` left out (big untracked files, dep dirs)
    converting: tuple[str, ...] | None  # attribute files that convert content; None: unknown


def path_of(store_root: Path) -> Path:
    return store_root / STATE_NAME


def load(store_root: Path, stat_index: Path) -> LagState | None:
    """The saved state when it goes with the stat index as it is now, else None."""
    try:
        data = json.loads(path_of(store_root).read_bytes())
        state = LagState(index=str(data["index"]), tree=str(data["tree"]),
                         lag=frozenset(os.fsencode(p) for p in data["lag"]),
                         skipped=tuple(str(s) for s in data["skipped"]),
                         converting=(None if data["converting"] is None
                                     else tuple(str(c) for c in data["converting"])))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return state if state.index == index_checksum(stat_index) else None


def save(store_root: Path, stat_index: Path, tree: str, lag: Iterable[bytes],
         skipped: Iterable[str], converting: tuple[str, ...] | None,
         expect: str | None = None) -> None:
    """`expect`: the checksum the tree was built against, for an index someone else may
    write (the user's, at a first snapshot): if it changed since, no state is saved."""
    checksum = index_checksum(stat_index)
    target = path_of(store_root)
    if checksum is None or (expect is not None and checksum != expect):
        target.unlink(missing_ok=True)
        return
    _write(target, json.dumps({"index": checksum, "tree": tree,
                               "lag": sorted(os.fsdecode(p) for p in lag),
                               "skipped": sorted(skipped),
                               "converting": None if converting is None else list(converting)}))


def rekey(store_root: Path, old: str, index: Path) -> None:
    """The saved state of the index whose checksum was `old`, now for `index`: the same
    entries in another encoding (a v2 copy rewritten as v4), so the tree and the lag
    still hold. Any other state is left as it is (it then goes with no index: the git
    way). Written before `index` takes the stat index's name: killed between the two, the
    next scan makes the same copy again, and the state goes with it only when its bytes
    are the same (else the git way, as for any index the state does not go with)."""
    target = path_of(store_root)
    try:
        data = json.loads(target.read_bytes())
    except (OSError, ValueError):
        return
    checksum = index_checksum(index)
    if not isinstance(data, dict) or data.get("index") != old or checksum is None:
        return
    _write(target, json.dumps({**data, "index": checksum}))


def _write(target: Path, text: str) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, durable.FILE_MODE)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)     # a full disk left 0-byte temp files behind
        raise


def index_checksum(path: Path) -> str | None:
    """The trailing SHA-1 of an index file: it covers every byte before it."""
    try:
        with open(path, "rb") as fh:
            fh.seek(-20, os.SEEK_END)
            tail = fh.read(20)
    except OSError:
        return None
    # index.skipHash (newer git) leaves it all zeros: then it identifies nothing.
    return tail.hex() if len(tail) == 20 and any(tail) else None


def advance(snap: Snapshotter, state: LagState, paths: Iterable[bytes],
            skipped: Iterable[str], stat_index: Path | None = None) -> TreeResult | None:
    """The state's tree plus `paths` (and the lag), saved as the new state; None when the
    git way must build it (then nothing was saved). `stat_index`: the index the state goes
    with when it is not the private one (the user's, at a first snapshot: `first_scan`)."""
    index = stat_index if stat_index is not None else snap.store.stat_index
    from gitguard.git.objects import TreeResult, file_at
    from gitguard.git.tree_build import NeedsFullScan, needs_git_filters

    paths = list(paths)
    asked = {p.rstrip(b"/") for p in paths}
    todo = asked | state.lag
    if not snap.ws.is_git or len(todo) > LAG_MAX:
        return None
    if any(p.rsplit(b"/", 1)[-1] == _ATTRIBUTES or not p for p in todo):
        return None
    if any(p.endswith(b"/") for p in paths):
        return None     # a nested repository: update-index records it as git does
    converting = state.converting
    if converting is None:
        converting = _converting_attributes(snap, index)
    if needs_git_filters(snap.repo, converting) is not None:
        return None
    from gitguard.git.tree_build import IncrementalTree

    # Objects go loose, as `git update-index` and `git write-tree` wrote them: without the
    # daemon, `calls.end` packs them (packing.maybe_pack) once there are enough.
    builder = IncrementalTree(snap.repo, str(snap.ws.root), snap.settings.untracked_size_cap,
                              state.tree, skipped, store=None,
                              skip_dirs=snap.settings.skip_dirs)
    try:
        result = builder.advance(todo)
    except (NeedsFullScan, KeyError):
        return None
    # Killed here: the new objects are written and named by nothing; the saved state is
    # still the old one, true for the index as it is, so the next scan redoes this.
    faults.point("snapshot.after_tree")
    save(snap.store.root, index, result.tree, todo, result.skipped, converting,
         expect=state.index if stat_index is not None else None)
    # What changed: the paths whose entry differs from the old tree. Not simply what was
    # asked: git reports a lag path even when its file is as the old tree has it (the
    # stat index is behind there), and a declared path may not have been written at all.
    old, new = snap.repo.get(state.tree), snap.repo.get(result.tree)
    assert isinstance(old, pygit2.Tree) and isinstance(new, pygit2.Tree)
    changed = sorted(p for p in todo
                     if file_at(old, os.fsdecode(p)) != file_at(new, os.fsdecode(p)))
    return TreeResult(tree=result.tree, changed=tuple(os.fsdecode(p) for p in changed),
                      skipped=result.skipped, base=state.tree)


def _converting_attributes(snap: Snapshotter, index: Path) -> tuple[str, ...]:
    """Attribute files that make git convert content (the engine's rule). Asked of the
    stat index: no lag path is a .gitattributes (`advance` refuses those), so the index
    lists every one the tree holds."""
    from gitguard.git.tree_build import converting_attributes

    return tuple(converting_attributes(snap.ws.root, snap.ws.git_dir, index))


def settle(snap: Snapshotter, before: LagState, dirs: Iterable[bytes]) -> int:
    """Put into the stat index the lag paths that keep a directory untracked there though
    the tree holds them (`.claude/` after `integrate`): else every scan's first status
    collapses that directory (`?? .claude/`) and a second, narrower status lists it
    (~65 ms CPU at 100k files), until a flush past `LAG_MAX` paths. Only paths that were
    lag before this scan (`before`): a directory seen once costs nothing more.

    The entries are the tree's own (mode and id, `update-index --index-info`, no stat
    data): the index then equals the tree there by construction, so they leave the lag
    (stat_tree's invariant holds), and git's next status re-hashes each once (zero stat
    data never matches) and keeps their stat data. One index write, no re-hash, no
    write-tree. Killed after it, the state goes with the old checksum: the git way.
    How many paths it settled (0: nothing written)."""
    from gitguard.git.objects import file_at

    now = load(snap.store.root, snap.store.stat_index)
    prefixes = tuple(d for d in dirs if d.endswith(b"/"))
    if now is None or not prefixes:
        return 0
    tree = snap.repo.get(now.tree)
    if not isinstance(tree, pygit2.Tree):
        return 0
    lines: list[bytes] = []
    settled: set[bytes] = set()
    for path in sorted(before.lag & now.lag):
        if not path.startswith(prefixes):
            continue
        try:
            entry = file_at(tree, os.fsdecode(path))
        except UnicodeEncodeError:
            continue
        if entry is None or entry[0] == GITLINK:
            continue
        lines.append(b"%o %s\t%s\0" % (entry[0], entry[1].encode(), path))
        settled.add(path)
    if not lines:
        return 0
    try:
        snap._git(["update-index", "--add", "--replace", "-z", "--index-info"],
                  stdin=b"".join(lines))
    except GitguardError:
        return 0        # git wrote nothing (it writes through index.lock): all as it was
    snap._keep_private(snap.store.stat_index)
    faults.point("stat.after_settle")
    save(snap.store.root, snap.store.stat_index, now.tree, now.lag - settled, now.skipped,
         now.converting)
    return len(settled)
