"""The git shims start gitguard without site-packages (`-S -P gitguard/hookmain.py`): the
daemon's answer needs none of them, and the fallback without a daemon still records."""

from __future__ import annotations

import os
from pathlib import Path

from gitguard.ledger import git_moves
from gitguard.storage.store import Store
from gitguard.workspace import discover
from tests.helpers.commands import gg, git
from tests.helpers.daemons import running_daemon
from tests.helpers.hooks import run_git, with_branch_and_remote

HEAVY = {"pygit2", "pydantic", "click", "watchdog"}


def _imported(stderr: str) -> set[str]:
    return {line.split("|")[-1].strip().split(".")[0] for line in stderr.splitlines()
            if line.startswith("import time:")}


def _moves(repo: Path) -> list[tuple[str, str]]:
    summary = git_moves.summary(Store(discover(repo)))
    return [(m["hook"], m["newHead"]) for m in summary["moves"]]


def test_the_shim_runs_the_launcher_recorded_at_install(repo: Path) -> None:
    with_branch_and_remote(repo)
    gg(repo, "hooks", "install")
    shim = (repo / ".git" / "hooks" / "post-checkout").read_text()
    launcher = Path(__file__).resolve().parents[2] / "gitguard" / "hookmain.py"
    assert f"\nlauncher={launcher}  #" in shim


def test_with_a_daemon_the_hook_imports_no_site_and_nothing_heavy(repo: Path) -> None:
    with_branch_and_remote(repo)
    gg(repo, "hooks", "install")
    gg(repo, "checkpoint")
    other = git(repo, "rev-parse", "other").strip()
    with running_daemon(repo):
        moved = run_git(repo, "checkout", "-q", "other", env={"PYTHONPROFILEIMPORTTIME": "1"})
        assert moved.returncode == 0, moved.stderr
        imported = _imported(moved.stderr)
        assert "gitguard" in imported and not (HEAVY | {"site"}) & imported
    assert ("post-checkout", other) in _moves(repo)


def test_without_a_daemon_the_launcher_falls_back_to_the_full_cli(repo: Path) -> None:
    with_branch_and_remote(repo)
    gg(repo, "hooks", "install")
    gg(repo, "checkpoint")
    other = git(repo, "rev-parse", "other").strip()
    assert os.environ["GITGUARD_NO_DAEMON"] == "1"      # no daemon starts behind the test
    moved = run_git(repo, "checkout", "-q", "other", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert moved.returncode == 0, moved.stderr
    assert "Error" not in moved.stderr and "Traceback" not in moved.stderr
    imported = _imported(moved.stderr)
    # the full library, but no click: the hook runs through integrations.hookcli
    assert {"site", "pygit2"} <= imported and "click" not in imported
    assert ("post-checkout", other) in _moves(repo)
