"""Trees written in Python (tree_build: raw bytes, hashlib ids) are git's own: the same
bytes, the same ids, git's entry order, and a run of advances equals a full scan."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pygit2

from gitguard.api import Guard
from gitguard.git.objects import object_id, parse_tree, tree_bytes, tree_order
from gitguard.git.tree_build import IncrementalTree
from tests.helpers.commands import git
from tests.helpers.trees import start

TREE = int(pygit2.enums.ObjectType.TREE)
STEMS = ["x", "x-y", "x.y", "x0", "x y", "xy"]     # "x" < "x y" < "x-y" < "x.y" < "x/" < "x0"


def check(guard: Guard, inc: IncrementalTree, changed: list[bytes]) -> str:
    fast = inc.advance(changed)
    full = guard.snap.write_tree()
    assert fast.tree == full.tree, git(guard.ws.root, "diff-tree", "-r", fast.tree, full.tree)
    return fast.tree


def loose(repo: Path) -> set[str]:
    objects = repo / ".git" / "objects"
    return {d + f for d in os.listdir(objects) if len(d) == 2 for f in os.listdir(objects / d)}


def test_raw_trees_round_trip_with_git_ids_and_order(repo: Path) -> None:
    root = os.fsencode(repo)
    for stem in STEMS:
        (repo / stem).mkdir(exist_ok=True)
        (repo / stem / "f").write_text(stem)
        (repo / f"{stem}.txt").write_text(stem)
    with open(root + b"/caf\xe9 latin-1", "wb") as fh:     # not UTF-8, and a space
        fh.write(b"odd\n")
    os.symlink("x/f", repo / "x.link")
    git(repo, "add", "-A")
    tree = git(repo, "write-tree").strip()
    raw = pygit2.Repository(str(repo)).odb.read(tree)[1]
    entries = parse_tree(raw)
    assert b"caf\xe9 latin-1" in entries and entries[b"x"].startswith(b"40000 x\0")
    assert tree_bytes(entries) == raw
    assert object_id(TREE, raw).hex() == tree
    shuffled = list(entries.items())
    random.Random(3).shuffle(shuffled)
    assert tree_bytes(dict(sorted(shuffled, key=tree_order))) == raw


def test_a_tracked_non_utf8_name_survives_incremental_advances(repo: Path) -> None:
    odd = os.fsencode(repo) + b"/src/caf\xe9.txt"
    with open(odd, "wb") as fh:
        fh.write(b"latin-1\n")
    guard, inc = start(repo)            # the full scan tracks it
    (repo / "src" / "app.py").write_text("changed\n")
    (repo / "src" / "zz.py").write_text("new\n")
    tree = check(guard, inc, [b"src/app.py", b"src/zz.py"])
    assert git(repo, "ls-tree", "--name-only", tree, "src/").count("caf") == 1


def test_kind_and_mode_changes_keep_git_order(repo: Path) -> None:
    guard, inc = start(repo)
    for stem in STEMS:
        (repo / "d" / stem).parent.mkdir(exist_ok=True)
        (repo / "d" / stem).write_text(f"{stem}\n")
    check(guard, inc, [b"d"])                                   # a new directory
    (repo / "d" / "x").unlink()
    (repo / "d" / "x").mkdir()                                  # file -> dir: "x" -> "x/"
    (repo / "d" / "x" / "in").write_text("in\n")
    os.chmod(repo / "d" / "x0", 0o755)                          # the mode alone
    (repo / "d" / "x.y").unlink()
    os.symlink("x0", repo / "d" / "x.y")                        # file -> symlink
    check(guard, inc, [b"d/x", b"d/x0", b"d/x.y"])
    (repo / "d" / "x" / "in").unlink()
    (repo / "d" / "x").rmdir()
    (repo / "d" / "x").write_text("back\n")                     # dir -> file
    (repo / "d" / "x-y").unlink()                               # a deletion
    (repo / "d" / "x.y").unlink()
    (repo / "d" / "x.y").write_text("x.y\n")                    # symlink -> file
    os.chmod(repo / "d" / "x0", 0o644)
    check(guard, inc, [b"d/x", b"d/x-y", b"d/x.y", b"d/x0"])
    for stem in ("x", "x.y", "x0", "x y", "xy"):
        (repo / "d" / stem).unlink()
    check(guard, inc, [b"d/x", b"d/x.y", b"d/x0", b"d/x y", b"d/xy"])   # d vanishes


def test_unchanged_content_writes_nothing_and_a_revert_returns_the_old_tree(
        repo: Path) -> None:
    guard, inc = start(repo)
    first = inc.tree
    before = loose(repo)
    os.utime(repo / "src" / "app.py")                           # touched, same bytes
    assert check(guard, inc, [b"src/app.py"]) == first
    assert loose(repo) == before
    original = (repo / "src" / "app.py").read_bytes()
    (repo / "src" / "app.py").write_text("edited\n")
    check(guard, inc, [b"src/app.py"])
    (repo / "src" / "app.py").write_bytes(original)             # from the parsed cache
    assert check(guard, inc, [b"src/app.py"]) == first
    git(repo, "fsck", "--strict", "--no-progress")
