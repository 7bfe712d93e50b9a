"""Helpers for rollback tests: a byte-exact picture of the working tree, and small file ops."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

Entry = tuple[str, bytes, bool]      # ("file", content, executable) or ("link", target, False)


def tree_state(root: Path) -> dict[str, Entry]:
    """Every file and symlink under root except .git, exact to the byte and the exec bit."""
    found: dict[str, Entry] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root and ".git" in dirnames:
            dirnames.remove(".git")
        for name in filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            info = os.lstat(full)
            if stat.S_ISLNK(info.st_mode):
                found[rel] = ("link", os.readlink(os.fsencode(full)), False)
            else:
                found[rel] = ("file", full.read_bytes(), bool(info.st_mode & stat.S_IXUSR))
    return found


def put(root: Path, rel: str, entry: Entry | None) -> None:
    """Make a path hold an entry (never writing through a symlink), or remove it."""
    full = root / rel
    if os.path.lexists(full):
        os.unlink(full)
    if entry is None:
        return
    full.parent.mkdir(parents=True, exist_ok=True)
    kind, data, executable = entry
    if kind == "link":
        os.symlink(data, os.fsencode(full))
    else:
        full.write_bytes(data)
        os.chmod(full, 0o755 if executable else 0o644)


def run_git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True,
                          text=True).stdout


def one_file_repo(path: Path, name: str, data: bytes) -> Path:
    """A repository whose one commit holds one file."""
    path.mkdir()
    run_git(path, "init", "-q")
    (path / name).write_bytes(data)
    run_git(path, "add", name)
    run_git(path, "commit", "-qm", "base")
    return path


def make_repo(path: Path) -> Path:
    """A repository with tracked files, ignored build output, .env and an oversized file."""
    path.mkdir()
    run_git(path, "init", "-q")
    (path / "a.txt").write_text("tracked a\n")
    (path / "d").mkdir()
    (path / "d" / "c.txt").write_text("tracked c\n")
    (path / ".gitignore").write_text("build/\n*.log\n.env\n")
    run_git(path, "add", "-A")
    run_git(path, "commit", "-qm", "initial")
    (path / ".env").write_text("SECRET=1\n")
    (path / "build").mkdir()
    (path / "build" / "out.bin").write_bytes(b"\x00\x01build output")
    (path / "notes.txt").write_text("the user's untracked notes\n")
    (path / "large.dat").write_bytes(b"L" * 70_000)      # over the tests' size cap
    return path
