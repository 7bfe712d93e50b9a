"""Two agent sessions and a committing user at once in one worktree: each call owns only
the paths it changed, and a rollback of one session plans none of the other's or the
user's files (issue 21: without the daemon 72 of 100 calls carried foreign paths).

Every round runs in three real threads driving real `gitguard` processes: both sessions
begin a declared `Write` call, then (both windows open) each writes its file while the
user writes and commits one of theirs (the post-commit hook runs), then both calls end.
The barriers make the overlap certain, not likely.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import pytest

from tests.helpers.commands import gg, git
from tests.helpers.daemons import running_daemon

ROUNDS = 30
SESSIONS = ("sess-a", "sess-b")


def _writer(repo: Path, session: str, barrier: threading.Barrier,
            errors: list[BaseException]) -> None:
    try:
        for i in range(ROUNDS):
            path = f"{session}/f{i}.txt"
            content = f"{session} {i}\n"
            tool_input = json.dumps({"file_path": str(repo / path), "content": content})
            begin = gg(repo, "call", "begin", "--session", session, "--tool", "Write",
                       "--input", tool_input, "--writes", path, "--json")
            call_id = json.loads(begin.stdout)["callId"]
            barrier.wait()                     # both windows open
            (repo / path).parent.mkdir(exist_ok=True)
            (repo / path).write_text(content)
            barrier.wait()                     # every write of the round done
            gg(repo, "call", "end", call_id, "--status", "succeeded")
            barrier.wait()
    except BaseException as exc:              # noqa: BLE001 - reported by the test
        errors.append(exc)
        barrier.abort()


def _user(repo: Path, barrier: threading.Barrier, errors: list[BaseException]) -> None:
    try:
        (repo / "user").mkdir()
        for i in range(ROUNDS):
            barrier.wait()
            (repo / "user" / f"u{i}.txt").write_text(f"user {i}\n")
            git(repo, "add", f"user/u{i}.txt")
            git(repo, "commit", "-qm", f"user {i}")
            barrier.wait()
            barrier.wait()
    except BaseException as exc:              # noqa: BLE001 - reported by the test
        errors.append(exc)
        barrier.abort()


def _run_rounds(repo: Path) -> None:
    barrier = threading.Barrier(3)
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_writer, args=(repo, s, barrier, errors))
               for s in SESSIONS]
    threads.append(threading.Thread(target=_user, args=(repo, barrier, errors)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
def test_each_writer_owns_only_its_own_paths(repo: Path, daemon: bool) -> None:
    gg(repo, "init")
    gg(repo, "hooks", "install")
    assert (repo / ".git" / "hooks" / "post-commit").exists()
    first: dict[str, str] = {}
    for session in SESSIONS:
        gg(repo, "session", "start", "--id", session)
        made = gg(repo, "checkpoint", "--kind", "manual", "--json", env={
            "GITGUARD_SESSION": session})
        first[session] = json.loads(made.stdout)["checkpointId"]
    running: Callable[[Path], AbstractContextManager[object]] = (
        running_daemon if daemon else lambda _repo: nullcontext())
    with running(repo):
        _run_rounds(repo)
        ledger = json.loads(gg(repo, "ledger", "--json").stdout)
        plans = {s: json.loads(gg(repo, "rollback-files", "--to", first[s], "--dry-run",
                                  "--json", check=False).stdout) for s in SESSIONS}
    writes = [e for e in ledger if e["toolName"] == "Write"]
    assert len(writes) == 2 * ROUNDS
    foreign = {e["callId"]: sorted({p["path"] for p in e["filePatches"]}
                                   - set(e["declaredWrites"])) for e in writes}
    foreign = {k: v for k, v in foreign.items() if v}
    counts = {s: (len(p["deleted"]), len(p["restored"]), len(p["conflicts"]))
              for s, p in plans.items()}
    assert foreign == {}, (f"{len(foreign)} of {len(writes)} calls carry foreign paths; "
                           f"plans (deleted, restored, conflicts): {counts}")
    for e in writes:
        assert [p["path"] for p in e["filePatches"]] == e["declaredWrites"], e["callId"]
    for session, plan in plans.items():
        planned = set(plan["restored"]) | set(plan["deleted"]) | {
            c["path"] for c in plan["conflicts"]}
        assert planned == {f"{session}/f{i}.txt" for i in range(ROUNDS)}, session
        assert set(plan["deleted"]) == planned and not plan["conflicts"]
    # The dry runs changed nothing: every file of every writer is still there.
    for session in (*SESSIONS, "user"):
        assert len(list((repo / session).iterdir())) == ROUNDS
    status = subprocess.run(["git", "status", "--porcelain", "user"], cwd=repo,
                            capture_output=True, text=True, check=True)
    assert status.stdout == ""


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
def test_a_shell_call_does_not_own_what_the_user_committed_in_its_window(
        repo: Path, daemon: bool) -> None:
    gg(repo, "init")
    gg(repo, "hooks", "install")
    running: Callable[[Path], AbstractContextManager[object]] = (
        running_daemon if daemon else lambda _repo: nullcontext())
    with running(repo):
        begin = gg(repo, "call", "begin", "--tool", "Bash", "--json",
                   "--input", json.dumps({"command": "make report"}))
        call_id = json.loads(begin.stdout)["callId"]
        (repo / "report.txt").write_text("made by make\n")
        (repo / "mine.txt").write_text("the user's, committed while make ran\n")
        git(repo, "add", "mine.txt")
        git(repo, "commit", "-qm", "mine")          # the post-commit hook records it
        gg(repo, "call", "end", call_id, "--status", "succeeded")
        entry = next(e for e in json.loads(gg(repo, "ledger", "--json").stdout)
                     if e["callId"] == call_id)
        first = json.loads(gg(repo, "checkpoints", "--json").stdout)[0]["checkpointId"]
        plan = json.loads(gg(repo, "rollback-files", "--to", first, "--dry-run",
                             "--json").stdout)
    assert [p["path"] for p in entry["filePatches"]] == ["report.txt"]
    assert plan["deleted"] == ["report.txt"] and not plan["conflicts"]
