"""Parallel and background work through the real hook entry (issue 19): subagents and
parallel tool calls, a Bash call left running in the background, two Claude sessions in
one worktree. `gitguard hook claude-code` runs as a process per event, fed payloads
shaped like Claude Code 2.1's (the fields it sends for these events), with and without
the daemon. Overlapping windows make a change ambiguous unless exactly one open call
declared its path; a background shell's window stays open until its end is observed and
what it writes is its own or ambiguous, never the user's; one session's rollback never
reverts the other's work.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.commands import gg
from tests.helpers.daemons import running_daemon

S1 = "5d1c0b7e-2f1a-4c55-9a0e-1f2b3c4d5e61"
S2 = "8a7b6c5d-4e3f-4a1b-8c9d-0e1f2a3b4c72"


@contextmanager
def _maybe_daemon(repo: Path, daemon: bool) -> Iterator[object]:
    with running_daemon(repo) if daemon else nullcontext() as found:
        yield found


def hook(repo: Path, session: str, event: str, **fields: Any) -> dict[str, Any]:
    payload = {"session_id": session, "cwd": str(repo), "permission_mode": "acceptEdits",
               "transcript_path": str(repo.parent / f"{session}.jsonl"),
               "hook_event_name": event, **fields}
    proc = subprocess.run([sys.executable, "-m", "gitguard", "hook", "claude-code"], cwd=repo,
                          input=json.dumps(payload), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    answer: dict[str, Any] = json.loads(proc.stdout) if proc.stdout.strip() else {}
    assert "systemMessage" not in answer, answer
    return answer


def pre(repo: Path, session: str, call: str, tool: str, tool_input: dict[str, Any],
        **extra: Any) -> None:
    hook(repo, session, "PreToolUse", tool_name=tool, tool_input=tool_input,
         tool_use_id=call, **extra)


def post(repo: Path, session: str, call: str, tool: str, tool_input: dict[str, Any],
         response: Any, **extra: Any) -> None:
    hook(repo, session, "PostToolUse", tool_name=tool, tool_input=tool_input,
         tool_response=response, tool_use_id=call, **extra)


def write_tool(repo: Path, path: str, content: str) -> dict[str, Any]:
    return {"file_path": str(repo / path), "content": content}


def written(repo: Path, path: str, content: str) -> dict[str, Any]:
    return {"type": "create", "filePath": str(repo / path), "content": content,
            "structuredPatch": [], "originalFile": None}


def ledger(repo: Path) -> dict[str, dict[str, Any]]:
    return {e["callId"]: e for e in json.loads(gg(repo, "ledger", "--json").stdout)}


def owners(repo: Path) -> dict[str, tuple[str, str]]:
    dirty = json.loads(gg(repo, "status", "--json").stdout)["dirty"]
    return {d["path"]: (d["owner"], d["confidence"]) for d in dirty}


def first_checkpoint(repo: Path, session: str) -> str:
    rows = json.loads(gg(repo, "checkpoints", "--json").stdout)
    return next(r["checkpointId"] for r in rows if r["sessionId"] == session)


def plan(repo: Path, checkpoint: str) -> dict[str, Any]:
    proc = gg(repo, "rollback-files", "--to", checkpoint, "--dry-run", "--json", check=False)
    assert proc.returncode in (0, 5), proc.stderr
    found: dict[str, Any] = json.loads(proc.stdout)
    return found


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
def test_a_background_shell_owns_what_it_writes_until_its_end(repo: Path,
                                                               daemon: bool) -> None:
    gg(repo, "init")
    with _maybe_daemon(repo, daemon):
        hook(repo, S1, "SessionStart", source="startup")
        gg(repo, "checkpoint", "--kind", "manual", env={"GITGUARD_SESSION": S1})
        serve = {"command": "./serve.sh > serve.out", "run_in_background": True,
                 "description": "Start the dev server"}
        pre(repo, S1, "toolu_bg", "Bash", serve)
        post(repo, S1, "toolu_bg", "Bash", serve,
             {"stdout": "", "stderr": "", "interrupted": False, "isImage": False,
              "backgroundTaskId": "bash_1"})
        assert ledger(repo)["toolu_bg"]["status"] == "started"     # still running
        # The server writes after PostToolUse; the user edits meanwhile; a Write runs.
        (repo / "serve.out").write_text("listening on 3000\n")
        (repo / "src" / "app.py").write_text("def main():\n    return 'served'\n")
        (repo / "README.md").write_text("# project\nthe user's line\n")
        notes = write_tool(repo, "notes.txt", "agent notes\n")
        pre(repo, S1, "toolu_w", "Write", notes)
        (repo / "notes.txt").write_text("agent notes\n")
        post(repo, S1, "toolu_w", "Write", notes, written(repo, "notes.txt", "agent notes\n"))
        # A Stop while it still runs leaves it open; TaskOutput shows its end.
        hook(repo, S1, "Stop", stop_hook_active=False, last_assistant_message="Started.",
             background_tasks=[{"id": "bash_1", "type": "shell", "status": "running",
                                "description": "Start the dev server",
                                "command": serve["command"]}])
        assert ledger(repo)["toolu_bg"]["status"] == "started"
        (repo / "serve.out").write_text("listening on 3000\nGET / 200\n")
        output = {"task_id": "bash_1", "block": True, "timeout": 30000}
        post(repo, S1, "toolu_out", "TaskOutput", output,
             {"retrieval_status": "success",
              "task": {"task_id": "bash_1", "task_type": "local_bash", "status": "completed",
                       "description": "Start the dev server", "output": "GET / 200\n",
                       "exitCode": 0}})
        calls = ledger(repo)
        seen = owners(repo)
        target = first_checkpoint(repo, S1)
        dry = plan(repo, target)
        applied = gg(repo, "rollback-files", "--to", target, "--json", check=False)
    assert calls["toolu_bg"]["status"] == "succeeded"
    assert calls["toolu_out"]["status"] == "succeeded"
    bg_paths = {p["path"] for p in calls["toolu_bg"]["filePatches"]}
    assert {"serve.out", "src/app.py"} <= bg_paths and "notes.txt" not in bg_paths
    assert [p["path"] for p in calls["toolu_w"]["filePatches"]] == ["notes.txt"]
    assert seen["serve.out"][0] == "toolu_bg" and seen["src/app.py"][0] == "toolu_bg"
    assert seen["notes.txt"] == ("toolu_w", "exact")
    # Nothing of the background window is restored without asking; the Write is undone.
    assert dry["deleted"] == ["notes.txt"] and dry["restored"] == []
    assert {c["path"] for c in dry["conflicts"]} >= {"serve.out", "src/app.py"}
    assert applied.returncode == 5, applied.stderr
    assert not (repo / "notes.txt").exists()
    assert (repo / "README.md").read_text() == "# project\nthe user's line\n"
    assert (repo / "serve.out").read_text() == "listening on 3000\nGET / 200\n"


def test_a_background_task_ends_at_the_stop_that_no_longer_lists_it(repo: Path) -> None:
    gg(repo, "init")
    hook(repo, S1, "SessionStart", source="startup")
    build = {"command": "make all", "run_in_background": True}
    pre(repo, S1, "toolu_bg", "Bash", build)
    post(repo, S1, "toolu_bg", "Bash", build,
         {"stdout": "", "stderr": "", "interrupted": False, "isImage": False,
          "backgroundTaskId": "bash_7"})
    (repo / "out.bin").write_text("built\n")
    hook(repo, S1, "Stop", stop_hook_active=False, background_tasks=[])
    entry = ledger(repo)["toolu_bg"]
    assert entry["status"] == "succeeded"
    assert [p["path"] for p in entry["filePatches"]] == ["out.bin"]
    assert owners(repo)["out.bin"][0] == "toolu_bg"


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
def test_parallel_calls_subagents_and_two_sessions(repo: Path, daemon: bool) -> None:
    gg(repo, "init")
    with _maybe_daemon(repo, daemon):
        hook(repo, S1, "SessionStart", source="startup")
        hook(repo, S2, "SessionStart", source="startup")
        for session in (S1, S2):
            gg(repo, "checkpoint", "--kind", "manual", env={"GITGUARD_SESSION": session})
        a = write_tool(repo, "a.txt", "from the main agent\n")
        b = write_tool(repo, "b.txt", "from a subagent\n")
        make = {"command": "make report"}
        # All three at once: S1's main agent and its subagent, and a Bash in session S2.
        pre(repo, S1, "toolu_a", "Write", a)
        pre(repo, S1, "toolu_b", "Write", b, agent_id="agent-1", agent_type="general-purpose")
        pre(repo, S2, "toolu_c", "Bash", make)
        (repo / "a.txt").write_text("from the main agent\n")
        (repo / "b.txt").write_text("from a subagent\n")
        (repo / "report.txt").write_text("made by make\n")
        (repo / "mine.txt").write_text("the user's own file\n")
        post(repo, S1, "toolu_b", "Write", b, written(repo, "b.txt", "from a subagent\n"),
             agent_id="agent-1", agent_type="general-purpose")
        post(repo, S2, "toolu_c", "Bash", make,
             {"stdout": "", "stderr": "", "interrupted": False, "isImage": False})
        post(repo, S1, "toolu_a", "Write", a, written(repo, "a.txt", "from the main agent\n"))
        calls = ledger(repo)
        seen = owners(repo)
        plans = {s: plan(repo, first_checkpoint(repo, s)) for s in (S1, S2)}
    assert [p["path"] for p in calls["toolu_a"]["filePatches"]] == ["a.txt"]
    assert [p["path"] for p in calls["toolu_b"]["filePatches"]] == ["b.txt"]
    c_paths = {p["path"] for p in calls["toolu_c"]["filePatches"]}
    assert "report.txt" in c_paths and not c_paths & {"a.txt", "b.txt"}
    assert seen["a.txt"] == ("toolu_a", "exact") and seen["b.txt"] == ("toolu_b", "exact")
    # Never a wrong exact: the shell's change beside other calls is not `exact`, and the
    # user's file is never anybody's exact change.
    assert seen["report.txt"][1] != "exact" and seen["mine.txt"][1] != "exact"
    if daemon:
        assert seen["report.txt"] == ("toolu_c", "ambiguous"), (
            repo / ".git" / "gitguard" / "attribution.jsonl").read_text()
    # S1's rollback: its own two files, nothing of S2's or the user's.
    s1 = plans[S1]
    assert s1["deleted"] == ["a.txt", "b.txt"] and not s1["conflicts"] and not s1["restored"]
    # S2's: the shell ran beside other calls, so its undeclared changes are conflicts,
    # never deletions; S1's files are not even candidates.
    s2 = plans[S2]
    assert s2["deleted"] == [] and s2["restored"] == []
    conflicted = {c["path"] for c in s2["conflicts"]}
    assert "report.txt" in conflicted and not conflicted & {"a.txt", "b.txt"}


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
def test_a_path_both_sessions_changed_is_a_conflict(repo: Path, daemon: bool) -> None:
    gg(repo, "init")
    with _maybe_daemon(repo, daemon):
        hook(repo, S1, "SessionStart", source="startup")
        hook(repo, S2, "SessionStart", source="startup")
        gg(repo, "checkpoint", "--kind", "manual", env={"GITGUARD_SESSION": S1})
        for session, call, text in ((S1, "toolu_1", "one\n"), (S2, "toolu_2", "two\n")):
            tool_input = write_tool(repo, "shared.txt", text)
            pre(repo, session, call, "Write", tool_input)
            (repo / "shared.txt").write_text(text)
            post(repo, session, call, "Write", tool_input, written(repo, "shared.txt", text))
        result = plan(repo, first_checkpoint(repo, S1))
    assert result["deleted"] == [] and result["restored"] == []
    assert [c["path"] for c in result["conflicts"]] == ["shared.txt"]
    assert "session" in result["conflicts"][0]["reason"]


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
def test_a_write_while_two_scripts_ran_is_ambiguous_for_both(repo: Path, daemon: bool) -> None:
    """Two sessions' scripts (no words say what they write) overlap: what changed while
    both ran is neither's alone, so it is ambiguous, never "the last one's"; what each
    wrote alone is its own, and each session's rollback reverts only that."""
    gg(repo, "init")
    with _maybe_daemon(repo, daemon):
        for session in (S1, S2):
            hook(repo, session, "SessionStart", source="startup")
            gg(repo, "checkpoint", "--kind", "manual", env={"GITGUARD_SESSION": session})
        one, two = {"command": "python3 gen_one.py"}, {"command": "python3 gen_two.py"}
        response = {"stdout": "", "stderr": "", "interrupted": False, "isImage": False}
        pre(repo, S1, "toolu_one", "Bash", one)
        (repo / "first.txt").write_text("only the first script ran\n")
        pre(repo, S2, "toolu_two", "Bash", two)
        (repo / "both.txt").write_text("while both ran\n")
        post(repo, S1, "toolu_one", "Bash", one, response)
        (repo / "second.txt").write_text("only the second script ran\n")
        post(repo, S2, "toolu_two", "Bash", two, response)
        seen = owners(repo)
        plans = {s: plan(repo, first_checkpoint(repo, s)) for s in (S1, S2)}
    assert seen["first.txt"] == ("toolu_one", "window"), seen
    assert seen["second.txt"] == ("toolu_two", "window"), seen
    assert seen["both.txt"][1] == "ambiguous", seen
    assert plans[S1]["deleted"] == ["first.txt"], plans[S1]
    assert plans[S2]["deleted"] == ["second.txt"], plans[S2]
    for found in plans.values():
        assert [c["path"] for c in found["conflicts"]] == ["both.txt"], found
        assert found["restored"] == [], found
