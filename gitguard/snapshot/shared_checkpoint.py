"""One checkpoint for call N's post and call N+1's pre when nothing happened in between.

DESIGN asks for a checkpoint before and after every step. When a call begins right
after the previous call of its session ended, and nothing changed since (the same
snapshot tree, the same skipped paths, the same HEAD and branch, no ledger event and
no checkpoint of anyone after that call's `finished` record), the checkpoint the
previous call ended with already is the state before this one: a new file holding the
same commit, HEAD, dirty summary, run state and messages would differ only in its id,
kind and ledger position. The new call's ledger entry names that checkpoint as its pre
checkpoint, exactly as it would name a fresh one; every reader goes by that id (resume,
rollback-files --to, restore-session, timeline, verify, gc's in-flight set), so
nothing else changes. What it saves per call: the checkpoint file (a create, a write, an
fsync, a rename and a directory fsync) and its index line (an fsync).

The checkpoint's `ledgerSeq` stays the previous call's (the ledger's last before that
call's `finished`): it still never points past the ledger, and a restore to it lists
the same calls after it as a separate pre checkpoint would (those whose pre is at or
after it).
"""

from __future__ import annotations

from gitguard.errors import CorruptRecord
from gitguard.git.objects import TreeResult
from gitguard.ledger import journal
from gitguard.models import Checkpoint
from gitguard.snapshot import checkpoints
from gitguard.snapshot.snapshotter import Snapshotter
from gitguard.storage.store import Store


def reusable(store: Store, snap: Snapshotter, index: checkpoints.Index,
             state: journal.LedgerState, session_id: str, tree: TreeResult
             ) -> Checkpoint | None:
    """The previous call's post checkpoint when it can stand as this call's pre, else None.
    Under the store lock (the index and the ledger are the ones just read)."""
    row = index.last()                      # no checkpoint of anyone after it
    if row is None or row.kind != "post" or row.session_id != session_id:
        return None
    try:
        found = checkpoints.load(store, row)
    except CorruptRecord:
        return None
    # Its call's `finished` record names it and is the ledger's last event: a post
    # checkpoint a crash left unnamed, or any event since (another call, a recovery
    # action, a rollback), means a fresh checkpoint.
    entry = state.lookup(found.call_id or "")
    if (entry is None or entry.post_checkpoint_id != row.checkpoint_id
            or found.ledger_seq + 1 != state.last_seq):
        return None
    if tuple(found.skipped) != tuple(tree.skipped):
        return None
    try:
        if snap.tree_of(found.snapshot_commit) != tree.tree:
            return None
    except KeyError:                        # its commit is gone: write a fresh one
        return None
    if snap.head_info() != (found.head, found.branch):
        return None
    return found
