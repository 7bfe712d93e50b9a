"""The first snapshot reads which `.gitattributes` the user's index lists from the index's
own bytes (`firstsnap.indexed_attributes`) instead of a third git process: the list
equals `git ls-files -- ':(glob)**/.gitattributes'` of the same index, or is None (ask
git) where the bytes do not say it plainly; and the tree still equals the old way's."""

from __future__ import annotations

import random
from pathlib import Path

from gitguard import statlag
from gitguard.api import Guard
from gitguard.firstsnap import indexed_attributes
from tests.helpers.commands import git
from tests.snapshot.test_first_scan import _first


def _listed_by_git(repo: Path) -> list[bytes]:
    out = git(repo, "ls-files", "-z", "--", ":(glob)**/.gitattributes")
    return [p.encode(errors="surrogateescape") for p in out.split("\0") if p]


def _ours(repo: Path) -> list[bytes] | None:
    index = repo / ".git" / "index"
    checksum = statlag.index_checksum(index)
    assert checksum is not None
    return indexed_attributes(index, checksum)


def _add(repo: Path, rel: str, text: str = "*.bin -diff\n") -> None:
    path = repo / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_index_bytes_list_what_ls_files_lists(repo: Path) -> None:
    """Root, nested and deep attribute files, long paths (the flags' length spills into
    their high byte), look-alike names, an assume-unchanged entry, random neighbours."""
    assert _ours(repo) == _listed_by_git(repo) == []
    _add(repo, ".gitattributes")
    _add(repo, "a/b/.gitattributes")
    _add(repo, "x.gitattributes")                        # a look-alike: not listed
    _add(repo, "dir.gitattributes/.gitattributes")
    _add(repo, ".gitattributes.d/.gitattributes")
    long_dir = "/".join(["d" * 60] * 5)                   # a 300+ byte path
    _add(repo, f"{long_dir}/.gitattributes")
    _add(repo, f"{long_dir}/{'e' * 200}/.gitattributes")  # 500+ bytes
    rng = random.Random(7)
    for n in range(300):
        depth = rng.randint(0, 3)
        parts = ["".join(rng.choice("abc._-") for _ in range(rng.randint(1, 9)))
                 for _ in range(depth)]
        name = rng.choice([".gitattributes", f"f{n}.txt", f"g{n}.gitattributes"])
        rel = "/".join([*parts, name])
        if not (repo / rel).exists() and not any(
                (repo / "/".join(parts[:i + 1])).is_file() for i in range(depth)):
            _add(repo, rel)
    git(repo, "add", "-A")
    git(repo, "update-index", "--assume-unchanged", "a/b/.gitattributes")
    ours = _ours(repo)
    assert ours is not None
    assert sorted(ours) == sorted(_listed_by_git(repo))
    assert b"a/b/.gitattributes" in ours and b"x.gitattributes" not in ours
    assert len(ours) > 8


def test_other_index_shapes_ask_git(repo: Path) -> None:
    """Version 3 and 4 indexes, a split index, and bytes that are not the checksum's."""
    _add(repo, "a/.gitattributes")
    git(repo, "add", "-A")
    index = repo / ".git" / "index"
    checksum = statlag.index_checksum(index)
    assert checksum is not None
    assert indexed_attributes(index, "0" * 40) is None
    assert indexed_attributes(index, checksum) == [b"a/.gitattributes"]
    git(repo, "update-index", "--index-version", "4")
    assert _ours(repo) is None
    git(repo, "update-index", "--index-version", "2")
    assert _ours(repo) == [b"a/.gitattributes"]
    (repo / "intent.txt").write_text("i\n")
    git(repo, "add", "-N", "intent.txt")               # intent-to-add: a version 3 index
    assert _ours(repo) is None
    git(repo, "rm", "-q", "--cached", "intent.txt")
    git(repo, "update-index", "--index-version", "2", "--split-index")
    assert _ours(repo) is None


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
    state = statlag.load(guard.store.root, repo / ".git" / "index")
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
