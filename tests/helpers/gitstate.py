"""The user's git state that gitguard must never change (DESIGN.md invariant 1)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True,
                          env={"GIT_OPTIONAL_LOCKS": "0", "PATH": "/usr/bin:/bin",
                               "HOME": str(repo)}).stdout.decode(errors="surrogateescape")


@dataclass(frozen=True)
class GitState:
    head: str
    symbolic_head: str
    user_refs: str
    index_bytes: bytes
    config: bytes
    log_branches: str

    def assert_unchanged(self, repo: Path) -> None:
        now = capture(repo)
        assert now.head == self.head, "HEAD moved"
        assert now.symbolic_head == self.symbolic_head, "HEAD points at another branch"
        assert now.user_refs == self.user_refs, "branches, tags or stash changed"
        assert now.index_bytes == self.index_bytes, ".git/index changed"
        assert now.config == self.config, ".git/config changed"
        assert now.log_branches == self.log_branches, "git log --branches changed"


def capture(repo: Path) -> GitState:
    git_dir = Path(_git(repo, "rev-parse", "--absolute-git-dir").strip())
    index = git_dir / "index"
    listing = _git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    refs = "\n".join(ln for ln in listing.splitlines() if not ln.startswith("refs/gitguard/"))
    return GitState(
        head=_git(repo, "rev-parse", "HEAD").strip(),
        symbolic_head=(git_dir / "HEAD").read_text(),
        user_refs=refs,
        index_bytes=index.read_bytes() if index.exists() else b"",
        config=(git_dir / "config").read_bytes(),
        log_branches=_git(repo, "log", "--branches", "--format=%H"),
    )


def fsck_clean(repo: Path) -> None:
    proc = subprocess.run(["git", "fsck", "--no-progress", "--strict"], cwd=repo,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
