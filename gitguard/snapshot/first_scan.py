"""The first no-daemon snapshot, scanned against the user's own index, read-only.

A first snapshot used to copy `.git/index` into the private stat index (7.8 MB at
100k files: a git index costs at least 62 bytes an entry before any path byte, so no
private copy fits in 5 MB), let `git status` build its untracked cache in the copy
and write it back, then `update-index` and `write-tree` the whole copy again. Here
none of that: one `git status` runs against the user's index with no optional locks
(git writes nothing: not the index, not its lock), and the tree is built in-process:

- the index's tree is HEAD's tree with the staged entries status reports (porcelain
  v2 gives each one's index mode and blob id: the X column), so no index is parsed;
- the workspace's tree is that plus the paths status reports against the index,
  read from disk (`stat_tree.advance`, the same builder as every later snapshot).

That is exactly `stat_tree`'s state, for the user's index: "the state's tree == the
stat index's tree, except at the lag paths", keyed by the user's index's checksum.
The next scan copies the user's index into the private stat index (`Snapshotter`):
a byte copy has the same checksum, so the state holds for it, and git builds its
untracked cache there as it did before; if the user's index changed meanwhile (a
`git add`, a commit), the checksums differ and the git way runs from the copy.

Which `.gitattributes` the index lists is asked of git (`ls-files`) on the other core
while the status runs: libgit2's Index lists the same entries but builds an object per
entry, 63-79 ms at 20k files against 7-8 ms for git. What is left is git's floor: at
100k files the tracked half lstats every entry (~105k newfstatat, ~0.30 CPU-s of kernel
time on the 2-core bench machine) and the untracked half reads every directory
(~26k syscalls: getdents64, openat, close; ~0.2 CPU-s), ~0.55-0.65 CPU-s in all, so
~0.3 s of wall even with both cores idle. Less needs no full walk: the user's own
untracked cache or fsmonitor (a read-only status uses them when present), or the daemon.

Anything unusual keeps the old way (None): no index or an unborn one with no
checksum, a merge in progress (unmerged entries), more than `stat_tree.LAG_MAX`
changed paths, content filters, a changed `.gitattributes`, names that are not UTF-8,
and an index the user's own git replaced while the status ran.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pygit2

from gitguard.git.commands import start_git
from gitguard.git.tree_build import converts_content, needs_git_filters
from gitguard.progress import Progress, quiet
from gitguard.snapshot import stat_tree

if TYPE_CHECKING:
    import subprocess
    from pathlib import Path

    from gitguard.git.objects import TreeResult
    from gitguard.snapshot.snapshotter import Snapshotter

Staged = dict[bytes, "tuple[int, str] | None"]


@dataclass(frozen=True)
class Scanned:
    """What the first status found when the tree could not be built in-process: the
    caller copies the user's index (it must still have `checksum`) and runs the git way
    on these paths, without a second status."""
    changed: list[bytes]
    skipped: list[str]
    checksum: str


def first_tree(snap: Snapshotter, progress: Progress = quiet) -> TreeResult | Scanned | None:
    """The workspace's tree with no private stat index yet; `Scanned` when only the scan
    could be done here; None for the old way from the start. `progress`: told how many
    changed paths the scan found, before they are stored."""
    index = snap.ws.user_index
    if not snap.ws.is_git or index is None or snap.store.stat_index.exists():
        return None
    checksum = stat_tree.index_checksum(index)
    if checksum is None or needs_git_filters(snap.repo, ()) is not None:
        return None
    # Which .gitattributes convert content: asked of the same index by git, on the other core.
    attrs = start_git(["ls-files", "-z", "--", ":(glob)**/.gitattributes"],
                      git_dir=snap.ws.git_dir, work_tree=snap.ws.root,
                      env={"GIT_INDEX_FILE": str(index)})
    try:
        snap._read_only_index = index
        try:
            out = status_output(snap, index)
            if out is None:
                return None
            staged, rest = split_status(out)
            changed, skipped = snap._scan_from(rest)
            progress(f"first snapshot: storing {len(changed)} changed path(s)")
        finally:
            snap._read_only_index = None
        listed = _listed(attrs)
        converting = None if listed is None else _converting(snap, listed)
    finally:
        if attrs.returncode is None:        # not read: a failure on the way
            attrs.kill()
            attrs.communicate()
    if stat_tree.index_checksum(index) != checksum:
        return None     # the user's git rewrote its index meanwhile: the old way decides
    scanned = Scanned(changed, skipped, checksum)
    base = index_tree(snap.repo, staged) if staged is not None else None
    if converting is None or base is None:
        return scanned
    state = stat_tree.LagState(index=checksum, tree=base, lag=frozenset(), skipped=(),
                               converting=converting)
    return stat_tree.advance(snap, state, changed, skipped, stat_index=index) or scanned


def status_output(snap: Snapshotter, index: Path) -> bytes | None:
    """`git status --untracked-files=normal`'s output, as two processes on two cores: the
    tracked half (`-uno`: the lstat of every entry, and HEAD against the index) and the
    untracked half (`ls-files --others --directory`: the walk of every directory, the
    same listing as status's `?` records, collapsed the same way; tests compare them).
    The same work as one status, in about the time of its larger half. None when the
    listing failed."""
    others = start_git(["ls-files", "-z", "--others", "--directory", "--no-empty-directory",
                        "--exclude-standard"], git_dir=snap.ws.git_dir,
                       work_tree=snap.ws.root, env={"GIT_INDEX_FILE": str(index)})
    try:
        tracked = snap._status("--untracked-files=no")
        listed, _ = others.communicate()
    finally:
        if others.returncode is None:
            others.kill()
            others.communicate()
    if others.returncode != 0:
        return None
    return tracked + b"".join(b"? " + p + b"\0" for p in listed.split(b"\0") if p)


def split_status(out: bytes) -> tuple[Staged | None, bytes]:
    """(staged entries: path -> (index mode, blob id) or None when removed from the index,
    the output without submodule records) from `git status --porcelain=v2 -z
    --no-renames --ignore-submodules=dirty`. No staged entries (None) when an entry is
    unmerged: the index then has no single tree.

    The scan proper runs with `--ignore-submodules=all`: a submodule's record is dropped
    here so the rest parses as that scan's output, after its staged commit is kept."""
    staged: Staged | None = {}
    kept: list[bytes] = []
    for token in out.split(b"\0"):
        kind = token[:1]
        if kind == b"1":
            fields = token.split(b" ", 8)
            if fields[1][:1] != b"." and staged is not None:
                mode = int(fields[4], 8)
                staged[fields[8]] = (mode, fields[7].decode()) if mode else None
            if fields[2][:1] == b"S":
                continue
        elif kind == b"u":
            staged = None
        kept.append(token)
    return staged, b"\0".join(kept)


def index_tree(repo: pygit2.Repository, staged: Staged) -> str | None:
    """The tree `git write-tree` would write from the index: HEAD's with the staged
    entries (an entry status does not report is the same in HEAD and the index)."""
    try:
        if repo.head_is_unborn:
            head = str(repo.TreeBuilder().write())
        else:
            head = str(repo.head.peel(pygit2.Tree).id)
        changes = {p.decode(): s for p, s in staged.items()}
    except (pygit2.GitError, KeyError, ValueError, UnicodeDecodeError):
        return None
    if not changes:
        return head
    from gitguard.fileops import FileState  # ~100 ms of imports: only when needed
    from gitguard.git.tree_edit import tree_with

    return tree_with(repo, head, {p: None if s is None else FileState(oid=s[1], mode=s[0])
                                  for p, s in changes.items()})


def _listed(attrs: subprocess.Popen[bytes]) -> list[bytes] | None:
    """The background `ls-files`'s paths; None if it failed."""
    out, _ = attrs.communicate()
    return [p for p in out.split(b"\0") if p] if attrs.returncode == 0 else None


def _converting(snap: Snapshotter, listed: list[bytes]) -> tuple[str, ...]:
    """`filters.converting_attributes` of the attribute files the index lists."""
    found = []
    for raw in listed:
        try:
            text = (snap.ws.root / os.fsdecode(raw)).read_bytes()
        except OSError:
            continue
        if converts_content(text):
            found.append(os.fsdecode(raw))
    return tuple(found)
