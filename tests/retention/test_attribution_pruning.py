"""gc drops the attribution rows no kept checkpoint can need (gitguard.retention.attribution):
every rollback to a kept checkpoint plans the same steps and conflicts as before gc, the
newest row of each path (what `status` reads) stays, and a user edit stays protected.

The rows are written with attribution_log.append, the daemon's own writer, as its watcher would
write them: a running daemon would add nothing but timing to what is tested here."""

from __future__ import annotations

import time
from pathlib import Path

from gitguard.api import Guard
from gitguard.calls import attribution_log
from gitguard.calls.attribution import USER, Verdict
from gitguard.retention import attribution
from gitguard.rollback import rollback_files
from tests.helpers.commands import gg
from tests.helpers.storage import GC_ENV


def rows(guard: Guard, *items: tuple[str, str, str]) -> None:
    attribution_log.append(guard.store, [Verdict(p, owner, conf, time.time())
                                         for p, owner, conf in items])


def write(guard: Guard, repo: Path, rel: str, text: str, confidence: str = "exact") -> None:
    with guard.tool_call("Edit", {"file_path": rel, "text": text}, writes=[rel]) as entry:
        (repo / rel).write_text(text)
    rows(guard, (rel, entry.call_id, confidence))


def plans(guard: Guard) -> dict[str, tuple[list[tuple[str, str | None]], list[str]]]:
    """Per checkpoint, what a rollback to it would do (a dry run writes nothing)."""
    found = {}
    for row in guard.checkpoints():
        result = rollback_files.rollback_files(guard, row.checkpoint_id, dry_run=True)
        found[row.checkpoint_id] = (sorted((c.path, c.reason) for c in result.plan.conflicts),
                                    sorted(s.path for s in result.plan.steps))
    return found


def test_gc_drops_unneeded_attribution_rows_and_rollback_still_protects(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    rows(guard, ("src/app.py", "call_old", "exact"), ("notes.txt", USER, "exact"),
         ("notes.txt", USER, "exact"))                 # all before the first checkpoint
    guard.checkpoint(kind="manual", step_id="start")
    for n in range(4):                                 # a call's exact rows, again and again
        write(guard, repo, "src/app.py", f"def main():\n    return {n}\n")
    write(guard, repo, "b.txt", "agent one\n")
    (repo / "b.txt").write_text("the user's edit\n")
    rows(guard, ("b.txt", USER, "exact"))              # the watcher saw the user
    write(guard, repo, "b.txt", "agent two\n")         # ... then a call wrote it again
    write(guard, repo, "c.txt", "shell output\n", confidence="ambiguous")
    write(guard, repo, "c.txt", "shell output 2\n")
    for n in range(3):
        write(guard, repo, "src/app.py", f"def main():\n    return {10 + n}\n")
    (repo / "c.txt").write_text("the user's last word\n")
    (repo / "e.txt").write_text("the user's own file\n")
    rows(guard, ("c.txt", USER, "exact"), ("e.txt", USER, "exact"))
    guard.end_session()
    store = guard.store
    full = store.attribution_path.read_bytes()
    before_rows = attribution_log.read(store)
    before_latest = attribution_log.latest(store)
    # Every checkpoint counted as kept: compacting alone changes no rollback's plan.
    before = plans(guard)
    with store.writing():
        assert attribution.compact(store, [r.created_at for r in guard.checkpoints()]) > 0
    assert plans(guard) == before
    store.attribution_path.write_bytes(full)
    gg(repo, "gc", env=GC_ENV)

    fresh = Guard.open(repo)
    after_rows = attribution_log.read(fresh.store)
    assert attribution_log.latest(fresh.store) == before_latest
    rest = iter(before_rows)                           # a subsequence, in order
    assert all(any(r == b for b in rest) for r in after_rows)
    assert len(after_rows) < len(before_rows)
    kept = {(r.path, r.owner) for r in after_rows}
    assert ("b.txt", USER) in kept and ("c.txt", "call_7") in kept
    assert not any(r.owner == "call_old" for r in after_rows)
    assert sum(1 for r in after_rows if r.path == "notes.txt") == 1
    assert sum(1 for r in after_rows if r.path == "src/app.py") == 1
    # After gc, the kept checkpoints' plans are what the full rows would give.
    compacted = fresh.store.attribution_path.read_bytes()
    after = plans(fresh)
    fresh.store.attribution_path.write_bytes(full)
    assert plans(fresh) == after
    fresh.store.attribution_path.write_bytes(compacted)

    # Rolling back for real after gc, to the oldest kept checkpoint: the user's edits stay.
    rollback_files.rollback_files(fresh, fresh.checkpoints()[0].checkpoint_id)
    assert (repo / "c.txt").read_text() == "the user's last word\n"
    assert (repo / "e.txt").read_text() == "the user's own file\n"


def test_compact_keeps_every_row_while_each_can_still_matter(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    write(guard, repo, "a.txt", "one\n")
    rows(guard, ("a.txt", USER, "exact"))
    raw = guard.store.attribution_path.read_bytes()
    with guard.store.writing():                        # no kept checkpoint: newest per path
        assert attribution.compact(guard.store, []) == 1
    assert [(r.path, r.owner) for r in attribution_log.read(guard.store)] == [("a.txt", USER)]
    guard.store.attribution_path.write_bytes(raw)
    with guard.store.writing():                        # a user row after the checkpoint stays
        assert attribution.compact(guard.store, ["2000-01-01T00:00:00.000Z"]) == 1
    assert guard.store.attribution_path.read_bytes() == raw.split(b"\n", 1)[1]
