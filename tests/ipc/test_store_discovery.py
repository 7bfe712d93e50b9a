"""One store discovery (gitguard.store_discovery): `workspace.discover` and the hooks'
`find_store` find the same store from every directory of the layouts people use, and the
git dir and working tree are the ones git itself reports."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gitguard.errors import NotAWorkspace
from gitguard.store_discovery import find_store
from gitguard.workspace import discover
from tests.helpers.commands import git


def _git_says(start: Path) -> tuple[Path, Path | None] | None:
    """(git dir, top level) as `git rev-parse` reports them from `start` (no top level
    inside a git dir); None outside any repository."""
    def ask(what: str) -> Path | None:
        proc = subprocess.run(["git", "rev-parse", what], cwd=start, capture_output=True,
                              text=True)
        return Path(proc.stdout.strip()).resolve() if proc.returncode == 0 else None

    git_dir = ask("--absolute-git-dir")
    return None if git_dir is None else (git_dir, ask("--show-toplevel"))


def _layouts(tmp: Path) -> list[Path]:
    """Directories to start from, one per kind of place."""
    repo = tmp / "repo"
    git(tmp, "init", "-q", str(repo))
    (repo / "src" / "deep").mkdir(parents=True)
    (repo / "f.txt").write_text("x\n")
    git(repo, "add", "f.txt")
    git(repo, "commit", "-qm", "one")
    git(repo, "worktree", "add", "-q", str(tmp / "side"))
    (tmp / "side" / "sub").mkdir()
    git(tmp, "init", "-q", "--separate-git-dir", str(tmp / "elsewhere.git"), str(tmp / "sep"))
    git(repo, "init", "-q", "inner")                     # a repository inside a repository
    (repo / "broken" / ".git").mkdir(parents=True)       # not a repository: git skips it
    (repo / "plain-store" / ".agent-runtime").mkdir(parents=True)   # git wins over it
    plain = tmp / "plain"
    (plain / "a" / "b").mkdir(parents=True)
    (plain / ".agent-runtime").mkdir()
    (tmp / "nothing" / "here").mkdir(parents=True)
    return [repo, repo / "src" / "deep", repo / ".git", repo / ".git" / "refs", tmp / "side",
            tmp / "side" / "sub", tmp / "sep", repo / "inner", repo / "broken",
            repo / "plain-store", plain, plain / "a" / "b", tmp / "nothing" / "here"]


def test_discover_and_find_store_agree_with_git_everywhere(tmp_path: Path) -> None:
    for start in _layouts(tmp_path):
        ws = discover(start)
        found = find_store(str(start))
        said = _git_says(start)
        if said is not None:
            assert ws.git_dir == said[0], start
            assert ws.root == (said[1] or said[0].parent), start
        else:
            assert not ws.is_git, start
        if found is None:
            assert not ws.is_git and not ws.store_dir.exists(), start
            continue
        assert Path(found[1]).resolve() == ws.store_dir, start
        assert Path(found[0]).resolve() == ws.root, start


def test_a_ceiling_stops_both_where_git_stops(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", str(repo))
    (repo / "below").mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(repo))
    assert _git_says(repo / "below") is None
    assert find_store(str(repo / "below")) is None
    ws = discover(repo / "below")
    assert not ws.is_git and ws.root == (repo / "below").resolve()
    assert find_store(str(repo)) == (str(repo), str(repo / ".git" / "gitguard"))


def test_with_git_dir_set_both_take_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, tree = tmp_path / "repo", tmp_path / "tree"
    git(tmp_path, "init", "-q", str(repo))
    tree.mkdir()
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(tree))
    ws = discover(tree)
    assert (ws.root, ws.store_dir) == (tree.resolve(), (repo / ".git" / "gitguard").resolve())
    assert find_store(str(tree)) == (str(tree), str(repo / ".git" / "gitguard"))
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(NotAWorkspace, match="GIT_DIR="):
        discover(tree)


def test_a_bare_repository_has_no_store_for_either(tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    for start in (bare, bare / "refs"):
        assert find_store(str(start)) is None
        with pytest.raises(NotAWorkspace, match="bare repository"):
            discover(start)
    assert os.listdir(bare / "refs" / "heads") == []
