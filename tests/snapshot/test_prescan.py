"""The early `git status` of a daemon-less `gitguard resume` (gitguard.snapshot.prescan) answers
exactly as the scan's own status would, and is dropped whenever it may not."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitguard.api import Guard
from gitguard.snapshot import prescan
from tests.helpers.crashkit import git, make_repo, scratch_root


@pytest.fixture
def guard() -> Iterator[Guard]:
    root = scratch_root()
    made = Guard.init(make_repo(root / "repo"))
    made.start_session("s1")
    made.snap.write_tree()      # the first snapshot reads the user's index (first_scan)
    made.snap.write_tree()      # the stat index a scan leaves (the early status needs it)
    yield made
    prescan.drop()
    made.close()
    shutil.rmtree(root, ignore_errors=True)


def edit(root: Path) -> None:
    """A modified, a deleted and a new tracked-looking file, a new directory, an ignored
    file and a non-UTF-8 name: every kind of line the scan parses."""
    (root / "src" / "app.py").write_text("def main():\n    return 2\n")
    (root / "README.md").unlink()
    (root / "notes.txt").write_text("new\n")
    (root / "pkg" / "deep").mkdir(parents=True)
    (root / "pkg" / "deep" / "mod.py").write_text("x = 1\n")
    (root / "build" / "more.bin").write_bytes(b"\x01")
    (root / os.fsdecode(b"caf\xe9.txt")).write_text("latin-1 name\n")


def start(g: Guard) -> None:
    prescan.start(str(g.store.ws.root), str(g.store.root))
    assert prescan.pending()


def test_the_early_status_is_the_scans_own_status(guard: Guard) -> None:
    edit(guard.store.ws.root)
    start(guard)
    early = prescan.take(guard.store.ws.git_dir, guard.store.ws.root, guard.store.stat_index)
    assert early is not None and not prescan.pending()
    assert early == guard.snap._status("--untracked-files=normal")
    assert b"notes.txt" in early and b"caf\xe9.txt" in early


def test_a_scan_with_the_early_status_equals_one_without(guard: Guard) -> None:
    edit(guard.store.ws.root)
    start(guard)
    fast = guard.snap.scan()
    assert not prescan.pending()            # the scan took it
    assert fast == guard.snap.scan()        # no early status: the scan's own
    assert b"pkg/deep/mod.py" in fast[0]


def test_a_replaced_stat_index_drops_the_early_status(guard: Guard) -> None:
    root = guard.store.ws.root
    start(guard)
    edit(root)     # after the early status may have run, and recorded by another writer:
    guard.snap.write_tree()     # update-index replaces the stat index
    start(guard)
    (root / "late.txt").write_text("late\n")
    guard.snap._git(["update-index", "--add", "late.txt"])
    assert prescan.take(guard.store.ws.git_dir, root, guard.store.stat_index) is None
    assert not prescan.pending()


def test_another_workspace_drops_the_early_status(guard: Guard, tmp_path: Path) -> None:
    start(guard)
    assert prescan.take(guard.store.ws.git_dir, tmp_path, guard.store.stat_index) is None
    assert not prescan.pending()


def test_no_stat_index_starts_nothing(guard: Guard) -> None:
    guard.store.stat_index.unlink()
    prescan.start(str(guard.store.ws.root), str(guard.store.root))
    assert not prescan.pending()


def test_resume_cli_runs_one_status_and_answers_as_in_process(guard: Guard,
                                                             tmp_path: Path) -> None:
    """The whole CLI: the scan took the early status (git ran status once, not twice) and
    the answer is the in-process one, twice."""
    root = guard.store.ws.root
    guard.begin_call("send_email", {"to": "a@example.com"})
    edit(root)
    # --json still prints a non-UTF-8 path's raw bytes (known, not this module's concern)
    (root / os.fsdecode(b"caf\xe9.txt")).unlink()
    traced = tmp_path / "trace.txt"
    env = {**os.environ, "GIT_TRACE": str(traced)}
    env.pop("GITGUARD_FAULT", None)
    run = [sys.executable, "-m", "gitguard", "resume", "--json"]
    first = subprocess.run(run, cwd=root, env=env, capture_output=True, check=True).stdout
    statuses = [line for line in traced.read_text(errors="replace").splitlines()
                if "built-in: git status" in line and "--untracked-files=normal" in line]
    assert len(statuses) == 1
    answer = json.loads(first)
    assert answer["uncertain"] == ["call_1"]
    assert json.loads(first) == guard.resume().to_json()
    assert subprocess.run(run, cwd=root, env=env, capture_output=True, check=True
                          ).stdout == first
    assert "main" in git(root, "branch")
