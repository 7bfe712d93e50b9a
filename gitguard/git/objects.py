"""git's object vocabulary, one copy each: entry modes, the empty tree, object ids, and
reading a tree or a blob out of the object database.

Everything that names a mode, asks for a tree or reads a blob's bytes imports it from
here. The modes are libgit2's (`pygit2.enums.FileMode`), kept as plain ints: they are
compared in the tree diff's and tree builder's inner loops. Blobs that git must convert
on the way out (filters, eol) are read by `filters.Conversion.smudge` instead: that
is git's checkout form, not the stored bytes.
"""

from __future__ import annotations

import errno
import hashlib
import re
import sys
from dataclasses import dataclass

import pygit2

REGULAR = int(pygit2.enums.FileMode.BLOB)                   # 0o100644
EXECUTABLE = int(pygit2.enums.FileMode.BLOB_EXECUTABLE)     # 0o100755
LINK = int(pygit2.enums.FileMode.LINK)                      # 0o120000: a blob of the target
TREE = int(pygit2.enums.FileMode.TREE)                      # 0o040000
GITLINK = int(pygit2.enums.FileMode.COMMIT)                 # 0o160000: a submodule's commit

_BLOB_MODES = (REGULAR, EXECUTABLE, LINK)

# What a stat or open of a workspace path raises when nothing is there to read.
NOTHING_THERE = frozenset((errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG))

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

BLOB_TYPE = int(pygit2.enums.ObjectType.BLOB)
TREE_TYPE = int(pygit2.enums.ObjectType.TREE)
COMMIT_TYPE = int(pygit2.enums.ObjectType.COMMIT)
_TYPE_NAMES = {BLOB_TYPE: b"blob", TREE_TYPE: b"tree", COMMIT_TYPE: b"commit"}


def object_id(kind: int, data: bytes) -> bytes:
    """The raw id git gives an object of this kind and content: `pygit2.hash` for trees
    and commits too (it hashes blobs only), for objects written without libgit2
    (`pack_writer`)."""
    digest = hashlib.sha1(b"%s %d\0" % (_TYPE_NAMES[kind], len(data)))
    digest.update(data)
    return digest.digest()


def reference(repo: pygit2.Repository, name: str) -> pygit2.Reference | None:
    """`repo.references.get(name)` for a name made at run time.

    pygit2 (1.20, 1.21) keeps a reference to the name it looks up, so a lookup by a fresh
    str leaves that str in memory for good (sys.getrefcount shows it; the daemon lost two
    a call, ~130 bytes). An interned name is one str per distinct name however often it
    is looked up. Iterating `repo.references.iterator()` gives the references themselves."""
    return repo.references.get(sys.intern(name))


def tree_entry(tree: pygit2.Tree, path: str) -> pygit2.Object:
    """`tree[path]` (KeyError when nothing is there), with the path interned: pygit2 keeps
    the str a tree is indexed by, as it does a reference's name (see `reference`)."""
    return tree[sys.intern(path)]


def as_tree(repo: pygit2.Repository, oid: str | pygit2.Oid) -> pygit2.Tree:
    """The tree `oid`; KeyError when it is missing or not a tree."""
    obj = repo.get(oid)
    if not isinstance(obj, pygit2.Tree):
        raise KeyError(f"{oid} is not a tree")
    return obj


def read_blob(repo: pygit2.Repository, oid: str | pygit2.Oid) -> bytes:
    """A blob's stored bytes; KeyError when it is missing or not a blob. Read from the
    object database without making a Blob object of it."""
    kind, data = repo.odb.read(oid)
    if kind != BLOB_TYPE:
        raise KeyError(f"{oid} is not a blob")
    return bytes(data)


def blob_at(repo: pygit2.Repository, root: pygit2.Tree, path: str) -> bytes | None:
    """The bytes of the blob (file or link) at `path` in `root`; None for nothing there,
    a directory, a submodule or a blob missing from the object database."""
    try:
        entry = tree_entry(root, path)
        return read_blob(repo, entry.id) if entry.filemode in _BLOB_MODES else None
    except (KeyError, ValueError):
        return None


def entry_id_at(repo: pygit2.Repository, root: str, path: str) -> str | None:
    """The id of whatever `root` holds at `path` (blob, tree or submodule commit)."""
    found = repo.get(root)
    if not isinstance(found, pygit2.Tree):
        return None
    try:
        return str(tree_entry(found, path).id)
    except KeyError:
        return None


# --- raw tree objects -------------------------------------------------------------------
# Written by hand only where libgit2 measured slower: the daemon's O(changed) trees
# (`tree_build`: TreeBuilders through an in-memory ODB re-read every tree through Python
# callbacks, ~40% of a 100-file snapshot at 100k files), and names that are not UTF-8,
# which pygit2's TreeBuilder cannot take (`tree_edit`).

TREE_MODES = (b"40000", b"040000")      # as git writes it; the other as some tools did
GITLINK_MODE = b"160000 "

# One entry exactly as the tree holds it: b"<mode> <name>\0<raw 20-byte id>". Kept as
# one bytes object (not a (mode, id) tuple): parsing is one C-level dict() of a regex's
# matches, a tree is written back by joining them, and dicts of bytes are not tracked
# by the cyclic GC. At 100k files, with ~180 trees parsed and ~300 written per
# 100-file snapshot, the tuples cost ~3x the parse and GC passes over a large heap.
Entry = bytes
Entries = dict[bytes, Entry]            # name -> entry, in the tree's order

# (name, whole entry) for each entry: the lookahead captures the name first, so that
# dict() takes the pairs as they come.
_ENTRY = re.compile(rb"(?=[0-7]+ ([^\0]+)\0)([0-7]+ [^\0]+\0.{20})", re.DOTALL)
_TREE_PREFIXES = tuple(mode + b" " for mode in TREE_MODES)


def parse_tree(data: bytes) -> Entries:
    """A raw tree object's entries: name -> the entry's bytes, in the tree's order."""
    return dict(_ENTRY.findall(data))


def tree_bytes(entries: Entries) -> bytes:
    """A raw tree object of `entries`, which must already be in git's order (`tree_order`)."""
    return b"".join(entries.values())


def entry_of(mode: bytes, name: bytes, oid: bytes) -> Entry:
    return b"%s %s\0%s" % (mode, name, oid)


def is_tree(entry: Entry) -> bool:
    return entry.startswith(_TREE_PREFIXES)


def tree_order(item: tuple[bytes, Entry]) -> bytes:
    """git's tree order: by name bytes, a directory compared as if it ended in "/"."""
    name, entry = item
    return name + b"/" if is_tree(entry) else name


# --- the value types of tree work: a changed path, a built tree -----------------------

@dataclass(frozen=True)
class Change:
    path: str               # workspace-relative, os.fsdecode of git's bytes
    status: str             # A, M, D, T
    old_mode: int
    new_mode: int
    old_oid: str | None
    new_oid: str | None


@dataclass(frozen=True)
class TreeResult:
    tree: str
    changed: tuple[str, ...]
    skipped: tuple[str, ...]
    duration_ms: float = 0.0    # scan + hashing + write-tree, for the trace
    bytes_hashed: int = 0       # size of the changed files now on disk (before compression)
    # The tree before this scan when known: `tree` then differs from it at most at `changed`.
    base: str | None = None


def file_at(tree: pygit2.Tree | None, path: str) -> tuple[int, str] | None:
    """The file (blob, link or gitlink) at `path`, None for nothing or a directory."""
    if tree is None:
        return None
    path.encode()       # pygit2 names are UTF-8: a surrogate-escaped name raises here
    try:
        entry = tree_entry(tree, path)
    except KeyError:
        return None
    return None if entry.type_str == "tree" else (entry.filemode, str(entry.id))
