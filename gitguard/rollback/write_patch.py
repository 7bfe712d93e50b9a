"""The bytes and the patch of gitguard's own writes (workspace_writer.apply).

`prepare` reads the bytes to write and appends the input to the journal in a thread
beside the safety checkpoint; the patch is rendered while the writes wait on the disk
(the main thread is idle then) and appended beside the post checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import pygit2

from gitguard import fileops
from gitguard.git import patch_text, tree_diff
from gitguard.git.objects import GITLINK, Change, read_blob
from gitguard.snapshot import dirty_delta

if TYPE_CHECKING:
    from gitguard.guard_context import GuardContext
    from gitguard.rollback.workspace_writer import Step


def known_contents(steps: Sequence[Step], seen: Mapping[str, fileops.Seen] | None,
                   content: Mapping[str, bytes]) -> dict[str, bytes]:
    """Blob contents by id already in hand (what the plan read, what will be written), so
    the patch reads none of them back from the object store."""
    known = {s.state.oid: s.data for s in (seen or {}).values()}
    # A step's own bytes are its blob's unless git converts them on the way out (then the
    # working-tree form is written and the blob is read from the store for the patch).
    known.update((s.target.oid, content[s.path]) for s in steps if s.target is not None
                 and (s.data is None or str(pygit2.hash(s.data)) == s.target.oid))
    return known


def patch(g: GuardContext, old_tree: str, new_tree: str, paths: list[str],
          known: Mapping[str, bytes]) -> bytes:
    """The patch from `old_tree` to `new_tree`, which differ only at `paths` (and under
    them); made in-process, as call end makes it (no git subprocess)."""
    return patch_text.render(g.snap.repo, changes(g, old_tree, new_tree, paths), known)


def changes(g: GuardContext, old_tree: str, new_tree: str, paths: list[str]) -> list[Change]:
    """Every difference is a path written (a path replaced by a directory brings what is
    under it, and then the whole tree diff is needed, which prunes equal subtrees by id)."""
    found = dirty_delta.changes(g.snap.repo, old_tree, new_tree, paths)
    return found if found is not None else tree_diff.diff_trees(g.snap.repo, old_tree, new_tree)


def missing(repo: pygit2.Repository, diff: Iterable[Change], known: Mapping[str, bytes]
            ) -> dict[str, bytes]:
    """The contents the patch shows that are not in hand yet, read from the object store."""
    wanted = {oid for c in diff for mode, oid in ((c.old_mode, c.old_oid),
                                                     (c.new_mode, c.new_oid))
              if oid is not None and mode != GITLINK and oid not in known}
    return {oid: read_blob(repo, oid) for oid in wanted}


def prepare(g: GuardContext, session_id: str, items: list[tuple[str, bytes]], steps: Sequence[Step],
            seen: Mapping[str, fileops.Seen] | None, diff: list[Change] | None, name: str
            ) -> tuple[list[str], dict[str, bytes], dict[str, bytes]]:
    """The bytes to write per path, and `items` appended to the journal, fsynced once;
    with `diff` (and steps) the patch too, in the same append. Returns the refs, those
    bytes, and every content by id in hand (for a patch rendered later).

    Runs in a thread beside the safety checkpoint, on a repository handle of its own: the
    two threads share no libgit2 object (pygit2 holds the GIL in these calls anyway, so
    the overlap is with the checkpoint's fsync waits). apply passes `diff` only for a few
    steps: at 100 files the patch is ~10 ms of CPU that would compete with the checkpoint
    for the GIL before the first write; it is rendered while the writes run instead."""
    repo = pygit2.Repository(str(g.ws.git_dir))
    content = {s.path: s.data if s.data is not None else read_blob(repo, s.target.oid)
               for s in steps if s.target is not None}
    known = known_contents(steps, seen, content)
    if diff is not None and steps:
        known.update(missing(repo, diff, known))
        items = [*items, (name, patch_text.render(repo, diff, known))]
    return g.store.append_artifacts(session_id, items), content, known


def render(g: GuardContext, diff: list[Change], known: dict[str, bytes]) -> bytes:
    """The patch of `diff`, reading from the object store only what is not in `known`."""
    known.update(missing(g.snap.repo, diff, known))
    return patch_text.render(g.snap.repo, diff, known)
