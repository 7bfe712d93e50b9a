"""The O(changed) tree diff equals libgit2's full walk (`diff_to_tree`) and `git diff-tree`."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

import pygit2

from gitguard.git.objects import Change
from gitguard.git.tree_diff import diff_trees

Spec = dict[bytes, "tuple[int, bytes] | Spec"]   # name -> (mode, content) or a subtree
GITLINK_TARGET = b"1" * 40


def _git(repo: Path, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, input=data, capture_output=True,
                          check=True).stdout


def _mktree(repo: Path, spec: Spec) -> str:
    """The tree for a spec, written by git itself (non-UTF-8 names included)."""
    lines = []
    for name, value in spec.items():
        if isinstance(value, dict):
            lines.append(b"040000 tree %s\t%s" % (_mktree(repo, value).encode(), name))
        elif value[0] == 0o160000:
            lines.append(b"160000 commit %s\t%s" % (GITLINK_TARGET, name))
        else:
            oid = _git(repo, "hash-object", "-w", "--stdin", data=value[1]).strip()
            lines.append(b"%o blob %s\t%s" % (value[0], oid, name))
    return _git(repo, "mktree", "-z", "--missing", data=b"".join(x + b"\0" for x in lines)
                ).decode().strip()


def _libgit2(repo: pygit2.Repository, old: str, new: str) -> list[Change]:
    """The slow way the daemon used: libgit2 walks both trees whole."""
    flags = pygit2.enums.DiffOption.INCLUDE_TYPECHANGE
    out = []
    old_tree, new_tree = repo[old], repo[new]
    assert isinstance(old_tree, pygit2.Tree) and isinstance(new_tree, pygit2.Tree)
    for d in old_tree.diff_to_tree(new_tree, flags=flags).deltas:
        gone_old = d.old_file.id.raw == b"\0" * 20
        gone_new = d.new_file.id.raw == b"\0" * 20
        out.append(Change(
            path=os.fsdecode(d.new_file.raw_path if not gone_new else d.old_file.raw_path),
            status=d.status_char(), old_mode=d.old_file.mode, new_mode=d.new_file.mode,
            old_oid=None if gone_old else str(d.old_file.id),
            new_oid=None if gone_new else str(d.new_file.id)))
    return out


def _diff_tree(repo: Path, old: str, new: str) -> list[tuple[str, str]]:
    out = _git(repo, "diff-tree", "-r", "-z", "--no-renames", old, new).split(b"\0")
    return [(os.fsdecode(path), head.split(b" ")[-1].decode())
            for head, path in zip(out[0::2], out[1::2], strict=False) if head.startswith(b":")]


def _init(tmp_path: Path) -> tuple[Path, pygit2.Repository]:
    path = tmp_path / "r"
    _git(tmp_path, "init", "-q", str(path))
    return path, pygit2.Repository(str(path))


def test_every_kind_of_change_matches_libgit2_and_git(tmp_path: Path) -> None:
    path, repo = _init(tmp_path)
    old: Spec = {
        b"same": {b"deep": {b"x.txt": (0o100644, b"x\n")}},
        b"edit.txt": (0o100644, b"one\n"), b"chmod.sh": (0o100644, b"#!/bin/sh\n"),
        b"link": (0o100644, b"target\n"), b"gone": {b"a": (0o100644, b"a\n"),
                                                   b"b": {b"c": (0o100644, b"c\n")}},
        b"file_to_dir": (0o100644, b"f\n"), b"dir_to_file": {b"in": (0o100644, b"i\n")},
        b"sub": (0o160000, b""), b"caf\xe9.txt": (0o100644, b"latin-1 name\n"),
        b"a.b": (0o100644, b"dot\n"), b"a": {b"b": (0o100644, b"ab\n")},
        b"name with space": (0o100644, b"s\n"),
    }
    new: Spec = {
        b"same": {b"deep": {b"x.txt": (0o100644, b"x\n")}},
        b"edit.txt": (0o100644, b"two\n"), b"chmod.sh": (0o100755, b"#!/bin/sh\n"),
        b"link": (0o120000, b"target"), b"file_to_dir": {b"now": (0o100644, b"n\n")},
        b"dir_to_file": (0o100644, b"now a file\n"), b"sub": (0o100644, b"was a submodule\n"),
        b"caf\xe9.txt": (0o100644, b"changed\n"), b"a.b": (0o100644, b"dot\n"),
        b"a": {b"b": (0o100755, b"ab2\n"), b"new": {b"deeper": (0o100644, b"d\n")}},
        b"name with space": (0o100644, b"s2\n"), b"added\xff": (0o100644, b"\0binary\1"),
    }
    a, b = _mktree(path, old), _mktree(path, new)
    for x, y in ((a, b), (b, a), (a, a)):
        fast = diff_trees(repo, x, y)
        assert fast == _libgit2(repo, x, y)
        statuses = {c.path: c.status for c in fast}
        # git splits a type change into a delete and an add only in patches; -r keeps T
        assert sorted(statuses.items()) == sorted(_diff_tree(path, x, y))
    statuses = {c.path: c.status for c in diff_trees(repo, a, b)}
    assert statuses["link"] == "T" and statuses["sub"] == "T"
    assert statuses["chmod.sh"] == "M" and statuses["file_to_dir"] == "D"
    assert statuses["file_to_dir/now"] == "A" and statuses["gone/b/c"] == "D"
    assert "same/deep/x.txt" not in statuses and "a.b" not in statuses


def _build(repo: pygit2.Repository, spec: Spec) -> str:
    """The same as `_mktree`, in-process (the random test builds hundreds of trees)."""
    builder = repo.TreeBuilder()
    for name, value in spec.items():
        if isinstance(value, dict):
            builder.insert(os.fsdecode(name), pygit2.Oid(hex=_build(repo, value)),
                           pygit2.enums.FileMode.TREE)
        else:
            builder.insert(os.fsdecode(name), repo.create_blob(value[1]), value[0])
    return str(builder.write())


def _random_spec(rng: random.Random, depth: int = 0) -> Spec:
    spec: Spec = {}
    for _ in range(rng.randint(0, 5)):
        name = rng.choice([b"a", b"b", b"a.b", b"a-b", b"c", b"d d", b"e"])
        if depth < 3 and rng.random() < 0.35:
            spec[name] = _random_spec(rng, depth + 1)
        else:
            spec[name] = (rng.choice([0o100644, 0o100644, 0o100755, 0o120000]),
                          rng.choice([b"1", b"2", b"3\n"]))
    return spec


def _mutate(rng: random.Random, spec: Spec, depth: int = 0) -> Spec:
    out: Spec = {}
    for name, value in spec.items():
        roll = rng.random()
        if roll < 0.1:
            continue
        if isinstance(value, dict):
            out[name] = _mutate(rng, value, depth + 1) if roll < 0.8 else (0o100644, b"f")
        elif roll < 0.7:
            out[name] = value
        elif roll < 0.8 and depth < 3:
            out[name] = _random_spec(rng, depth + 1)
        else:
            out[name] = (rng.choice([0o100644, 0o100755, 0o120000]), rng.choice([b"1", b"4"]))
    if rng.random() < 0.3:
        out.update(_random_spec(rng, depth + 1))
    return out


def test_random_trees_match_libgit2(tmp_path: Path) -> None:
    path, repo = _init(tmp_path)
    rng = random.Random(5)
    for _ in range(200):
        old = _random_spec(rng)
        new = _mutate(rng, old)
        a, b = _build(repo, old), _build(repo, new)
        assert diff_trees(repo, a, b) == _libgit2(repo, a, b)
        assert diff_trees(repo, b, a) == _libgit2(repo, b, a)


def test_a_remembered_diff_equals_a_fresh_one(tmp_path: Path) -> None:
    """`diff_trees` keeps its last answers (trees never change): each equals the walk."""
    from gitguard.git import tree_diff

    repo = pygit2.init_repository(str(tmp_path / "r"))
    rng = random.Random(7)
    trees = [_build(repo, _random_spec(rng)) for _ in range(12)]
    pairs = [(rng.choice(trees), rng.choice(trees)) for _ in range(60)]
    for old, new in pairs:
        tree_diff._recent.clear()
        first = diff_trees(repo, old, new)
        assert first == _libgit2(repo, old, new)
        first.append(Change("changed by a caller", "A", 0, 0o100644, None, "0" * 40))
        assert diff_trees(repo, old, new) == _libgit2(repo, old, new)
    for old, new in pairs:                  # answered from memory when recent
        assert diff_trees(repo, old, new) == _libgit2(repo, old, new)
    assert len(tree_diff._recent) <= tree_diff._RECENT
