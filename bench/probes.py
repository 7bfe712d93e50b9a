"""What a case does to a repository between samples, and what it checks.

`Editor` makes the one-file edit that precedes every sample. `IndexProbe`
watches the user's `.git/index`: gitguard promises never to touch it, and
`git stash create` is known to rewrite it, so every row reports what happened.
`fsync_probe` says how long the disk makes an fsync wait just before and after a
case, so a row slowed by the disk's queue can be told from one slowed by our work;
`create_probe` says what creating a file costs there (see its note).
"""

from __future__ import annotations

import hashlib
import os
import statistics
import time
from pathlib import Path

from bench.shell import git


class Editor:
    """Appends one line to one tracked file per edit, a different file each time."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        listed = git(repo, "ls-files", "-z").decode().split("\0")
        self._paths = [p for p in listed if p and p != ".gitignore"]
        self._count = 0

    def pick(self) -> str:
        """The path the next edit will touch (relative, `/`-separated)."""
        # A prime stride spreads edits over the tree instead of one directory.
        return self._paths[(self._count * 7919 + 13) % len(self._paths)]

    def touch(self, rel: str) -> None:
        with open(self.repo / rel, "a", encoding="utf-8") as fh:
            fh.write(f"# bench edit {self._count}\n")
        self._count += 1

    def edit(self) -> str:
        rel = self.pick()
        self.touch(rel)
        return rel


class IndexProbe:
    """Counts rewrites of `.git/index` and whether its bytes changed."""

    def __init__(self, repo: Path) -> None:
        self._path = repo / ".git" / "index"
        self._digest = self._hash()
        self._stat = self._stat_key()
        self.checks = 0
        self.rewrites = 0

    def check(self) -> None:
        """Call after each operation; a new inode or mtime means a rewrite."""
        self.checks += 1
        key = self._stat_key()
        if key != self._stat:
            self.rewrites += 1
            self._stat = key

    def note(self) -> str:
        changed = self._hash() != self._digest
        if self.rewrites == 0 and not changed:
            return "untouched"
        text = f"rewritten {self.rewrites}/{self.checks}"
        return text + (", bytes changed" if changed else ", same bytes")

    def _stat_key(self) -> tuple[int, int, int]:
        st = os.stat(self._path)
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _hash(self) -> str:
        return hashlib.sha256(self._path.read_bytes()).hexdigest()


def fsync_probe(directory: Path, samples: int = 8) -> float:
    """Median ms of writing 4 KiB to a new file in `directory` and fsyncing it.

    The per-call rows fsync several times per sample; on a VM disk an fsync costs
    0.2 ms when idle and several ms when writeback is queued (after a large copy, or
    while another process writes). The probe is the same kind of work on the same
    file system, measured outside the timed samples."""
    waits: list[float] = []
    block = b"\0" * 4096
    for i in range(samples):
        path = directory / f".fsync-probe-{i}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, block)
            start = time.perf_counter()
            os.fsync(fd)
            waits.append((time.perf_counter() - start) * 1000)
        finally:
            os.close(fd)
            os.unlink(path)
    return statistics.median(waits)


def create_probe(directory: Path, samples: int = 32) -> float:
    """Median microseconds to create (and close) a new empty file in `directory`.

    Every snapshot creates files (loose objects, a checkpoint, temp files) and a rollback
    creates one per path it writes. On ext4 without a journal (this VM's disk) a new inode
    skips every inode of its block group deleted in the last 60-360 s (`recently_deleted`
    in fs/ext4/ialloc.c), so right after a large copy is removed a create can cost 100+
    us instead of ~10, and a fresh small copy lands in exactly those emptied groups.
    Measured in the copy's `.git/objects` (where loose objects go) before each case; the
    probe's files are removed again."""
    made: list[Path] = []
    waits: list[float] = []
    try:
        for i in range(samples):
            path = directory / f".create-probe-{os.getpid()}-{i}"
            start = time.perf_counter()
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            waits.append((time.perf_counter() - start) * 1e6)
            made.append(path)
    finally:
        for path in made:
            path.unlink(missing_ok=True)
    return statistics.median(waits)
