"""The snapshot core's shortcuts give what the slow ways gave: loose objects written in
Python are git's own, the tracked lookup equals a tree lookup, the per-advance directory
memo equals a fresh lstat walk, and the daemon's tracked-first ignore check keeps
tracked-but-ignored files and drops untracked ignored ones."""

from __future__ import annotations

import logging
import os
import queue
import shutil
import subprocess
from pathlib import Path

import pygit2

from gitguard.daemon.daemon import Daemon
from gitguard.daemon.engine import Item
from gitguard.daemon.watcher import ScriptedSource
from gitguard.git import pack_writer
from gitguard.git.objects import object_id
from gitguard.storage.store import Store
from gitguard.workspace import discover
from tests.helpers.commands import git
from tests.helpers.trees import start

BLOB, TREE = int(pygit2.enums.ObjectType.BLOB), int(pygit2.enums.ObjectType.TREE)


def _raw(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True).stdout


def _objects(repo: Path) -> bytes:
    return os.fsencode(repo / ".git" / "objects")


def test_loose_objects_written_in_python_are_gits(repo: Path) -> None:
    blobs = [b"", b"one line\n", bytes(range(256)) * 300, b"\0binary\xff" * 1000]
    written = []
    for data in blobs:
        oid = object_id(BLOB, data)
        pack_writer.write_loose(_objects(repo), oid, BLOB, data)
        written.append(oid.hex())
        assert _raw(repo, "cat-file", "blob", oid.hex()) == data
        hashed = git(repo, "hash-object", "--stdin", input=data)
        assert hashed.strip() == oid.hex()
    # A tree naming them and a commit on it, read back by git and by libgit2.
    entries = b"".join(b"100644 f%d\0%s" % (i, bytes.fromhex(h)) for i, h in enumerate(written))
    tree = object_id(TREE, entries)
    pack_writer.write_loose(_objects(repo), tree, TREE, entries)
    assert git(repo, "ls-tree", tree.hex()).count("blob") == len(blobs)
    lib = pygit2.Repository(str(repo))
    for hexid, data in zip(written, blobs, strict=True):
        assert bytes(lib[hexid].read_raw()) == data
    # Writing an object again (a revert) replaces it with the same bytes; a temp file a
    # killed writer of this pid left is replaced, not in the way.
    oid = bytes.fromhex(written[1])
    leftover = os.path.join(_objects(repo), written[1][:2].encode(),
                            b"tmp_obj_gitguard.%d.%s" % (os.getpid(), written[1][2:].encode()))
    with open(leftover, "wb") as fh:
        fh.write(b"half")
    os.chmod(leftover, 0o444)
    pack_writer.write_loose(_objects(repo), oid, BLOB, blobs[1])
    assert not os.path.exists(leftover)
    assert git(repo, "fsck", "--strict", "--no-dangling").strip() == ""
    strays = [n for d in os.listdir(_objects(repo)) if len(d) == 2
              for n in os.listdir(os.path.join(_objects(repo), d)) if n.startswith(b"tmp_")]
    assert strays == []


def test_tracked_lookup_equals_the_tree(repo: Path) -> None:
    (repo / "a" / "b").mkdir(parents=True)
    (repo / "a" / "b" / "c.txt").write_text("c\n")
    (repo / "a" / "d.txt").write_text("d\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "more")
    _, inc = start(repo)
    tree = pygit2.Repository(str(repo)).get(inc.tree)
    assert isinstance(tree, pygit2.Tree)
    asked = ["a", "a/b", "a/b/c.txt", "a/d.txt", "README.md", "src/app.py", "src",
             "missing", "a/missing", "a/d.txt/below", "README.md/x", "a/b/c.txt/y/z",
             "build/out.bin", "debug.log"]
    for path in asked:
        try:
            tree[path]
            expected = True
        except KeyError:
            expected = False
        assert inc.tracked(path.encode()) is expected, path


def test_directory_memo_equals_a_fresh_walk_when_directories_change(repo: Path,
                                                                     tmp_path: Path) -> None:
    """Many changed paths below directories that became a symlink, a file, or went: the
    memo of one advance answers as `lstat_inside` would for each path."""
    for d in ("x", "y", "z"):
        (repo / d).mkdir()
        for i in range(5):
            (repo / d / f"f{i}.txt").write_text(f"{d}{i}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "dirs")
    guard, inc = start(repo)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for i in range(5):
        (outside / f"f{i}.txt").write_text("outside\n")
    shutil.rmtree(repo / "x")
    os.symlink(outside, repo / "x")             # a directory now a symlink to one
    shutil.rmtree(repo / "y")
    (repo / "y").write_text("a file now\n")     # a directory now a file
    shutil.rmtree(repo / "z")                   # gone
    (repo / "src" / "app.py").write_text("changed\n")
    changed = [f"{d}/f{i}.txt" for d in ("x", "y", "z") for i in range(5)]
    fast = inc.advance([p.encode() for p in [*changed, "src/app.py", "x", "y", "z"]])
    full = guard.snap.write_tree()
    assert fast.tree == full.tree, git(repo, "diff-tree", "-r", fast.tree, full.tree)


def _scripted_daemon(repo: Path) -> tuple[Daemon, ScriptedSource]:
    """A started daemon without a socket, fed by a scripted event source."""
    sink: queue.SimpleQueue[Item] = queue.SimpleQueue()
    source = ScriptedSource(sink)
    ws = discover(repo)
    Store(ws).create()
    daemon = Daemon(ws, logging.getLogger("gitguard.test"), source=source, sink=sink)
    daemon.start(serve_socket=False)
    return daemon, source


def test_tracked_ignored_files_stay_in_the_daemon_tree(repo: Path) -> None:
    (repo / "keep.log").write_text("tracked although ignored\n")
    git(repo, "add", "-f", "keep.log")
    git(repo, "commit", "-qm", "tracked log")
    daemon, source = _scripted_daemon(repo)
    try:
        engine = daemon.engine
        (repo / "keep.log").write_text("changed, still tracked\n")
        (repo / "new.log").write_text("untracked and ignored\n")
        (repo / "build" / "more.bin").write_bytes(b"ignored directory\n")
        (repo / "src" / "app.py").write_text("changed\n")
        for path in ("keep.log", "new.log", "build/more.bin", "src/app.py"):
            source.emit("write", path)
        with daemon.guard.store.writing():
            engine.sync()
            assert engine.dirty == {b"keep.log", b"src/app.py"}
            fast = engine.tree_now()
            assert engine.counts["incremental"] == 1
            full = daemon.guard.snap.write_tree()
        assert fast.tree == full.tree, git(repo, "diff-tree", "-r", fast.tree, full.tree)
        assert "keep.log" in git(repo, "ls-tree", "--name-only", fast.tree)
    finally:
        daemon.shutdown()


def test_fanout_directories_are_made_at_start_and_again_in_idle_time(repo: Path) -> None:
    daemon, source = _scripted_daemon(repo)
    objects = repo / ".git" / "objects"

    def fanouts() -> set[str]:
        return {n for n in os.listdir(objects) if len(n) == 2}

    try:
        assert fanouts() == {f"{i:02x}" for i in range(256)}
        (repo / "src" / "app.py").write_text("changed\n")
        source.emit("write", "src/app.py")
        with daemon.guard.store.writing():
            tree = daemon.engine.tree_now()
            daemon.guard.snap.commit(tree.tree, "s", {"kind": "test"})
        git(repo, "repack", "-q")
        git(repo, "prune-packed")                   # what our idle packing runs
        assert len(fanouts()) < 256
        daemon.engine.sync_records()                # idle time
        assert fanouts() == {f"{i:02x}" for i in range(256)}
        assert git(repo, "fsck", "--strict", "--no-dangling").strip() == ""
    finally:
        daemon.shutdown()


def test_the_daemon_commit_is_the_commit_libgit2_writes(repo: Path) -> None:
    from gitguard.snapshot.daemon_snapshotter import commit_bytes
    from gitguard.snapshot.snapshotter import AUTHOR

    lib = pygit2.Repository(str(repo))
    head = lib.head.target
    tree = str(lib[head].tree_id)
    for parents, message in (([], "gitguard snapshot\n\n{}\n"),
                             ([str(head)], 'gitguard snapshot\n\n{"kind": "pre", "x": "é"}\n')):
        sig = pygit2.Signature(*AUTHOR, 1_796_000_000, 0)
        expected = lib.create_commit(None, sig, sig, message, pygit2.Oid(hex=tree),
                                     [pygit2.Oid(hex=p) for p in parents])
        data = commit_bytes(tree, parents, 1_796_000_000, message)
        assert object_id(int(pygit2.enums.ObjectType.COMMIT), data).hex() == str(expected)
        assert bytes(lib[expected].read_raw()) == data


def test_file_reads_do_not_trust_the_size_hint(tmp_path: Path) -> None:
    from gitguard.git.tree_build import _read

    data = os.urandom(200_000)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    for hint in (0, 1, 65_535, 199_999, 200_000, 200_001, 10**7):
        assert _read(os.fsencode(path), hint) == data, hint
    path.write_bytes(b"")
    assert _read(os.fsencode(path), 0) == b""
