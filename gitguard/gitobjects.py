"""git's object vocabulary, one copy each: entry modes, the empty tree, object ids, and
reading a tree or a blob out of the object database.

Everything that names a mode, asks for a tree or reads a blob's bytes imports it from
here. The modes are libgit2's (`pygit2.enums.FileMode`), kept as plain ints: they are
compared in the tree diff's and tree builder's inner loops. Blobs that git must convert
on the way out (filters, eol) are read by `gitfilters.Conversion.smudge` instead: that
is git's checkout form, not the stored bytes.
"""

from __future__ import annotations

import hashlib

import pygit2

REGULAR = int(pygit2.enums.FileMode.BLOB)                   # 0o100644
EXECUTABLE = int(pygit2.enums.FileMode.BLOB_EXECUTABLE)     # 0o100755
LINK = int(pygit2.enums.FileMode.LINK)                      # 0o120000: a blob of the target
TREE = int(pygit2.enums.FileMode.TREE)                      # 0o040000
GITLINK = int(pygit2.enums.FileMode.COMMIT)                 # 0o160000: a submodule's commit

_BLOB_MODES = (REGULAR, EXECUTABLE, LINK)

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

BLOB_TYPE = int(pygit2.enums.ObjectType.BLOB)
TREE_TYPE = int(pygit2.enums.ObjectType.TREE)
COMMIT_TYPE = int(pygit2.enums.ObjectType.COMMIT)
_TYPE_NAMES = {BLOB_TYPE: b"blob", TREE_TYPE: b"tree", COMMIT_TYPE: b"commit"}


def object_id(kind: int, data: bytes) -> bytes:
    """The raw id git gives an object of this kind and content: `pygit2.hash` for trees
    and commits too (it hashes blobs only), for objects written without libgit2
    (`packwrite`)."""
    digest = hashlib.sha1(b"%s %d\0" % (_TYPE_NAMES[kind], len(data)))
    digest.update(data)
    return digest.digest()


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
        entry = root[path]
        return read_blob(repo, entry.id) if entry.filemode in _BLOB_MODES else None
    except (KeyError, ValueError):
        return None


def entry_id_at(repo: pygit2.Repository, root: str, path: str) -> str | None:
    """The id of whatever `root` holds at `path` (blob, tree or submodule commit)."""
    found = repo.get(root)
    if not isinstance(found, pygit2.Tree):
        return None
    try:
        return str(found[path].id)
    except KeyError:
        return None
