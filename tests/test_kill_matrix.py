"""The kill matrix: a real gitguard process SIGKILLs itself at each named fault point, then
resume must succeed, lose no acknowledged record, change no user file, mark the
interrupted call uncertain when it had started, refuse to replay it, and leave a store
that `gitguard verify` passes."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from crashkit import KNOWN_POINTS, git, make_repo, scratch_root, user_git_state, workspace_files

from gitguard import verify
from gitguard.api import Guard
from gitguard.errors import ReplayRefused

PUBLISH = {"command": "npm publish"}
JOURNALS = ("ledger.jsonl", "checkpoints/index.jsonl", "trace.jsonl")


def setup_begin(guard: Guard, repo: Path) -> None:
    guard.start_session("s1")
    with guard.tool_call("Write", {"file_path": "a.txt"}, writes=["a.txt"]):
        (repo / "a.txt").write_text("agent\n")
    (repo / "notes.txt").write_text("the user's notes\n")   # the next snapshot is a new commit


def setup_started(guard: Guard, repo: Path) -> None:
    setup_begin(guard, repo)
    guard.begin_call("Bash", PUBLISH, call_id="call_2")
    (repo / "build" / "pkg.tgz").write_bytes(b"tarball")
    (repo / "CHANGELOG.md").write_text("1.0.0\n")


def setup_uncertain(guard: Guard, repo: Path) -> None:
    setup_started(guard, repo)
    guard.resume()


def setup_manual(guard: Guard, repo: Path) -> None:
    setup_begin(guard, repo)
    (repo / "notes.txt").write_text("more notes\n")


@dataclass(frozen=True)
class Scenario:
    setup: Callable[[Guard, Path], None]
    argv: tuple[str, ...]


SCENARIOS = {
    "begin": Scenario(setup_begin, ("call", "begin", "--tool", "Bash", "--input",
                                    json.dumps(PUBLISH), "--call-id", "call_2")),
    "end": Scenario(setup_started, ("call", "end", "call_2", "--status", "succeeded",
                                    "--result", "+ pkg@1.0.0")),
    "end-failed": Scenario(setup_started, ("call", "end", "call_2", "--status", "failed",
                                           "--result", "npm ERR! 403")),
    "resume": Scenario(setup_started, ("resume",)),
    "reconcile": Scenario(setup_uncertain, ("reconcile", "call_2", "--status", "succeeded")),
    "checkpoint": Scenario(setup_manual, ("checkpoint", "--step", "step_9")),
}

# (fault point, scenario, status of call_2 after resume; None: it never reached the ledger)
MATRIX: list[tuple[str, str, str | None]] = [
    ("jsonl.before_write", "begin", None),
    ("jsonl.torn_write", "begin", None),
    ("atomic_write.before_replace", "begin", None),
    ("ledger.before_planned", "begin", None),
    ("ledger.after_planned", "begin", "failed"),
    ("jsonl.after_fsync", "begin", "failed"),
    ("snapshot.after_update_index", "begin", "failed"),
    ("snapshot.before_ref", "begin", "failed"),
    ("checkpoint.before_file", "begin", "failed"),
    ("checkpoint.before_index", "begin", "failed"),
    ("checkpoint.after_index", "begin", "failed"),
    ("ledger.before_started", "begin", "failed"),
    ("ledger.after_started", "begin", "uncertain"),
    ("snapshot.after_update_index", "end", "uncertain"),
    ("snapshot.before_ref", "end", "uncertain"),
    ("checkpoint.before_file", "end", "uncertain"),
    ("atomic_write.before_replace", "end", "uncertain"),
    ("checkpoint.before_index", "end", "uncertain"),
    ("jsonl.before_write", "end", "uncertain"),
    ("jsonl.torn_write", "end", "uncertain"),
    ("checkpoint.after_index", "end", "uncertain"),
    ("ledger.before_succeeded", "end", "uncertain"),
    ("ledger.after_succeeded", "end", "succeeded"),
    ("ledger.before_failed", "end-failed", "uncertain"),
    ("ledger.after_failed", "end-failed", "failed"),
    ("resume.before_checkpoint", "resume", "uncertain"),
    ("snapshot.before_ref", "resume", "uncertain"),
    ("checkpoint.before_index", "resume", "uncertain"),
    ("resume.after_checkpoint", "resume", "uncertain"),
    ("ledger.before_uncertain", "resume", "uncertain"),
    ("jsonl.torn_write", "resume", "uncertain"),
    ("ledger.after_uncertain", "resume", "uncertain"),
    ("resume.after_mark", "resume", "uncertain"),
    ("resume.before_done", "resume", "uncertain"),
    ("ledger.before_succeeded", "reconcile", "uncertain"),
    ("ledger.after_succeeded", "reconcile", "succeeded"),
    ("snapshot.before_ref", "checkpoint", None),
    ("checkpoint.before_index", "checkpoint", None),
    ("checkpoint.after_index", "checkpoint", None),
]


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    root = scratch_root()
    yield root
    shutil.rmtree(root, ignore_errors=True)


def run_cli(repo: Path, *args: str, fault: str | None = None
            ) -> subprocess.CompletedProcess[str]:
    import os

    env = {k: v for k, v in os.environ.items() if k != "GITGUARD_FAULT"}
    if fault:
        env["GITGUARD_FAULT"] = fault
    return subprocess.run([sys.executable, "-m", "gitguard", *args], cwd=repo, env=env,
                          capture_output=True, text=True)


def journals(repo: Path) -> dict[str, bytes]:
    root = repo / ".git" / "gitguard"
    return {name: (root / name).read_bytes() if (root / name).exists() else b""
            for name in JOURNALS}


@pytest.mark.parametrize(("point", "scenario", "expected"), MATRIX,
                         ids=[f"{s}@{p}" for p, s, _ in MATRIX])
def test_kill_at_fault_point(scratch: Path, point: str, scenario: str,
                             expected: str | None) -> None:
    repo = make_repo(scratch / f"{scenario}-{point}")
    git_state = user_git_state(repo)
    with Guard.open(repo) as guard:
        SCENARIOS[scenario].setup(guard, repo)
    files = workspace_files(repo)
    acknowledged = journals(repo)

    killed = run_cli(repo, *SCENARIOS[scenario].argv, fault=point)
    assert killed.returncode == -signal.SIGKILL, (
        f"{point} was never reached by `gitguard {' '.join(SCENARIOS[scenario].argv)}` "
        f"(exit {killed.returncode}): {killed.stderr}")

    # Resume runs in this process: one interpreter start per row keeps the matrix fast, and
    # the CLI's resume is covered by test_resume.py.
    with Guard.open(repo) as guard:
        answer = guard.resume().to_json()

    for name, before in acknowledged.items():
        assert journals(repo)[name].startswith(before), f"{name} lost an acknowledged record"
    assert workspace_files(repo) == files, "a user file changed"
    assert user_git_state(repo) == git_state, "the user's git state changed"

    with Guard.open(repo) as guard:
        entries = {e.call_id: e for e in guard.ledger()}
        assert not [e for e in entries.values() if e.status in ("planned", "approved", "started")]
        status = entries["call_2"].status if "call_2" in entries else None
        assert status == expected
        assert ("call_2" in answer["uncertain"]) == (expected == "uncertain")
        assert ("call_2" in answer["doNotRepeat"]) == (expected in ("uncertain", "succeeded"))
        checked = verify.report(guard.store, guard.snap)
        assert checked.problems == []
        again = guard.resume().to_json()
        assert again == answer, "a second resume gives the same answer"
        if scenario == "checkpoint" and point == "checkpoint.before_index":
            assert [s["file"].startswith("checkpoints/incomplete/ckpt_")
                    for s in answer["skipped"]] == [True]
        try:
            guard.begin_call("Bash", PUBLISH)
        except ReplayRefused:
            refused = True
        else:
            refused = False
        assert refused == (expected in ("uncertain", "succeeded")), "npm publish was replayed"
    git(repo, "fsck", "--no-progress", "--strict")


def test_the_matrix_covers_every_fault_point() -> None:
    assert set(KNOWN_POINTS) == {point for point, _, _ in MATRIX}
