"""Moves: a file an agent call moved is one change of two paths (issue 31, item 4).

A call that moved a file (`mv`, `git mv`, a script's rename) left its source deleted and
its destination holding the source's bytes. Judged one path at a time, the rollback
deleted the destination (the call made it) and found the source as the agent found it
when the agent had created it: the user's lines in the moved file went with the
destination, and nothing was said. So a move is judged as one file whose history runs
through the source up to the move and through the destination after it:

- it goes back as a move: the source gets its restore target (the bytes right before
  the agent's first write of the file, the user's earlier edits included) and the
  destination what it held before the move (nothing, mostly), but only when every
  change to the file since the agent's first write was an agent call's and the
  destination holds exactly what the agent last wrote;
- otherwise it is one conflict, recorded at the source with `moved_to`: its three-way
  view reads the destination, and `--merge` writes the merged file to the source and
  only then removes the destination, so no line of the user's is left behind or lost.

Where the moves come from: a call's own patches, which the watcher's trees and the
checkpoint chain both give. A source the call deleted and a destination it wrote are
one move when the command's words name them (`shell_targets.moved_paths`: `mv`,
`git mv`), or when the destination holds exactly the source's bytes and no other
deleted file of the call had them (a rename any program made, seen by the watcher).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass

from gitguard.calls import window_rules
from gitguard.calls.classify import command_of
from gitguard.calls.shell_targets import moved_paths
from gitguard.errors import GitguardError
from gitguard.models import ToolLedgerEntry
from gitguard.storage.store import Store


@dataclass(frozen=True)
class Move:
    source: str
    dest: str
    call_id: str


def of_entries(store: Store, root: str, entries: Iterable[ToolLedgerEntry]) -> list[Move]:
    """The moves the finished calls made, read from their patches (and their words)."""
    found: list[Move] = []
    for entry in entries:
        gone = {p.path: p.before_hash for p in entry.file_patches
                if p.after_hash is None and p.before_hash is not None}
        made = {p.path: p.after_hash for p in entry.file_patches if p.after_hash is not None}
        if not gone or not made:
            continue
        pairs: list[tuple[str, str]] = []
        for source, dest in _named(store, root, entry):
            if source in gone and dest in made:
                pairs.append((source, dest))
        taken = {s for s, _ in pairs} | {d for _, d in pairs}
        # A rename no words name: a file the call created holding exactly a deleted file's
        # bytes, as the same kind of file. Not a file it changed (an overwrite with
        # bytes that happen to match is an edit), nor a symlink holding a file's bytes.
        created = {p.path: (p.after_hash, p.after_mode) for p in entry.file_patches
                   if p.after_hash is not None and p.before_hash is None}
        modes = {p.path: p.before_mode for p in entry.file_patches}
        for source, oid in gone.items():
            if source in taken:
                continue
            same = [d for d, (after, mode) in created.items()
                    if after == oid and d not in taken and mode == modes[source]]
            twins = [s for s, before in gone.items() if before == oid and s not in taken]
            if len(same) == 1 and twins == [source]:
                pairs.append((source, same[0]))
                taken |= {source, same[0]}
        found += [Move(s, d, entry.call_id) for s, d in dict.fromkeys(pairs)]
    return found


def _input(store: Store, entry: ToolLedgerEntry) -> dict[str, object] | None:
    if entry.input_ref is None:
        return None
    try:
        tool_input = json.loads(store.read_artifact(entry.input_ref))
    except (GitguardError, OSError, ValueError):
        return None
    return tool_input if isinstance(tool_input, dict) else None


def command_dirs(store: Store, root: str, entry: ToolLedgerEntry) -> frozenset[str] | None:
    """The directories the call's command ran in, when its writes cannot be read from its
    words (window_rules.command_dirs); None otherwise."""
    tool_input = _input(store, entry)
    if tool_input is None:
        return None
    return window_rules.command_dirs(command_of(entry.tool_name, tool_input), tool_input,
                                     root)


def _named(store: Store, root: str, entry: ToolLedgerEntry) -> list[tuple[str, str]]:
    """The (source, destination) pairs the call's command names, workspace-relative."""
    tool_input = _input(store, entry)
    command = command_of(entry.tool_name, tool_input) if tool_input is not None else None
    if tool_input is None or command is None:
        return []
    where = tool_input.get("cwd")
    base = os.path.normpath(os.path.join(root, where) if isinstance(where, str) else root)
    pairs: list[tuple[str, str]] = []
    for source, dest in moved_paths(command, base):
        rel = [os.path.relpath(p, root) for p in (source, dest)]
        if not any(r == ".." or r.startswith("../") for r in rel):
            pairs.append((rel[0], rel[1]))
    return pairs
