"""The first snapshot asks which `.gitattributes` the user's index lists (`git ls-files`
beside the status): attribute files that convert nothing keep the in-process tree, one
that converts takes the git way, and the tree still equals the old way's."""

from __future__ import annotations

from pathlib import Path

from gitguard.api import Guard
from gitguard.snapshot import stat_tree
from tests.helpers.commands import git
from tests.snapshot.test_first_scan import _first


def _add(repo: Path, rel: str, text: str = "*.bin -diff\n") -> None:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_first_snapshots_with_attribute_files(repo: Path, tmp_path: Path) -> None:
    """Attribute files that convert nothing keep the read-only first snapshot; a nested one
    that converts takes the git way; both trees equal the old way's."""
    _add(repo, "docs/.gitattributes", "*.png binary\n")
    _add(repo, "src/.gitattributes", "*.dat -diff\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "attributes")
    (repo / "src" / "app.py").write_text("edited\n")
    guard = Guard.init(repo)
    result = _first(guard, repo, tmp_path)
    assert "src/app.py" in result.changed
    assert not guard.store.stat_index.exists()       # read-only: no private index yet
    state = stat_tree.load(guard.store.root, repo / ".git" / "index")
    assert state is not None and state.converting == ()
    guard.close()
    git(repo, "-c", "core.hooksPath=/dev/null", "stash", "-q", "-u")
    _add(repo, "lib/deep/.gitattributes", "*.c text eol=crlf\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "converting")
    (repo / ".git" / "gitguard").rename(tmp_path / "old-store")
    guard = Guard.init(repo)
    _first(guard, repo, tmp_path)
    assert guard.store.stat_index.exists()           # content filters: the git way ran
    guard.close()
