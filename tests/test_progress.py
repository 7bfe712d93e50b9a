"""Long work tells a `gitguard.progress.Progress` how far it got, and prints nothing: the
first snapshot, `gc`, a rollback of many files (the CLI draws it: tests/cli/
test_terminal_output.py)."""

from __future__ import annotations

import threading
from pathlib import Path

from gitguard.api import Guard
from gitguard.retention import collect
from gitguard.rollback.rollback_files import rollback_files

FILES = 40      # past fileops.PARALLEL_FROM: the writes go through the writer threads


class Recorded:
    """Every report, in order, from whichever thread made it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int | None]] = []
        self._lock = threading.Lock()

    def __call__(self, what: str, done: int = 0, total: int | None = None) -> None:
        with self._lock:
            self.calls.append((what, done, total))

    def phases(self) -> list[str]:
        return list(dict.fromkeys(what for what, _, _ in self.calls))


def _many(repo: Path, text: str = "x") -> None:
    for i in range(FILES):
        (repo / "src" / f"m{i}.py").write_text(f"{text} = {i}\n")


def test_the_first_snapshot_says_it_scans_then_how_many_paths_it_stores(repo: Path) -> None:
    _many(repo)
    told = Recorded()
    with Guard.init(repo) as guard:
        guard.checkpoint("manual", progress=told)
        assert told.phases() == ["first snapshot: scanning the workspace (git status)",
                                 f"first snapshot: storing {FILES} changed path(s)"]
        again = Recorded()
        (repo / "src" / "m0.py").write_text("changed\n")
        guard.status(again)
        # (untracked files the stat index does not hold yet are reported again: stat_tree)
        assert again.phases()[0] == "scanning the workspace (git status)"
        assert again.phases()[1].startswith("storing ") and len(again.phases()) == 2


def test_a_rollback_of_many_files_counts_each_path_put_back(repo: Path) -> None:
    _many(repo)
    with Guard.init(repo) as guard:
        target = guard.checkpoint("manual").checkpoint_id
        entry = guard.begin_call("Bash", {"command": "generate"})
        _many(repo, "agent")
        guard.end_call(entry.call_id, "succeeded")
        told = Recorded()
        result = rollback_files(guard, target, progress=told)
    assert len(result.restored) == FILES
    assert told.phases() == [f"reading what changed since {target}",
                             "storing the safety checkpoint", "putting files back"]
    counts = [(done, total) for what, done, total in told.calls if what == "putting files back"]
    assert counts == [(n, FILES) for n in range(1, FILES + 1)]


def test_a_dry_run_rollback_only_reads(repo: Path) -> None:
    with Guard.init(repo) as guard:
        target = guard.checkpoint("manual").checkpoint_id
        _many(repo)
        told = Recorded()
        rollback_files(guard, target, dry_run=True, progress=told)
    assert told.phases() == [f"reading what changed since {target}"]


def test_gc_counts_its_phases(repo: Path) -> None:
    with Guard.init(repo) as guard:
        guard.checkpoint("manual")
        told = Recorded()
        collect.run(guard.store, guard.snap, guard.settings, repack_repository=False,
                    progress=told)
        dry = Recorded()
        collect.run(guard.store, guard.snap, guard.settings, dry_run=True, progress=dry)
    assert [(done, total) for _, done, total in told.calls] == [(n, 6) for n in range(6)]
    assert told.phases()[0] == "checking the store"
    assert told.phases()[-1] == "packing gitguard's objects, leaving out what went"
    assert dry.calls == [("checking the store", 0, 2), ("planning what to keep", 1, 2)]
