"""The demo's throwaway repository and its git: shared by every chapter of `gitguard demo`."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

Echo = Callable[[str], None]

DEMO_ENV = {
    "GIT_AUTHOR_NAME": "Demo User", "GIT_AUTHOR_EMAIL": "demo@example.com",
    "GIT_COMMITTER_NAME": "Demo User", "GIT_COMMITTER_EMAIL": "demo@example.com",
}


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, **DEMO_ENV, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_OPTIONAL_LOCKS": "0"}
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True,
                          check=True).stdout


def _user_state(repo: Path) -> str:
    index = hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest()[:16]
    refs = _git(repo, "for-each-ref", "--format=%(refname)=%(objectname:short)",
                "refs/heads", "refs/tags", "refs/stash")
    return f"HEAD={_git(repo, 'rev-parse', '--short', 'HEAD').strip()} index={index} " + \
        " ".join(refs.split())


def make_repo(root: Path) -> Path:
    repo = root / "project"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "app.py").write_text("def greet(name):\n    return 'hello ' + name\n")
    (repo / "README.md").write_text("# demo project\n")
    (repo / ".gitignore").write_text("build/\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "initial commit")
    _git(repo, "tag", "v1")
    return repo
