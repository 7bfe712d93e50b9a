"""Whether git converts content on the way in (attributes, config): when it does, the
O(changed) trees (`tree_build`) would hash the bytes on disk where git hashes converted
bytes, so snapshots go through git instead. Asked by the daemon's engine and by the
no-daemon `stat_tree`; split out of tree_build.py to keep it near 400 lines."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gitguard.git.commands import run_git

if TYPE_CHECKING:
    import pygit2

CONVERTING = (b"text", b"eol", b"crlf", b"ident", b"filter", b"working-tree-encoding")


def converts_content(attributes: bytes) -> bool:
    """Whether a .gitattributes text sets anything that changes content on the way in."""
    for line in attributes.splitlines():
        words = line.split()
        if not words or words[0].startswith(b"#"):
            continue
        for word in words[1:]:
            name = word.lstrip(b"-!").split(b"=", 1)[0]
            if name in CONVERTING:
                return True
    return False


def converting_attributes(root: Path, git_dir: Path, stat_index: Path) -> list[str]:
    """The attribute files the stat index lists that make git convert content on the way
    in (the daemon's engine and the no-daemon `stat_tree` ask the same question)."""
    out = run_git(["ls-files", "-z", "--", ":(glob)**/.gitattributes"], git_dir=git_dir,
                  work_tree=root, env={"GIT_INDEX_FILE": str(stat_index)}).stdout
    found = []
    for raw in filter(None, out.split(b"\0")):
        try:
            text = (root / os.fsdecode(raw)).read_bytes()
        except OSError:
            continue
        if converts_content(text):
            found.append(os.fsdecode(raw))
    return found


def needs_git_filters(repo: pygit2.Repository, converting: Iterable[str]) -> str | None:
    """Why blobs must be hashed by git rather than read from disk, or None.

    `converting` names the attribute files that convert content (`converts_content`).
    """
    config = repo.config
    for key, harmless in (("core.autocrlf", ("false",)), ("core.symlinks", ("true",)),
                          ("core.filemode", ("true",))):
        try:
            value = str(config[key]).lower()
        except KeyError:
            continue
        if value not in harmless:
            return f"{key} = {value}"
    if "core.attributesFile" in config:
        return "core.attributesFile is set"
    info = os.path.join(repo.path, "info", "attributes")
    if os.path.exists(info):
        return "info/attributes exists"
    found = next(iter(converting), None)
    return f"{found} converts content" if found else None


@dataclass(frozen=True)
class Conversion:
    """git's own conversion of one repository's files: `clean` (working tree → blob, as
    `git add` stores it) and `smudge` (blob → working tree, as `git checkout` writes it),
    each after the path's attributes, eol rules and filter drivers.

    git does it, not libgit2: libgit2 knows text/eol/ident but runs no clean/smudge driver
    (`filter.<name>.clean`), and a converted path whose content is compared in the wrong
    form looks like a user edit. A process per path: only rollbacks in repositories that
    convert (`needs_git_filters`) pay it, once per path the agent changed.
    """

    git_dir: Path
    root: Path

    def clean(self, path: str, data: bytes, store: bool) -> str:
        """The blob id git stores for `data` at `path` (stored too when `store`)."""
        args = ["hash-object", *(["-w"] if store else []), "--stdin", f"--path={path}"]
        out = run_git(args, git_dir=self.git_dir, work_tree=self.root, stdin=data).stdout
        return out.decode().strip()

    def smudge(self, path: str, oid: str) -> bytes:
        """What `git checkout` writes at `path` for blob `oid`."""
        return run_git(["cat-file", "--filters", f"--path={path}", oid], git_dir=self.git_dir,
                       work_tree=self.root).stdout


def conversion(repo: pygit2.Repository, root: Path, git_dir: Path, stat_index: Path
               ) -> Conversion | None:
    """The repository's Conversion when git converts content on the way in, else None
    (the bytes on disk are the blob: no process needed)."""
    if needs_git_filters(repo, converting_attributes(root, git_dir, stat_index)) is None:
        return None
    return Conversion(git_dir, root)
