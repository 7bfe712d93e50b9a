"""Three-way merge of bytes with real git (`git merge-file --diff3`), any encoding.

pygit2's merge_file_from_index decodes to str (it raises on text that is not UTF-8
and crashes on binary input); `git merge-file` works on the bytes of three files.
Binary content is detected like git does: a NUL byte in the first 8000 bytes.
`line_hunks` is the line diff a merge's result is checked with (rollback.merge_proof).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pygit2
from pygit2.enums import DiffOption

from gitguard.errors import GitguardError
from gitguard.git.commands import run_git

BINARY_PROBE = 8000


@dataclass(frozen=True)
class Merged:
    data: bytes
    conflicts: int            # regions left with <<<<<<< ||||||| ======= >>>>>>> markers


def is_binary(data: bytes) -> bool:
    return b"\0" in data[:BINARY_PROBE]


def merge3(ours: bytes, ancestor: bytes, theirs: bytes, *, labels: tuple[str, str, str],
           git_dir: Path, scratch: Path) -> Merged:
    """Apply the ancestor→theirs change to ours; overlaps get diff3 markers (all three sides).

    `scratch` is a directory gitguard owns (inside its store), so nothing is written
    outside the workspace.
    """
    if any(is_binary(side) for side in (ours, ancestor, theirs)):
        raise GitguardError("binary content cannot be merged",
                            "choose --keep-user or --take-checkpoint")
    scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="merge-", dir=scratch))
    try:
        names = []
        for name, data in (("ours", ours), ("ancestor", ancestor), ("theirs", theirs)):
            (work / name).write_bytes(data)
            names.append(str(work / name))
        args = ["merge-file", "-p", "--diff3"]
        for label in labels:
            args += ["-L", label]
        proc = run_git([*args, *names], git_dir=git_dir, check=False)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # merge-file exits with the number of conflicts (capped at 127), or 255 on an error
    if proc.returncode < 0 or proc.returncode > 127:
        raise GitguardError(
            f"git merge-file failed: {proc.stderr.decode(errors='replace').strip()}",
            "choose --keep-user or --take-checkpoint")
    return Merged(proc.stdout, proc.returncode)


@dataclass(frozen=True)
class Hunk:
    """One difference between two texts in line numbers from 0, ends excluded: old[old:
    old_end] became new[new:new_end] (an empty range is an insertion point)."""
    old: int
    old_end: int
    new: int
    new_end: int


def lines(data: bytes) -> list[bytes]:
    """Lines as git's xdiff splits them: at b"\\n" only (a lone CR is no line end), each
    with its end; the last one may have none."""
    parts = data.split(b"\n")
    found = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        found.append(parts[-1])
    return found


def line_hunks(old: bytes, new: bytes) -> list[Hunk]:
    """The line diff of two texts, no context: libgit2's xdiff (the Myers diff `git
    merge-file` runs), so hunks fall where the merge's own do."""
    patch = pygit2.Patch.create_from(old, new, context_lines=0, interhunk_lines=0,
                                     flag=DiffOption.FORCE_TEXT)
    found: list[Hunk] = []
    for hunk in patch.hunks:
        # libgit2 numbers lines from 1; an empty side's start is the line it follows
        start = hunk.old_start - 1 if hunk.old_lines else hunk.old_start
        new_start = hunk.new_start - 1 if hunk.new_lines else hunk.new_start
        found.append(Hunk(start, start + hunk.old_lines, new_start,
                          new_start + hunk.new_lines))
    return found
