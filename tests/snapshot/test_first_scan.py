"""The first snapshot read against the user's index (first_scan) equals the old way's tree:
a byte copy of the user's index, `git add -A`, `git write-tree`. The user's index (bytes
and mtime) never changes, no private stat index is made until the next scan, and every
later scan still sees every change, including the user's own `git add` and commits."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from gitguard.api import Guard
from gitguard.git.objects import TreeResult
from gitguard.snapshot import stat_tree
from gitguard.snapshot.snapshotter import Snapshotter
from tests.helpers.commands import git
from tests.snapshot.test_in_process_snapshot import _random_change


def copy_add_all_tree(repo: Path, tmp: Path, skipped: tuple[str, ...],
                      git_dir: Path | None = None) -> str:
    """The old first snapshot by hand: a copy of the user's index, add -A, minus skipped."""
    index = (git_dir or repo / ".git") / "index"
    throwaway = tmp / "copy.index"
    throwaway.unlink(missing_ok=True)
    if index.exists():
        shutil.copyfile(index, throwaway)
    env = {**os.environ, "GIT_INDEX_FILE": str(throwaway)}

    def run(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True,
                              check=True).stdout.decode()

    run("add", "-A")
    if skipped:
        run("rm", "-r", "-q", "--cached", "--ignore-unmatch", "--",
            *(":(literal)" + s.rstrip("/") for s in skipped))
    return run("write-tree").strip()


def _index_seen(git_dir: Path) -> tuple[bytes, int] | None:
    index = git_dir / "index"
    return (index.read_bytes(), index.stat().st_mtime_ns) if index.exists() else None


def _first(guard: Guard, repo: Path, tmp: Path, git_dir: Path | None = None) -> TreeResult:
    git_dir = git_dir or repo / ".git"
    before, locked = _index_seen(git_dir), (git_dir / "index.lock").exists()
    result = guard.snap.write_tree()
    assert _index_seen(git_dir) == before
    assert (git_dir / "index.lock").exists() == locked
    assert result.tree == copy_add_all_tree(repo, tmp, result.skipped, git_dir)
    return result


def _mixed_user_state(repo: Path) -> None:
    """Staged, unstaged, both, intent-to-add, staged removals, untracked files and dirs."""
    (repo / "src" / "staged.py").write_text("staged\n")
    git(repo, "add", "src/staged.py")
    (repo / "README.md").write_text("# staged readme\n")
    git(repo, "add", "README.md")
    (repo / "README.md").write_text("# staged, then edited again\n")
    (repo / "src" / "app.py").write_text("unstaged\n")
    (repo / "ita.txt").write_text("intent to add\n")
    git(repo, "add", "-N", "ita.txt")
    (repo / "gone.txt").write_text("to be removed\n")
    git(repo, "add", "gone.txt")
    git(repo, "commit", "-qm", "gone")
    git(repo, "rm", "-q", "--cached", "gone.txt")      # staged removal, file still here
    (repo / "new" / "deep").mkdir(parents=True)
    (repo / "new" / "deep" / "f.txt").write_text("new dir\n")
    (repo / "node_modules" / "pkg").mkdir(parents=True)
    (repo / "node_modules" / "pkg" / "i.js").write_text("dep\n")
    (repo / "link").symlink_to("src/app.py")
    os.chmod(repo / "src" / "app.py", 0o755)


def test_a_first_snapshot_reads_the_users_index_and_writes_no_private_one(
        repo: Path, tmp_path: Path) -> None:
    _mixed_user_state(repo)
    guard = Guard.init(repo)
    result = _first(guard, repo, tmp_path)
    assert "node_modules/" in result.skipped
    assert not guard.store.stat_index.exists()
    state = stat_tree.load(guard.store.root, repo / ".git" / "index")
    assert state is not None and state.tree == result.tree
    # The next scan makes the private stat index, a byte copy the state still holds for.
    (repo / "src" / "app.py").write_text("later\n")
    again = guard.snap.write_tree()
    assert guard.store.stat_index.exists()
    assert again.base == result.tree and again.changed == ("src/app.py",)
    assert again.tree == copy_add_all_tree(repo, tmp_path, again.skipped)


@pytest.mark.parametrize("seed", [1, 2])
def test_random_edits_before_and_between_scans_and_the_users_git(
        repo: Path, tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Edits before the first snapshot, between scans, and the user's own `git add` and
    `git commit` between them: every tree equals the throwaway index's."""
    from tests.snapshot.test_scan_equals_full_scan import reference_tree

    (repo / ".gitguard.toml").write_text("untracked_size_cap = 1000\n")
    rng = random.Random(seed)
    monkeypatch.setattr(stat_tree, "LAG_MAX", 12)
    originals = {p.relative_to(repo).as_posix(): p.read_bytes() for p in repo.rglob("*")
                 if ".git" not in p.parts and p.is_file()}
    guard = Guard.init(repo)        # settings read before an edit may touch them
    for _ in range(4):
        _random_change(rng, repo, originals)
    _first(guard, repo, tmp_path)
    for step in range(14):
        touched = [_random_change(rng, repo, originals) for _ in range(rng.randrange(1, 3))]
        if step % 5 == 2:
            git(repo, "add", "-A", "--", "src")
        elif step % 5 == 4:
            git(repo, "add", "-A")
            git(repo, "commit", "-qm", f"user {step}", "--allow-empty")
        if rng.random() < 0.3:
            guard.snap.write_declared(touched)
            continue
        before = _index_seen(repo / ".git")
        result = guard.snap.write_tree()
        assert _index_seen(repo / ".git") == before
        assert result.tree == reference_tree(repo, tmp_path, result.skipped)


def test_unusual_indexes_keep_the_old_way_or_match_it(repo: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    """A merge conflict, more changes than the lag holds, a split and a v4 index."""
    git(repo, "checkout", "-qb", "other")
    (repo / "README.md").write_text("other side\n")
    git(repo, "commit", "-qam", "other")
    git(repo, "checkout", "-q", "main")
    (repo / "README.md").write_text("main side\n")
    git(repo, "commit", "-qam", "main")
    subprocess.run(["git", "merge", "-q", "other"], cwd=repo, capture_output=True)
    assert "UU README.md" in git(repo, "status", "--porcelain")
    guard = Guard.init(repo)
    _first(guard, repo, tmp_path)
    assert guard.store.stat_index.exists()          # unmerged entries: the old way ran
    guard.close()
    git(repo, "merge", "--abort")
    for setting in ("--split-index", "--index-version=4"):
        shutil.rmtree(repo / ".git" / "gitguard")
        git(repo, "update-index", setting)
        (repo / "src" / "app.py").write_text(f"{setting}\n")
        guard = Guard.init(repo)
        _first(guard, repo, tmp_path)
        assert not guard.store.stat_index.exists()
        guard.close()
    assert list((repo / ".git").glob("sharedindex.*"))
    shutil.rmtree(repo / ".git" / "gitguard")
    monkeypatch.setattr(stat_tree, "LAG_MAX", 2)
    for i in range(4):
        (repo / f"many{i}.txt").write_text(f"{i}\n")
    guard = Guard.init(repo)
    statuses: list[tuple[str, ...]] = []
    real_status = Snapshotter._status

    def counted(self: Snapshotter, *args: str) -> bytes:
        statuses.append(args)
        return real_status(self, *args)

    monkeypatch.setattr(Snapshotter, "_status", counted)
    _first(guard, repo, tmp_path)
    assert guard.store.stat_index.exists()          # too many to lag: the git way ran,
    assert statuses == [("--untracked-files=no",)]  # on the first status's answer


def test_an_empty_repository_and_a_linked_worktree(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    (empty / "a.txt").write_text("a\n")
    guard = Guard.init(empty)
    _first(guard, empty, tmp_path)                  # no index at all: the old way
    guard.close()
    git(empty, "add", "a.txt")                      # an index, HEAD still unborn
    (empty / "b.txt").write_text("b\n")
    shutil.rmtree(empty / ".git" / "gitguard")
    guard = Guard.init(empty)
    _first(guard, empty, tmp_path)
    assert not guard.store.stat_index.exists()
    guard.close()
    git(empty, "commit", "-qm", "first")
    linked = tmp_path / "linked"
    git(empty, "worktree", "add", "-q", str(linked))
    (linked / "a.txt").write_text("in the worktree\n")
    guard = Guard.init(linked)
    git_dir = empty / ".git" / "worktrees" / "linked"
    _first(guard, linked, tmp_path, git_dir)
    assert _index_seen(empty / ".git") is not None


def test_content_filters_and_a_held_index_lock(repo: Path, tmp_path: Path) -> None:
    """Attributes that convert content keep the git way, and the daemon's question (which
    attribute files convert) is asked of the index the tree was scanned against. The
    user's own git holding `.git/index.lock` does not stop a read-only first snapshot."""
    from gitguard.git.tree_build import converting_attributes

    lock = repo / ".git" / "index.lock"
    lock.write_bytes(b"held by the user's git")
    (repo / "src" / "app.py").write_text("edited\n")
    guard = Guard.init(repo)
    _first(guard, repo, tmp_path)
    assert not guard.store.stat_index.exists()
    assert guard.snap.scan_index() == repo / ".git" / "index"
    assert lock.read_bytes() == b"held by the user's git"
    lock.unlink()
    guard.close()
    shutil.rmtree(repo / ".git" / "gitguard")
    (repo / ".gitattributes").write_text("*.py text eol=crlf\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "attributes")
    guard = Guard.init(repo)
    assert converting_attributes(repo, repo / ".git", guard.snap.scan_index()) == [
        ".gitattributes"]
    _first(guard, repo, tmp_path)
    assert guard.store.stat_index.exists()          # content filters: the git way ran


def test_the_two_halves_list_what_one_status_lists(repo: Path) -> None:
    """`status -uno` beside `ls-files --others --directory` equals one `status -unormal`:
    ignored-only, empty and nested directories, a link, odd names, changes of each kind."""
    from gitguard.snapshot.first_scan import status_output

    (repo / "only_ignored").mkdir()
    (repo / "only_ignored" / "x.log").write_text("x\n")
    (repo / "empty").mkdir()
    (repo / "new" / "deep").mkdir(parents=True)
    (repo / "new" / "deep" / "n.txt").write_text("n\n")
    (repo / "mixed").mkdir()
    (repo / "mixed" / "l.log").write_text("l\n")
    (repo / "mixed" / "m.txt").write_text("m\n")
    (repo / "nested").mkdir()
    git(repo / "nested", "init", "-q")
    (repo / "nested" / "q").write_text("q\n")
    (repo / "linkdir").symlink_to("src")
    (repo / "sp ace.txt").write_text("s\n")
    (repo / "nl\nname").write_text("n\n")
    (repo / os.fsdecode(b"bad\xff.txt")).write_text("b\n")
    (repo / "src" / "build").mkdir()
    (repo / "src" / "build" / "o").write_text("o\n")
    (repo / "src" / "u.py").write_text("u\n")
    (repo / "src" / "app.py").write_text("changed\n")
    (repo / "staged.txt").write_text("s\n")
    git(repo, "add", "staged.txt")
    guard = Guard.init(repo)
    index = repo / ".git" / "index"
    guard.snap._read_only_index = index
    try:
        ours = status_output(guard.snap, index)
        one = guard.snap._status("--untracked-files=normal")
    finally:
        guard.snap._read_only_index = None
    assert ours is not None
    assert sorted(ours.split(b"\0")) == sorted(one.split(b"\0"))
    assert b"? nested/" in ours.split(b"\0") and b"? only_ignored/" not in ours.split(b"\0")


def test_the_users_git_add_during_a_first_snapshot_is_not_missed(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user edits and stages a file after git read their index and before the state
    is saved: the state would name an index whose tree it never saw, so none is saved
    and the next scan sees the edit."""
    from gitguard.snapshot import first_scan

    real = first_scan.index_tree

    def user_adds_meanwhile(*args: object) -> str | None:
        (repo / "src" / "app.py").write_text("edited and staged meanwhile\n")
        git(repo, "add", "src/app.py")
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(first_scan, "index_tree", user_adds_meanwhile)
    guard = Guard.init(repo)
    guard.snap.write_tree()
    assert not stat_tree.path_of(guard.store.root).exists()
    monkeypatch.undo()
    again = guard.snap.write_tree()
    assert again.tree == copy_add_all_tree(repo, tmp_path, again.skipped)
    assert "src/app.py" in git(repo, "ls-tree", "-r", "--name-only", again.tree).split()
    shown = git(repo, "show", f"{again.tree}:src/app.py")
    assert shown == "edited and staged meanwhile\n"
