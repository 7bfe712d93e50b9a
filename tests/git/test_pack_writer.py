"""Snapshot objects written as one pack: git reads the pack as its own, the trees equal a
full scan's, and what a killed writer leaves is settled."""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pygit2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pytest import MonkeyPatch

from gitguard.api import Guard
from gitguard.git import pack_writer, packing, spare_objects
from gitguard.storage.store import Store
from gitguard.workspace import discover
from tests.helpers.commands import gg, git
from tests.helpers.trees import start

TREE, BLOB = pygit2.enums.ObjectType.TREE, pygit2.enums.ObjectType.BLOB


def pack_names(repo: Path) -> set[str]:
    return {n[:-4] for n in os.listdir(repo / ".git" / "objects" / "pack") if n.endswith(".idx")}


def loose(repo: Path) -> set[str]:
    objects = repo / ".git" / "objects"
    return {d + f for d in os.listdir(objects) if len(d) == 2 for f in os.listdir(objects / d)}


def every_object(repo: Path, tree: str) -> list[str]:
    out = git(repo, "rev-list", "--objects", "--no-object-names", "--missing=print", tree)
    return out.split()


def readable(repo: Path, oids: list[str]) -> None:
    """git cat-file reads every object, and its content hashes to its id."""
    out = subprocess.run(["git", "cat-file", "--batch"], cwd=repo, check=True,
                         input="".join(f"{o}\n" for o in oids).encode(),
                         capture_output=True).stdout
    at = 0
    for oid in oids:
        header_end = out.index(b"\n", at)
        got, kind, size = out[at:header_end].decode().split()
        body = out[header_end + 1:header_end + 1 + int(size)]
        at = header_end + 1 + int(size) + 1
        assert got == oid
        assert hashlib.sha1(f"{kind} {size}\0".encode() + body).hexdigest() == oid


def spread(repo: Path, count: int, tag: str) -> list[str]:
    """Files in directories whose names exercise git's entry order ("a" < "a-b" <
    "a.b" < "a/" < "a0"), an executable, a symlink, nested levels."""
    changed = []
    for n in range(count):
        top = ["a", "a-b", "a.b", "a0", "ab"][n % 5]
        rel = f"{top}/d{n % 3}/f{n}.txt"
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{tag} {n}\n")
        changed.append(rel)
    (repo / "a" / "run.sh").write_text(f"#!/bin/sh\necho {tag}\n")
    os.chmod(repo / "a" / "run.sh", 0o755)
    link = repo / "a.b" / "link"
    link.unlink(missing_ok=True)
    os.symlink(f"../a0/{tag}", link)
    for name in ("a", "a.b", "a0"):      # a file beside the dirs of the same stem
        (repo / f"{name}.txt").write_text(tag)
    return [*changed, "a/run.sh", "a.b/link", "a.txt", "a.b.txt", "a0.txt"]


def test_many_objects_go_to_one_pack_equal_to_a_full_scan(repo: Path) -> None:
    guard, inc = start(repo)
    packs, before = pack_names(repo), loose(repo)
    changed = spread(repo, 40, "one")
    fast = inc.advance([os.fsencode(p) for p in changed])
    new_packs = pack_names(repo) - packs
    assert len(new_packs) == 1
    assert loose(repo) == before, "a pack, not loose objects"
    assert [p["name"] for p in packing.read_state(guard.store)["packs"]] == list(new_packs)
    assert not [n for n in os.listdir(repo / ".git" / "objects" / "pack")
                if n.startswith(packing.TMP_PREFIX)]
    full = guard.snap.write_tree()
    assert fast.tree == full.tree
    git(repo, "verify-pack", str(repo / ".git" / "objects" / "pack" / f"{new_packs.pop()}.idx"))
    git(repo, "fsck", "--strict", "--no-progress")
    readable(repo, every_object(repo, fast.tree))

    # The snapshot commit keeps it; git's own gc and our merge both keep it readable.
    commit = guard.snap.commit(fast.tree, "s1", {"kind": "test"})
    second = inc.advance([os.fsencode(p) for p in spread(repo, 40, "two")])
    guard.snap.commit(second.tree, "s1", {"kind": "test"})
    assert len(packing.own_packs(guard.store)) == 2
    stats = packing.pack_gitguard_objects(guard.store, merge=True)
    assert stats.merged_packs >= 2 and len(packing.own_packs(guard.store)) == 1
    readable(repo, every_object(repo, second.tree) + every_object(repo, fast.tree) + [commit])
    git(repo, "gc", "--prune=now", "-q")
    readable(repo, every_object(repo, second.tree) + every_object(repo, fast.tree) + [commit])
    git(repo, "fsck", "--strict", "--no-progress")


def test_few_objects_stay_loose(repo: Path) -> None:
    guard, inc = start(repo)
    packs = pack_names(repo)
    (repo / "src" / "app.py").write_text("one change\n")
    fast = inc.advance([b"src/app.py"])
    assert pack_names(repo) == packs
    assert fast.tree == guard.snap.write_tree().tree
    readable(repo, every_object(repo, fast.tree))


def test_the_daemon_tree_equals_a_resync_after_packs(repo: Path) -> None:
    """Through a real daemon (watcher, barrier, engine: what the bench row runs)."""
    from gitguard.daemon.daemon import Daemon  # noqa: PLC0415 - the daemon's module, only here
    ws = discover(repo)
    Store(ws).create()
    daemon = Daemon(ws, logging.getLogger("gitguard.test"))
    daemon.start(serve_socket=False)
    try:
        for round_ in range(3):
            spread(repo, 30, f"r{round_}")
            with daemon.guard.store.writing():
                tree = daemon.engine.tree_now().tree
                daemon.guard.snap.commit(tree, "s1", {"kind": "test"})
        assert daemon.engine.counts["incremental"] >= 3
        with daemon.guard.store.writing():
            assert daemon.engine.resync()
        assert len(packing.own_packs(daemon.guard.store)) == 3
    finally:
        daemon.shutdown()
    git(repo, "fsck", "--strict", "--no-progress")


_NAME = st.binary(min_size=1, max_size=6).filter(lambda b: b"/" not in b and b"\0" not in b
                                                 and b not in (b".", b".."))
_MODES = st.sampled_from([0o100644, 0o100755, 0o120000, 0o040000, 0o160000])


def _tree_bytes(entries: dict[bytes, tuple[int, bytes]]) -> bytes:
    """git's tree format and order: a directory sorts as if its name ended in "/"."""
    def key(item: tuple[bytes, tuple[int, bytes]]) -> bytes:
        name, (mode, _) = item
        return name + b"/" if mode == 0o040000 else name
    return b"".join(f"{mode:o} ".encode() + name + b"\0" + oid
                    for name, (mode, oid) in sorted(entries.items(), key=key))


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blobs=st.lists(st.binary(max_size=300), min_size=1, max_size=12, unique=True),
       names=st.lists(st.tuples(_NAME, _MODES), min_size=1, max_size=12,
                      unique_by=lambda t: t[0]))
def test_any_objects_round_trip_through_git(repo: Path, blobs: list[bytes],
                                            names: list[tuple[bytes, int]]) -> None:
    """Arbitrary blobs and a tree over non-UTF-8 names and every mode, encoded by us,
    read back by git: same ids as pygit2 computes, `index-pack` agrees, fsck is clean."""
    guard = Guard.open(repo) if (repo / ".git" / "gitguard").exists() else Guard.init(repo)
    objects = [(pygit2.hash(b).raw, BLOB, b) for b in blobs]
    sub = _tree_bytes({b"f": (0o100644, objects[0][0])})
    sub_id = hashlib.sha1(b"tree %d\0" % len(sub) + sub).digest()
    entries = {}
    for n, (name, mode) in enumerate(names):
        target = sub_id if mode == 0o040000 else objects[n % len(objects)][0]
        if mode == 0o160000:
            target = hashlib.sha1(name).digest()       # a submodule's commit: not ours
        entries[name] = (mode, target)
    top = _tree_bytes(entries)
    top_id = hashlib.sha1(b"tree %d\0" % len(top) + top).digest()
    objects += [(sub_id, TREE, sub), (top_id, TREE, top)]
    name = pack_writer.publish(guard.store, objects)
    idx = repo / ".git" / "objects" / "pack" / f"{name}.idx"
    listed = git(repo, "verify-pack", "-v", str(idx))
    assert {oid.hex() for oid, _, _ in objects} <= {line.split()[0] for line in
                                                    listed.splitlines() if " " in line}
    readable(repo, sorted({oid.hex() for oid, _, _ in objects}))
    assert str(pygit2.Repository(str(repo)).get(top_id.hex()).id) == top_id.hex()
    assert name in {p["name"] for p in packing.read_state(guard.store)["packs"]}


def test_settle_removes_what_a_killed_writer_left(repo: Path) -> None:
    guard = Guard.init(repo)
    pack_dir = repo / ".git" / "objects" / "pack"
    blob = b"never published\n"
    name, pack, idx = pack_writer.encode([(pygit2.hash(blob).raw, BLOB, blob)])
    tmp_pack, tmp_idx = pack_writer.tmp_paths(pack_dir, name)
    pack_dir.mkdir(parents=True, exist_ok=True)
    tmp_pack.write_bytes(pack)
    tmp_idx.write_bytes(idx)
    packing.record(guard.store, name)                  # killed before the renames
    kept = pack_writer.publish(guard.store, [(pygit2.hash(b"kept\n").raw, BLOB, b"kept\n")])
    assert not tmp_pack.exists() and not tmp_idx.exists()
    assert [p["name"] for p in packing.read_state(guard.store)["packs"]] == [kept]

    (pack_dir / f"{name}.pack").write_bytes(pack)      # killed between the renames
    packing.record(guard.store, name)
    packing.settle(guard.store)
    assert not (pack_dir / f"{name}.pack").exists()
    assert [p["name"] for p in packing.read_state(guard.store)["packs"]] == [kept]
    readable(repo, [str(pygit2.hash(b"kept\n"))])
    git(repo, "fsck", "--strict", "--no-progress")


def test_maybe_pack_merges_once_our_packs_are_many(repo: Path) -> None:
    guard, inc = start(repo)
    trees = []
    for n in range(packing.MAX_OWN_PACKS + 1):
        tree = inc.advance([os.fsencode(p) for p in spread(repo, 30, f"m{n}")]).tree
        guard.snap.commit(tree, "s1", {"kind": "test"})
        trees.append(tree)
    assert len(packing.own_packs(guard.store)) == packing.MAX_OWN_PACKS + 1
    stats = packing.maybe_pack(guard.store, guard.snap.repo)
    assert stats is not None and stats.merged_packs >= packing.MAX_OWN_PACKS + 1
    assert len(packing.own_packs(guard.store)) == 1
    readable(repo, [o for t in trees for o in every_object(repo, t)])


def test_a_merge_folds_the_small_packs_and_leaves_a_big_one(repo: Path) -> None:
    """Geometric merging (packing.to_merge): the packs that break "each at least twice the
    next smaller" are merged; a pack far bigger than all of them is not rewritten."""
    guard, inc = start(repo)
    trees = []
    for n, count in enumerate((400, 30, 30)):
        tree = inc.advance([os.fsencode(p) for p in spread(repo, count, f"g{n}")]).tree
        guard.snap.commit(tree, "s1", {"kind": "test"})
        trees.append(tree)
    pack_dir = repo / ".git" / "objects" / "pack"
    big, *small = [p["name"] for p in packing.own_packs(guard.store)]
    assert len(small) == 2
    assert packing.to_merge(pack_dir, packing.own_packs(guard.store)) != []
    stats = packing.pack_gitguard_objects(guard.store)
    after = [p["name"] for p in packing.own_packs(guard.store)]
    assert big in after and not set(small) & set(after)
    assert len(after) == 2 and stats.merged_packs >= 2
    assert packing.to_merge(pack_dir, packing.own_packs(guard.store)) == []
    readable(repo, [o for t in trees for o in every_object(repo, t)])
    git(repo, "fsck", "--strict", "--no-progress")


def test_calls_go_on_while_git_writes_a_pack(repo: Path, monkeypatch: MonkeyPatch) -> None:
    """The daemon packs on a thread of its own: while git writes the pack, the store lock
    is free, so a call begins and ends (the lock waits 30 s, then fails the call)."""
    guard, inc = start(repo)
    tree = inc.advance([os.fsencode(p) for p in spread(repo, 30, "loose")]).tree
    guard.snap.commit(tree, "s1", {"kind": "test"})
    writing, release = threading.Event(), threading.Event()
    real = packing._write_pack

    def held_open(*args: Any, **kwargs: Any) -> str | None:
        writing.set()
        release.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(packing, "_write_pack", held_open)
    packer = threading.Thread(target=packing.pack_gitguard_objects,
                              args=(Store(guard.ws, guard.settings),))
    packer.start()
    try:
        assert writing.wait(60)
        entry = guard.begin_call("Write", {"file_path": "during.txt"}, writes=["during.txt"])
        (repo / "during.txt").write_text("written while packing\n")
        ended = guard.end_call(entry.call_id)
    finally:
        release.set()
        packer.join(60)
    assert ended.status == "succeeded"
    assert [p.path for p in ended.file_patches] == ["during.txt"]
    readable(repo, every_object(repo, tree))
    git(repo, "fsck", "--strict", "--no-progress")


def test_past_the_pack_limit_a_snapshot_goes_loose(repo: Path) -> None:
    """A burst of big snapshots with no idle merge between stays below gc.autoPackLimit."""
    guard = Guard.init(repo)
    disk = guard.snap.repo
    first, second = pygit2.hash(b"first\n"), pygit2.hash(b"second\n")
    assert pack_writer.write_objects(disk, guard.store, [(first.raw, BLOB, b"first\n")],
                                     threshold=0, limit=1) is not None
    before = loose(repo)
    assert pack_writer.write_objects(disk, guard.store, [(second.raw, BLOB, b"second\n")],
                                     threshold=0, limit=1) is None
    assert loose(repo) - before == {str(second)}
    assert len(packing.own_packs(guard.store)) == 1
    readable(repo, [str(first), str(second)])


def _stored_trees(repo: Path, pack: str) -> list[tuple[int, int]]:
    """(size, size in pack) of each tree the pack stores whole (not as a delta)."""
    out = git(repo, "verify-pack", "-v", str(repo / ".git" / "objects" / "pack" / f"{pack}.idx"))
    rows = [line.split() for line in out.splitlines()]
    return [(int(r[2]), int(r[3])) for r in rows if len(r) == 5 and r[1] == "tree"]


def test_gitguard_gc_deflates_the_trees_snapshot_packs_stored_raw(repo: Path) -> None:
    """Snapshot packs store trees uncompressed (cheaper per call); the merge `gitguard gc`
    makes deflates every object afresh, so the size gc reports is what git would write."""
    guard, inc = start(repo)
    for tag in ("one", "two"):
        fast = inc.advance([os.fsencode(p) for p in spread(repo, 40, tag)])
        guard.snap.commit(fast.tree, "s1", {"kind": "test"})
    raw = [t for name in packing.own_packs(guard.store) for t in _stored_trees(repo, name["name"])]
    assert raw and all(packed > size for size, packed in raw if size > 200)   # stored blocks
    packing.pack_gitguard_objects(guard.store, merge=True, drop_unreachable=True)
    [merged] = packing.own_packs(guard.store)
    whole = _stored_trees(repo, merged["name"])
    assert whole and all(packed < size for size, packed in whole if size > 200)
    git(repo, "fsck", "--strict", "--no-progress")


def test_packed_loose_files_are_reused_for_the_next_objects(repo: Path) -> None:
    """Packing sets the packed loose files aside; the next loose objects are written into
    them (same inodes), read back right by git, 0444 as git's, and `gitguard gc` deletes
    what is left. A spare set aside just now is not taken (a reader may still hold it)."""
    guard, inc = start(repo)
    spare_dir = guard.store.root / "spare-objects"
    for n in range(4):
        (repo / "src" / f"first{n}.py").write_text(f"first {n}\n" * 50)
        first = inc.advance([os.fsencode(f"src/first{n}.py")])
        guard.snap.commit(first.tree, "s1", {"kind": "test"})
    ours = loose(repo)
    stats = packing.pack_gitguard_objects(guard.store)
    assert stats.set_aside > 0 and stats.objects >= stats.set_aside
    spares = os.listdir(spare_dir)
    assert len(spares) == stats.set_aside
    assert {n.split("-", 1)[1] for n in spares} <= ours, "only packed objects are set aside"
    assert not {n.split("-", 1)[1] for n in spares} & loose(repo)
    assert all(stat.S_IMODE((spare_dir / n).stat().st_mode) == 0o600 for n in spares)
    readable(repo, every_object(repo, first.tree))

    # Too fresh: a new object gets a file of its own.
    (repo / "src" / "fresh.py").write_text("fresh\n")
    fresh = inc.advance([b"src/fresh.py"])
    assert sorted(os.listdir(spare_dir)) == sorted(spares)

    time.sleep(spare_objects.REUSE_AFTER_NS / 1e9 + 0.1)   # now they are old enough
    inodes = {(spare_dir / n).stat().st_ino for n in spares}
    (repo / "src" / "second.py").write_text("second, written into a spare\n")
    second = inc.advance([b"src/second.py"])
    commit = guard.snap.commit(second.tree, "s1", {"kind": "test"})
    new = loose(repo) - ours
    objects = repo / ".git" / "objects"
    reused = [o for o in new if (objects / o[:2] / o[2:]).stat().st_ino in inodes]
    assert reused, "the new loose objects took the spares' files"
    assert all(stat.S_IMODE((objects / o[:2] / o[2:]).stat().st_mode) == 0o444 for o in new)
    readable(repo, every_object(repo, second.tree) + every_object(repo, fresh.tree) + [commit])
    git(repo, "fsck", "--strict", "--no-progress")
    left = len(os.listdir(spare_dir))
    assert left == len(spares) - len(reused)

    gg(repo, "gc")
    assert os.listdir(spare_dir) == []
    readable(repo, every_object(repo, second.tree) + [commit])


_WRITER = """
import os, sys, zlib
import pygit2
from gitguard.git import pack_writer, spare_objects
from gitguard.storage.store import Store
from gitguard.workspace import discover
spare_objects.REUSE_AFTER_NS = 0
from pathlib import Path
store = Store(discover(Path(sys.argv[1])))
repo = pygit2.Repository(sys.argv[1])
objects = pack_writer.loose_dir(repo, store)
spares = pack_writer.spares_of(store)
for n in range(int(sys.argv[3])):
    data = f"{sys.argv[2]} {n}\\n".encode()
    oid = bytes.fromhex(str(pygit2.hash(data)))
    pack_writer.write_loose(objects, oid, pygit2.enums.ObjectType.BLOB, data, spares)
    print(oid.hex())
"""


def test_two_processes_share_the_spares_and_every_object_reads_back(repo: Path) -> None:
    """Two writers take spares at once (a daemon and a CLI call): a rename hands each spare
    to one of them, and every object either wrote reads back whole."""
    guard, inc = start(repo)
    for n in range(6):
        (repo / "src" / f"bulk{n}.py").write_text(f"bulk {n}\n" * 40)
        made = inc.advance([os.fsencode(f"src/bulk{n}.py")])
        guard.snap.commit(made.tree, "s1", {"kind": "test"})
    assert packing.pack_gitguard_objects(guard.store).set_aside >= 12
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(repo), tag, "60"],
                                stdout=subprocess.PIPE, text=True) for tag in ("one", "two")]
    written = []
    for writer in writers:
        out, _ = writer.communicate(timeout=60)
        assert writer.returncode == 0
        written += out.split()
    assert len(set(written)) == 120
    assert len(os.listdir(guard.store.root / "spare-objects")) == 0, "the spares were used"
    readable(repo, written)
    git(repo, "fsck", "--strict", "--no-progress")
