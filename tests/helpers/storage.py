"""Helpers shared by the gc and storage tests: a retention that prunes, and edit calls."""

from __future__ import annotations

from pathlib import Path

from gitguard.api import Guard

# Sessions of any age are pruned to their first and last two checkpoints.
GC_ENV = {"GITGUARD_GC_KEEP_DAYS": "0", "GITGUARD_GC_KEEP_LAST": "2"}


def calls(repo: Path, guard: Guard, n: int, start: int = 0) -> None:
    """`n` finished agent calls, each editing src/app.py."""
    for i in range(start, start + n):
        entry = guard.begin_call("Edit", {"file_path": "src/app.py", "n": i},
                                 writes=["src/app.py"])
        (repo / "src" / "app.py").write_text(f"def main():\n    return {i}\n")
        guard.end_call(entry.call_id, "succeeded", f"edit {i}")
