"""rollback-files to a checkpoint that gc kept, across checkpoints it pruned: the agent's
changes in between are still found (through the calls' recorded patches), and a user edit
the pruned snapshots would have shown is never overwritten."""

from __future__ import annotations

from pathlib import Path

from gitguard.api import Guard
from gitguard.rollback.rollback_files import rollback_files
from tests.helpers.commands import gg
from tests.helpers.rollback import tree_state
from tests.helpers.storage import GC_ENV


def edit(guard: Guard, rel: str, text: str) -> None:
    with guard.tool_call("Edit", {"file_path": rel, "text": text}, writes=[rel]):
        (guard.ws.root / rel).write_text(text)


def test_the_agents_changes_across_pruned_checkpoints_are_rolled_back(repo: Path) -> None:
    before = tree_state(repo)
    guard = Guard.open(repo)
    guard.start_session("s1")
    guard.checkpoint(kind="manual", step_id="start")
    for n in range(3):
        edit(guard, "src/app.py", f"def main():\n    return {n}\n")
        edit(guard, "README.md", f"# project {n}\n")
    edit(guard, "new.txt", "made by the agent\n")
    (repo / "mine.txt").write_text("the user's own file\n")
    guard.end_session()
    guard.close()
    gg(repo, "gc", env=GC_ENV)

    with Guard.open(repo) as guard:
        first = guard.checkpoints()[0]
        assert len(guard.checkpoints()) < 10, "gc pruned the checkpoints in between"
        result = rollback_files(guard, first.checkpoint_id)
    assert not result.conflicts
    assert sorted(result.restored) == ["README.md", "src/app.py"]
    assert result.deleted == ["new.txt"]
    assert tree_state(repo) == before | {"mine.txt": ("file", b"the user's own file\n", False)}


def test_a_user_edit_inside_the_pruned_stretch_becomes_a_conflict(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    guard.checkpoint(kind="manual", step_id="start")
    edit(guard, "src/app.py", "def main():\n    return 2\n")
    (repo / "src" / "app.py").write_text("def main():\n    return 2  # the user's note\n")
    edit(guard, "src/app.py", "def main():\n    return 3  # the user's note\n")   # on top
    edit(guard, "README.md", "# agent\n")
    (repo / "README.md").write_text("# the user's title\n")
    for n in range(3):
        edit(guard, "other.txt", f"agent {n}\n")
    guard.end_session()
    guard.close()
    gg(repo, "gc", env=GC_ENV)

    with Guard.open(repo) as guard:
        first = guard.checkpoints()[0]
        result = rollback_files(guard, first.checkpoint_id)
    reasons = {c.path: c.reason or "" for c in result.conflicts}
    assert sorted(reasons) == ["README.md", "src/app.py"]
    assert "gc pruned" in reasons["src/app.py"]
    assert result.deleted == ["other.txt"]
    assert (repo / "src" / "app.py").read_text() == "def main():\n    return 3  # the user's note\n"
    assert (repo / "README.md").read_text() == "# the user's title\n"
