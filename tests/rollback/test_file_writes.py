"""Working-tree writes and tree building: exact bytes, no symlink followed, git-identical trees."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pygit2
import pytest

from gitguard import fileops
from gitguard.api import Guard
from gitguard.fileops import FileState
from gitguard.git import tree_edit
from gitguard.git.objects import EXECUTABLE, LINK, REGULAR
from gitguard.ledger import journal
from gitguard.rollback.workspace_writer import Step, apply
from tests.helpers.commands import gg
from tests.helpers.rollback import put, tree_state


def git_tree(root: Path, git_dir: Path, index: Path) -> str:
    """The tree git itself writes for the working tree (a private index, ignored files out)."""
    env = {**os.environ, "GIT_INDEX_FILE": str(index), "GIT_DIR": str(git_dir),
           "GIT_WORK_TREE": str(root)}
    subprocess.run(["git", "add", "-A"], cwd=root, env=env, check=True)
    return subprocess.run(["git", "write-tree"], cwd=root, env=env, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_tree_with_builds_the_tree_git_would(repo: Path, tmp_path: Path) -> None:
    repository = pygit2.Repository(str(repo))
    index = tmp_path / "index"
    weird = os.fsdecode(b"dir/caf\xe9.txt")
    put(repo, "kind/switch", ("file", b"a file that becomes a directory\n", False))
    put(repo, "dir/sub/gone.txt", ("file", b"the only file of sub\n", False))
    put(repo, "dir/keep.txt", ("file", b"keep\n", False))
    put(repo, "dir/sub2/y.txt", ("file", b"a tree sorts as 'sub2/'\n", False))
    put(repo, "dir/sub2.txt", ("file", b"after 'sub2.txt'\n", False))
    base = git_tree(repo, repo / ".git", index)

    changes: dict[str, tuple[str, bytes, bool] | None] = {
        weird: ("file", b"\xe9t\xe9\n", False), "dir/sub/gone.txt": None,
        "kind/switch": None, "kind/switch/inner.sh": ("file", b"#!/bin/sh\n", True),
        "src/app.py": ("link", b"../README.md", False), "new/deep/x.bin": ("file", b"\0", False),
        "README.md": ("file", b"# changed\n", True), "dir/sub2/z.txt": ("file", b"z", False),
    }
    states: dict[str, FileState | None] = {}
    for path, value in changes.items():
        put(repo, path, value)
        if value is not None:
            kind, data, executable = value
            mode = LINK if kind == "link" else EXECUTABLE if executable else REGULAR
            states[path] = FileState(str(repository.create_blob(data)), mode)
        else:
            states[path] = None
    expected = git_tree(repo, repo / ".git", index)
    assert tree_edit.tree_with(repository, base, states) == expected


def test_write_state_replaces_a_symlink_instead_of_writing_through_it(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not yours\n")
    (root / "x.txt").symlink_to(outside)
    data = b"restored\n"
    fileops.write_state(root, "x.txt", FileState(str(pygit2.hash(data)), REGULAR), data)
    assert outside.read_bytes() == b"not yours\n"
    assert not (root / "x.txt").is_symlink() and (root / "x.txt").read_bytes() == data


def test_write_state_keeps_permission_bits_and_sets_only_exec(tmp_path: Path) -> None:
    private = tmp_path / "private.txt"
    private.write_bytes(b"old")
    private.chmod(0o600)
    fileops.write_state(tmp_path, "private.txt", FileState("0" * 40, EXECUTABLE), b"new")
    assert private.stat().st_mode & 0o777 == 0o700
    fileops.write_state(tmp_path, "private.txt", FileState("0" * 40, REGULAR), b"newer")
    assert private.stat().st_mode & 0o777 == 0o600 and private.read_bytes() == b"newer"


def test_delete_path_removes_only_directories_it_left_empty(tmp_path: Path) -> None:
    put(tmp_path, "a/b/c.txt", ("file", b"c", False))
    put(tmp_path, "a/other.txt", ("file", b"o", False))
    fileops.delete_path(tmp_path, "a/b/c.txt")
    assert not (tmp_path / "a" / "b").exists() and (tmp_path / "a" / "other.txt").exists()


def test_a_file_changed_after_planning_is_left_and_reported(repo: Path) -> None:
    gg(repo, "checkpoint")
    guard = Guard.open(repo)
    (repo / "src" / "app.py").write_bytes(b"the user got here first\n")
    planned = FileState(str(pygit2.hash(b"def main():\n    return 1\n")), REGULAR)
    target = FileState(str(guard.snap.repo.create_blob(b"agent\n")), REGULAR)
    with guard.store.writing():
        done = apply(guard, journal.read(guard.store), session_id="s", tool_name="gitguard.test",
                     id_prefix="test", summary="", tool_input={},
                     steps=[Step("src/app.py", planned, target)], now={"src/app.py": planned})
    assert done.done == () and [s.path for s, _ in done.raced] == ["src/app.py"]
    assert tree_state(repo)["src/app.py"][1] == b"the user got here first\n"


def test_current_content_hashes_like_git_and_returns_those_bytes(tmp_path: Path) -> None:
    put(tmp_path, "plain.txt", ("file", b"plain\r\nbytes\0\xff", False))
    put(tmp_path, "run.sh", ("file", b"#!/bin/sh\n", True))
    put(tmp_path, "link", ("link", b"plain.txt", False))
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(fileops.KEEP_BYTES + 1))
    for rel in ("plain.txt", "run.sh", "big.bin"):
        state, data = fileops.current_content(tmp_path, rel)
        assert state == FileState(str(pygit2.hashfile(str(tmp_path / rel))),
                                  EXECUTABLE if rel == "run.sh" else REGULAR)
        assert state == fileops.current_state(tmp_path, rel)
        assert data == (None if rel == "big.bin" else (tmp_path / rel).read_bytes())
    assert fileops.current_content(tmp_path, "link") == (
        FileState(str(pygit2.hash(b"plain.txt")), LINK), b"plain.txt")
    assert fileops.current_content(tmp_path, "absent") == (None, None)
    assert fileops.current_content(tmp_path, "plain.txt/below") == (None, None)
    os.mkfifo(tmp_path / "fifo")
    assert fileops.current_content(tmp_path, "fifo") == ("other", None)


def test_write_state_modes_follow_the_umask_only_for_new_files(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        fileops.write_state(tmp_path, "new.sh", FileState("0" * 40, EXECUTABLE), b"x")
        fileops.write_state(tmp_path, "new.txt", FileState("0" * 40, REGULAR), b"y",
                            fileops.umask())
        assert (tmp_path / "new.sh").stat().st_mode & 0o777 == 0o750
        assert (tmp_path / "new.txt").stat().st_mode & 0o777 == 0o640
        shared = tmp_path / "shared.txt"     # the user's bits outlive the umask
        shared.write_bytes(b"old")
        shared.chmod(0o666)
        fileops.write_state(tmp_path, "shared.txt", FileState("0" * 40, EXECUTABLE), b"z",
                            fileops.umask())
        assert shared.stat().st_mode & 0o777 == 0o777 and shared.read_bytes() == b"z"
    finally:
        os.umask(old)
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_observe_many_in_threads_equals_observe_one_by_one(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every kind of path, a large file streamed from disk, blobs stored the same."""
    repository = pygit2.Repository(str(repo))
    monkeypatch.setattr(fileops, "KEEP_BYTES", 64)       # so "large" is cheap to make
    put(repo, "big.bin", ("file", bytes(range(256)) * 4, False))
    put(repo, "run.sh", ("file", b"#!/bin/sh\n", True))
    put(repo, "link", ("link", b"../outside", False))
    put(repo, "through/x.txt", ("file", b"x\n", False))
    os.symlink("src", repo / "via")                       # a parent that is a symlink
    os.mkfifo(repo / "fifo")
    put(repo, os.fsdecode(b"caf\xe9.txt"), ("file", b"latin-1 name\n", False))
    paths = ["big.bin", "run.sh", "link", "through/x.txt", "via/app.py", "fifo", "src",
             "absent.txt", "src/app.py", os.fsdecode(b"caf\xe9.txt")]
    single = {p: fileops.observe(repository, repo, p, store_blobs=False) for p in paths}
    monkeypatch.setattr(fileops, "PARALLEL_FROM", 1)
    many = fileops.observe_many(repository, repo, paths, store_blobs=True)
    assert many == single
    assert {o.kind for o in many.values()} == {"file", "link", "beyond", "special", "dir",
                                               "absent"}
    for seen in many.values():      # what it reports is what it stored
        if seen.state is not None:
            assert seen.state.oid in repository


def test_stored_answers_like_oid_in_repo(repo: Path) -> None:
    """observe's check before storing a blob (the odb's exists) says what `oid in repo` says,
    for a packed object, a loose one, one written since the repository was opened, none."""
    repository = pygit2.Repository(str(repo))
    subprocess.run(["git", "gc", "-q"], cwd=repo, check=True)
    packed = [str(e.id) for e in pygit2.Repository(str(repo)).index]
    loose = str(repository.create_blob(b"loose\n"))
    later = pygit2.Repository(str(repo))
    written = str(later.create_blob(b"written by another handle\n"))
    absent = str(pygit2.hash(b"never stored\n"))
    for oid in [*packed, loose, written, absent]:
        assert fileops._stored(repository, pygit2.Oid(hex=oid)) == (oid in repository), oid
    assert fileops._stored(repository, pygit2.Oid(hex=written))
    assert not fileops._stored(repository, pygit2.Oid(hex=absent))
