"""The in-process patch text: `git apply` takes it both ways and lands on the exact trees."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pygit2

from gitguard.git.patch_text import _quoted, render
from gitguard.git.tree_diff import diff_trees
from tests.helpers.realfiles import LARGE_MODULES, module_file

Files = dict[bytes, tuple[int, bytes]]      # path -> (mode, content); 160000: a gitlink id


def _git(repo: Path, *args: str, data: bytes | None = None,
         env: dict[str, str] | None = None) -> bytes:
    return subprocess.run(["git", *args], cwd=repo, input=data, capture_output=True,
                          check=True, env={**os.environ, **(env or {})}).stdout


def _tree(repo: Path, files: Files) -> str:
    """The tree of these files, through a private index (update-index takes raw names)."""
    env = {"GIT_INDEX_FILE": str(repo / ".git" / "scratch-index")}
    (repo / ".git" / "scratch-index").unlink(missing_ok=True)
    lines = []
    for path, (mode, content) in files.items():
        oid = (content if mode == 0o160000 else
               _git(repo, "hash-object", "-w", "--stdin", data=content).strip())
        lines.append(b"%o %s\t%s\0" % (mode, oid, path))
    _git(repo, "update-index", "-z", "--index-info", data=b"".join(lines), env=env)
    return _git(repo, "write-tree", env=env).decode().strip()


def _applied(repo: Path, start: str, patch: bytes, reverse: bool) -> str:
    """The tree `git apply --cached` makes of `start` with the patch (forwards or back)."""
    env = {"GIT_INDEX_FILE": str(repo / ".git" / "apply-index")}
    _git(repo, "read-tree", start, env=env)
    _git(repo, "apply", "--cached", *(["-R"] if reverse else []), data=patch, env=env)
    return _git(repo, "write-tree", env=env).decode().strip()


def _roundtrip(tmp_path: Path, before: Files, after: Files) -> bytes:
    repo = tmp_path / "r"
    if not repo.exists():
        _git(tmp_path, "init", "-q", str(repo))
    pre, post = _tree(repo, before), _tree(repo, after)
    git_repo = pygit2.Repository(str(repo))
    patch = render(git_repo, diff_trees(git_repo, pre, post))
    assert _applied(repo, post, patch, reverse=True) == pre
    assert _applied(repo, pre, patch, reverse=False) == post
    return patch


SUB_1, SUB_2 = b"1" * 40, b"2" * 40
BEFORE: Files = {
    b"edit.txt": (0o100644, b"".join(b"line %d\n" % i for i in range(40))),
    b"chmod.sh": (0o100644, b"#!/bin/sh\necho hi\n"),
    b"chmod_and_edit.sh": (0o100644, b"echo 1\n"),
    b"gone.txt": (0o100644, b"bye\n"),
    b"gone_empty": (0o100644, b""),
    b"to_link": (0o100644, b"target.txt\n"),
    b"link_to_file": (0o120000, b"edit.txt"),
    b"link_moves": (0o120000, b"a/b"),
    b"img.bin": (0o100644, bytes(range(256)) * 8),
    b"text_to_bin": (0o100644, b"was text\n"),
    b"no_newline.txt": (0o100644, b"a\nb"),
    b"dir/file_becomes_dir": (0o100644, b"f\n"),
    b"caf\xc3\xa9.txt": (0o100644, b"utf-8 name\n"),
    b"latin\xe9.txt": (0o100644, b"latin-1 name\n"),
    b"latin1_content.txt": (0o100644, b"na\xefve\ncaf\xe9\n"),
    b"name with space.txt": (0o100644, b"s\n"),
    b'quote"back\\slash\ttab': (0o100644, b"odd\n"),
    b"sub": (0o160000, SUB_1),
    b"sub_to_file": (0o160000, SUB_1),
}
AFTER: Files = {
    b"edit.txt": (0o100644, b"".join(b"line %d\n" % (i * (i != 20)) for i in range(40))
                  + b"end\n"),
    b"chmod.sh": (0o100755, b"#!/bin/sh\necho hi\n"),
    b"chmod_and_edit.sh": (0o100755, b"echo 2\n"),
    b"to_link": (0o120000, b"target.txt"),
    b"link_to_file": (0o100644, b"now a file\n"),
    b"link_moves": (0o120000, b"c/d"),
    b"img.bin": (0o100644, bytes(range(255, -1, -1)) * 8),
    b"text_to_bin": (0o100644, b"\0now binary\1"),
    b"no_newline.txt": (0o100644, b"a\nc"),
    b"dir/file_becomes_dir/inner.txt": (0o100644, b"inner\n"),
    b"caf\xc3\xa9.txt": (0o100644, b"changed\n"),
    b"latin\xe9.txt": (0o100644, b"changed too\n"),
    b"latin1_content.txt": (0o100644, b"na\xefve\ncaf\xe9 cr\xe8me\n"),
    b"name with space.txt": (0o100644, b"s2\n"),
    b'quote"back\\slash\ttab': (0o100644, b"odder\n"),
    b"new_empty": (0o100644, b""),
    b"new\xff.bin": (0o100755, b"\0\0\0\xff"),
    b"sub": (0o160000, SUB_2),
    b"sub_to_file": (0o100644, b"a file now\n"),
    b"new_sub": (0o160000, SUB_2),
}


def test_git_apply_reverses_and_replays_every_kind_of_change(tmp_path: Path) -> None:
    patch = _roundtrip(tmp_path, BEFORE, AFTER)
    assert b"GIT binary patch" in patch and b"Subproject commit" in patch
    assert b"\nnew file mode 100755\n" in patch and b"\ndeleted file mode 120000\n" in patch


def test_single_changes_one_at_a_time(tmp_path: Path) -> None:
    """Each change alone (a patch of one section is what most calls store)."""
    for path in sorted(BEFORE.keys() | AFTER.keys()):
        after = dict(BEFORE)
        if path in AFTER:
            after[path] = AFTER[path]
        else:
            del after[path]
        before = {p: v for p, v in BEFORE.items() if not (
            b"/" in p and p.rsplit(b"/", 1)[0] in after)}   # a path cannot be file and dir
        _roundtrip(tmp_path, before, after)


def test_text_patches_are_what_git_diff_tree_prints(tmp_path: Path) -> None:
    """For text files the bytes equal git's own output (the artifact `gitguard diff` shows)."""
    before = {p: v for p, v in BEFORE.items() if p.endswith(b".txt") or p.endswith(b".sh")}
    after = {p: v for p, v in AFTER.items() if p.endswith(b".txt") or p.endswith(b".sh")}
    repo = tmp_path / "r"
    _git(tmp_path, "init", "-q", str(repo))
    pre, post = _tree(repo, before), _tree(repo, after)
    git_repo = pygit2.Repository(str(repo))
    mine = render(git_repo, diff_trees(git_repo, pre, post))
    theirs = _git(repo, "-c", "core.quotePath=true", "diff-tree", "-p", "--binary",
                  "--full-index", "--no-renames", "--no-color", pre, post)
    assert mine == theirs


def test_contents_the_caller_holds_give_the_same_patch(tmp_path: Path) -> None:
    """A rollback hands over the bytes it read and wrote: the patch equals one read from git."""
    repo = tmp_path / "r"
    _git(tmp_path, "init", "-q", str(repo))
    pre, post = _tree(repo, BEFORE), _tree(repo, AFTER)
    git_repo = pygit2.Repository(str(repo))
    changes = diff_trees(git_repo, pre, post)
    known = {}
    for change in changes:
        for oid, mode in ((change.old_oid, change.old_mode), (change.new_oid, change.new_mode)):
            if oid and mode != 0o160000:
                blob = git_repo[oid]
                assert isinstance(blob, pygit2.Blob)
                known[oid] = bytes(blob.data)
    assert len(known) > 10
    assert render(git_repo, changes, known) == render(git_repo, changes)
    # Nothing is read from the store for a held blob: a different value shows up in the patch.
    some = next(c for c in changes if c.path == "edit.txt")
    assert some.new_oid is not None
    assert b"+held\n" in render(git_repo, [some], {**known, some.new_oid: b"held\n"})


def test_quoting_is_decided_per_byte_as_git_decides() -> None:
    """The regex that finds a name plain quotes exactly the names a byte-by-byte check
    (a control byte, DEL and above, `"` or backslash) quotes."""
    for c in range(256):
        name = b"a" + bytes([c]) + b"b"
        plain = not (c < 0x20 or c >= 0x7F or c in (0x22, 0x5C))
        assert (_quoted(name) == name) is plain, c
    assert _quoted("caf\udce9 x".encode(errors="surrogateescape")) == b'"caf\\351 x"'


_LITERAL = re.compile(rb"^(literal|delta) (\d+)$")


def _inflated(patch: bytes) -> bytes:
    """The patch with each binary literal replaced by its inflated bytes: libgit2 deflates
    with another zlib level than git, so the base85 lines differ while the data is equal."""
    out: list[bytes] = []
    lines = iter(patch.split(b"\n"))
    for line in lines:
        out.append(line)
        if _LITERAL.match(line):
            packed = b""
            for data in lines:
                if not data:
                    break
                size = data[0] - (ord("A") - 1 if data[0] <= ord("Z") else ord("a") - 27)
                packed += base64.b85decode(data[1:])[:size]
            out.append(zlib.decompress(packed).hex().encode())
            out.append(b"")
    return b"\n".join(out)


def _real_edits() -> tuple[Files, Files]:
    """Large modules nobody here wrote, each edited the way an agent edits: a renamed
    function, lines inserted in the middle, the tail cut, and one module deleted."""
    before: Files = {}
    after: Files = {}
    for i, name in enumerate(LARGE_MODULES):
        data = module_file(name).read_bytes()
        path = b"real/%d_%s" % (i, name.replace(".", "_").encode() + b".py")
        before[path] = (0o100644, data)
        lines = data.splitlines(keepends=True)
        middle = len(lines) // 2
        edited = (b"".join(lines[:middle]).replace(b"def ", b"def  ", 3)
                  + b"# inserted by the agent\n" * 3 + b"".join(lines[middle:-40]))
        if i != len(LARGE_MODULES) - 1:
            after[path] = (0o100644, edited)
    after[b"real/new_copy.py"] = (0o100755, module_file(LARGE_MODULES[0]).read_bytes())
    return before, after


def test_every_patch_is_git_diff_tree_output(tmp_path: Path) -> None:
    """Headers and hunks byte for byte what git prints for the same two trees, for every
    kind of change and for large real files; binary literals equal once inflated."""
    real_before, real_after = _real_edits()
    before, after = {**BEFORE, **real_before}, {**AFTER, **real_after}
    repo = tmp_path / "r"
    _git(tmp_path, "init", "-q", str(repo))
    pre, post = _tree(repo, before), _tree(repo, after)
    git_repo = pygit2.Repository(str(repo))
    mine = render(git_repo, diff_trees(git_repo, pre, post))
    theirs = _git(repo, "-c", "core.quotePath=true", "diff-tree", "-p", "--binary",
                  "--full-index", "--no-renames", "--no-color", pre, post)
    assert b"GIT binary patch" in mine and b"+# inserted by the agent" in mine
    assert _inflated(mine) == _inflated(theirs)
    assert _applied(repo, post, mine, reverse=True) == pre


_RENDER_IN_A_CHILD = """
import sys, pygit2
from gitguard.git.patch_text import render
from gitguard.git.tree_diff import diff_trees
repo = pygit2.Repository(sys.argv[1])
sys.stdout.buffer.write(render(repo, diff_trees(repo, sys.argv[2], sys.argv[3])))
"""


def test_large_real_file_patches_read_no_freed_memory(tmp_path: Path) -> None:
    """With glibc scribbling over freed memory, the patch of an edit of click's core.py is
    still git's. The bytes handed to libgit2 were temporaries: pygit2 keeps no reference
    to them and `patch.data` read freed memory (a segfault here, garbage bytes in a
    patch when the memory was not reused yet)."""
    before, after = _real_edits()
    repo = tmp_path / "r"
    _git(tmp_path, "init", "-q", str(repo))
    pre, post = _tree(repo, before), _tree(repo, after)
    child = subprocess.run([sys.executable, "-c", _RENDER_IN_A_CHILD, str(repo), pre, post],
                           capture_output=True,
                           env={**os.environ, "MALLOC_PERTURB_": "165",
                                "PYTHONMALLOC": "malloc"})
    assert child.returncode == 0, child.stderr.decode(errors="replace")[-2000:]
    theirs = _git(repo, "diff-tree", "-p", "--binary", "--full-index", "--no-renames",
                  "--no-color", pre, post)
    assert child.stdout == theirs
    assert _applied(repo, post, child.stdout, reverse=True) == pre
