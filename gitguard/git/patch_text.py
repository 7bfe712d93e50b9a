"""A call's patch in git's format, in-process: what `git diff-tree -p --binary
--full-index --no-renames` prints for the same changes, without a git process.

`call end` stored the output of that subprocess as the call's patch artifact (about
5 ms of a call through the daemon). libgit2 makes the hunks and the binary
literals from the two blobs; the headers are written here the way git writes them
(quoted names, file modes, full ids), because libgit2's header of a blob pair
knows neither the modes nor that a side is missing. The one contract that
matters, `git apply -R` undoing the call exactly, is what the tests check, on new,
deleted, renamed-mode, symlink, submodule, binary and non-UTF-8 paths.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

import pygit2

from gitguard.git.objects import GITLINK, Change, read_blob

_FLAGS = pygit2.enums.DiffOption.SHOW_BINARY
_NULL_ID = "0" * 40
_KIND = 0o170000
_ESCAPES = {0x07: b"\\a", 0x08: b"\\b", 0x09: b"\\t", 0x0A: b"\\n", 0x0B: b"\\v",
            0x0C: b"\\f", 0x0D: b"\\r", 0x22: b'\\"', 0x5C: b"\\\\"}
_BODY_STARTS = (b"\n@@ ", b"\nGIT binary patch", b"\nBinary files ")
_NEEDS_QUOTES = re.compile(rb'[\x00-\x1f\x7f-\xff"\\]')   # what _quoted escapes


def render(repo: pygit2.Repository, changes: Iterable[Change],
           known: Mapping[str, bytes] | None = None) -> bytes:
    """The patch of these changes (as `diff_trees` lists them), ready for `git apply`.

    `known`: blob contents by id the caller already holds (a rollback read them to write
    or to check the file), so they are not read back from the object store.
    """
    known = known or {}
    out: list[bytes] = []
    for change in changes:
        raw = os.fsencode(change.path)
        old = (change.old_mode, change.old_oid) if change.old_oid else None
        new = (change.new_mode, change.new_oid) if change.new_oid else None
        if old and new and old[0] & _KIND != new[0] & _KIND:
            # git shows a type change (file <-> symlink <-> submodule) as a delete and an add
            out.append(_section(repo, raw, old, None, known))
            out.append(_section(repo, raw, None, new, known))
        else:
            out.append(_section(repo, raw, old, new, known))
    return b"".join(out)


def _section(repo: pygit2.Repository, path: bytes, old: tuple[int, str] | None,
             new: tuple[int, str] | None, known: Mapping[str, bytes]) -> bytes:
    a, b = _quoted(b"a/" + path), _quoted(b"b/" + path)
    head = [b"diff --git %s %s\n" % (a, b)]
    if old is None and new is not None:
        head.append(b"new file mode %06o\n" % new[0])
    elif new is None and old is not None:
        head.append(b"deleted file mode %06o\n" % old[0])
    elif old is not None and new is not None and old[0] != new[0]:
        head.append(b"old mode %06o\nnew mode %06o\n" % (old[0], new[0]))
    old_id = old[1] if old else _NULL_ID
    new_id = new[1] if new else _NULL_ID
    if old_id != new_id:
        same_mode = old is not None and new is not None and old[0] == new[0]
        head.append(b"index %s..%s%s\n" % (old_id.encode(), new_id.encode(),
                                           b" %06o" % old[0] if same_mode and old else b""))
    body = _body(repo, path, old, new, known) if old_id != new_id else b""
    if body.startswith(b"@@ "):
        minus = a if old else b"/dev/null"
        plus = b if new else b"/dev/null"
        head.append(b"--- %s%s\n+++ %s%s\n" % (minus, b"\t" if b" " in minus else b"",
                                               plus, b"\t" if b" " in plus else b""))
    return b"".join(head) + body


def _body(repo: pygit2.Repository, path: bytes, old: tuple[int, str] | None,
          new: tuple[int, str] | None, known: Mapping[str, bytes]) -> bytes:
    """libgit2's hunks (or binary literals) for the two sides, its own header cut off."""
    name = os.fsdecode(path)
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        name = ""       # only used to look up diff attributes; a raw name has none to find
    # libgit2 keeps pointers into both buffers (and the names) and reads them again when
    # `patch.data` formats the lines; pygit2 holds a reference only to Blob arguments, not to
    # bytes. Passing temporaries read freed memory (a segfault on a 148 KB file, garbage
    # bytes in smaller patches), so the buffers stay bound here until the text is copied out
    # and the patch is freed first.
    old_data, new_data = _content(repo, old, known), _content(repo, new, known)
    patch = pygit2.Patch.create_from(old_data, new_data, old_as_path=name, new_as_path=name,
                                     flag=_FLAGS)
    data: bytes = patch.data
    del patch
    found = [at for at in map(data.find, _BODY_STARTS) if at >= 0]
    return data[min(found) + 1:] if found else b""


def _content(repo: pygit2.Repository, side: tuple[int, str] | None,
             known: Mapping[str, bytes]) -> bytes | None:
    if side is None:
        return None
    mode, oid = side
    if mode == GITLINK:
        return b"Subproject commit %s\n" % oid.encode()     # what git shows for a submodule
    if oid in known:
        return known[oid]
    return read_blob(repo, oid)


def _quoted(name: bytes) -> bytes:
    """git's C-style quoting of a path (core.quotePath's default): as-is when plain."""
    if _NEEDS_QUOTES.search(name) is None:
        return name
    out = bytearray(b'"')
    for c in name:
        if c in _ESCAPES:
            out += _ESCAPES[c]
        elif c < 0x20 or c >= 0x7F:
            out += b"\\%03o" % c
        else:
            out.append(c)
    return bytes(out) + b'"'
