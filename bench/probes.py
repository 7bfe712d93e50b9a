"""What a case does to a repository between samples, and what it checks.

`Editor` makes the one-file edit that precedes every sample. `IndexProbe`
watches the user's `.git/index`: gitguard promises never to touch it, and
`git stash create` is known to rewrite it, so every row reports what happened.
"""

from __future__ import annotations

import hashlib
import os
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
