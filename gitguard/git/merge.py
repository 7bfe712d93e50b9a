"""Three-way merge of bytes with real git (`git merge-file --diff3`), any encoding.

pygit2's merge_file_from_index decodes to str (it raises on text that is not UTF-8
and crashes on binary input); `git merge-file` works on the bytes of three files.
Binary content is detected like git does: a NUL byte in the first 8000 bytes.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

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
