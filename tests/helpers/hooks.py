"""Helpers for the hook tests: git with its exit code, directory fingerprints, a bare remote."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers.commands import git
from tests.helpers.paths import FIXTURES

FIXTURE_PROJECT = "/home/user/project"  # the project path written in the fixture payloads


def run_git(repo: Path, *args: str, env: dict[str, str] | None = None,
            input: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """git with its exit code and both streams (the hooks it runs print to stderr)."""
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, **(env or {})},
                          input=None if input is None else input.decode())


def fingerprint(directory: Path) -> dict[str, tuple[str, bytes, int]]:
    """Every entry under `directory`: kind, content (or link target) and mode bits."""
    found: dict[str, tuple[str, bytes, int]] = {}
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory).as_posix()
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            found[rel] = ("link", os.readlink(path).encode(), 0)
        elif stat.S_ISDIR(info.st_mode):
            found[rel] = ("dir", b"", stat.S_IMODE(info.st_mode))
        else:
            found[rel] = ("file", path.read_bytes(), stat.S_IMODE(info.st_mode))
    return found


def write_hook(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def with_branch_and_remote(repo: Path) -> Path:
    """A second branch `other` (b.txt, a changed README) and an empty bare remote `origin`."""
    git(repo, "checkout", "-q", "-b", "other")
    (repo / "b.txt").write_text("only on other\n")
    (repo / "README.md").write_text("# project on other\n")
    git(repo, "add", "b.txt", "README.md")
    git(repo, "commit", "-qm", "other work")
    git(repo, "checkout", "-q", "main")
    remote = repo.parent / "remote.git"
    git(repo.parent, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    return remote


def payload(name: str, project: Path, **changes: Any) -> dict[str, Any]:
    """A fixture hook event with its project path moved to `project`."""
    text = (FIXTURES / name).read_text().replace(FIXTURE_PROJECT, str(project))
    event: dict[str, Any] = json.loads(text)
    event.update(changes)
    return event


def hook_cc(project: Path, event: dict[str, Any],
            env: dict[str, str] | None = None) -> dict[str, Any]:
    """Feed one event to the real `gitguard hook claude-code`; it must exit 0 with JSON."""
    proc = subprocess.run([sys.executable, "-m", "gitguard", "hook", "claude-code"], cwd=project,
                          input=json.dumps(event), capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer
