"""Shared by the kill matrix and the kill loop: fast scratch repositories, fingerprints of what
a crash must not change, and the fault points gitguard has."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path

# The fault points the kill loop arms at random: those its operations (calls, checkpoints,
# resume, reconcile) can reach. The kill matrix covers every point in the code.
# (No lone `planned` append is left: call begin appends planned and started together.)
LEDGER_POINTS = tuple(f"ledger.{when}_{status}" for status in
                      ("started", "succeeded", "failed", "uncertain")
                      for when in ("before", "after"))
KNOWN_POINTS: tuple[str, ...] = (
    "atomic_write.before_replace", "durable.before_file_fsync", "jsonl.before_write",
    "jsonl.torn_write", "jsonl.after_fsync",
    *LEDGER_POINTS,
    "snapshot.after_update_index", "snapshot.after_tree", "snapshot.before_ref",
    "checkpoint.before_file", "checkpoint.before_index", "checkpoint.after_index",
    "resume.before_checkpoint", "resume.after_checkpoint", "resume.after_mark",
    "resume.before_done",
)

ROOT = Path(__file__).resolve().parents[2]


def fault_points_in_source() -> set[str]:
    """Every fault point the package names: literal `faults.point("...")` / `faults.active`
    calls, and the ledger's `ledger.{before,after}_<status>` points."""
    found: set[str] = set()
    for path in (ROOT / "gitguard").rglob("*.py"):
        found.update(re.findall(r'faults\.(?:point|active)\("([^"]+)"\)', path.read_text()))
    ledger = (ROOT / "gitguard" / "ledger" / "journal.py").read_text()
    assert 'faults.point(f"ledger.before_{entries[-1].status}")' in ledger
    return found | set(LEDGER_POINTS)


GIT_ENV = {"GIT_AUTHOR_NAME": "Test User", "GIT_AUTHOR_EMAIL": "user@example.com",
           "GIT_COMMITTER_NAME": "Test User", "GIT_COMMITTER_EMAIL": "user@example.com",
           "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_OPTIONAL_LOCKS": "0"}


def scratch_root() -> Path:
    """A tmpfs directory when there is one. A SIGKILL loses nothing the kernel already has,
    fsynced or not, so process-crash tests stay exact there and run ~6x faster than on a
    disk where every fsync waits for the device."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="gitguard-crash-", dir=base))


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV}
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, check=True
                          ).stdout.decode(errors="surrogateescape")


def make_repo(path: Path) -> Path:
    """A small repository with a commit, a tag, a stash and an ignored file."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("# project\n")
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text("def main():\n    return 1\n")
    (path / ".gitignore").write_text("build/\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "initial")
    git(path, "tag", "v1")
    (path / "README.md").write_text("# project\nstashed\n")
    git(path, "stash", "-q")
    (path / "build").mkdir()
    (path / "build" / "out.bin").write_bytes(b"\x00build")
    return path


def workspace_files(repo: Path) -> dict[str, str]:
    """sha256 of every file in the working tree (ignored ones too), outside .git."""
    found: dict[str, str] = {}
    for directory, dirs, files in os.walk(repo):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            path = Path(directory) / name
            found[path.relative_to(repo).as_posix()] = hashlib.sha256(
                path.read_bytes()).hexdigest()
    return found


def user_git_state(repo: Path) -> str:
    """HEAD, branches, tags, stash, index bytes and config: what gitguard must never change."""
    git_dir = repo / ".git"
    refs = "\n".join(line for line in git(repo, "for-each-ref",
                                          "--format=%(refname) %(objectname)").splitlines()
                     if not line.startswith("refs/gitguard/"))
    digest = hashlib.sha256()
    for part in (git(repo, "rev-parse", "HEAD"), (git_dir / "HEAD").read_text(), refs):
        digest.update(part.encode())
    for name in ("index", "config"):
        digest.update((git_dir / name).read_bytes())
    return digest.hexdigest()
