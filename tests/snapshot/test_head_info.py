"""Snapshotter.head_info reads HEAD once; it answers what pygit2's head_is_unborn,
head_is_detached and repo.head answer, in every state HEAD can be in."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pygit2

from gitguard.api import Guard
from tests.helpers.commands import git


def pygit2_way(repo: pygit2.Repository) -> tuple[str | None, str | None]:
    """head_info as it was written before: the reference answer."""
    if repo.head_is_unborn:
        target = repo.references.get("HEAD")
        name = target.target if target is not None else None
        return None, name.removeprefix("refs/heads/") if isinstance(name, str) else None
    branch = None if repo.head_is_detached else repo.head.shorthand
    return str(repo.head.target), branch


def check(path: Path) -> tuple[str | None, str | None]:
    guard = Guard.open(path)
    fresh = pygit2.Repository(str(path))
    assert guard.snap.head_info() == pygit2_way(fresh)
    return guard.snap.head_info()


def test_head_info_equals_pygit2s_answers(repo: Path, tmp_path: Path) -> None:
    head, branch = check(repo)                                  # on a branch
    assert head and branch
    git(repo, "checkout", "-q", "-b", "feature/x")               # a branch with a slash
    assert check(repo)[1] == "feature/x"
    git(repo, "pack-refs", "--all")                              # the branch only packed
    assert not (repo / ".git" / "refs" / "heads" / "feature" / "x").exists()
    assert check(repo) == (head, "feature/x")
    git(repo, "checkout", "-q", "--detach")                      # detached
    assert check(repo) == (head, None)
    git(repo, "symbolic-ref", "refs/heads/alias", "refs/heads/feature/x")
    git(repo, "symbolic-ref", "HEAD", "refs/heads/alias")        # a symbolic chain
    check(repo)
    git(repo, "checkout", "-q", "--orphan", "fresh")             # unborn
    assert check(repo) == (None, "fresh")
    empty = tmp_path / "empty"
    subprocess.run(["git", "init", "-q", "-b", "trunk", str(empty)], check=True)
    assert check(empty) == (None, "trunk")
