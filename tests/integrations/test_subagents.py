"""Subagents and the newer Claude Code and Codex events through the real hook entry
(issue 29): a subagent's calls carry its id; a delegation (Agent, Task, spawn_agent) is a
container that owns no change, so the user's edits during a subagent's run stay the
user's; the main loop's Stop leaves a background subagent's calls open until its
SubagentStop; PostToolBatch ledgers a call that had no Pre/PostToolUse; StopFailure and
Codex's Interrupt settle what they end. Payloads are shaped like the captured ones in
fixtures/ (Claude Code 2.1.332, Codex 0.171), with and without the daemon."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.commands import gg
from tests.integrations.test_parallel_and_background import _maybe_daemon, hook, post, pre

S = "7926a250-82e2-4d72-a3d3-0cc9ccfca137"
AGENT = {"agent_id": "a7adf62543b5fcc80", "agent_type": "general-purpose"}


def _delegate(background: bool) -> dict[str, Any]:
    return {"description": "helper", "prompt": "do the work",
            "subagent_type": "general-purpose", "run_in_background": background}


def _ledger(repo: Path) -> dict[str, dict[str, Any]]:
    return {e["callId"]: e for e in json.loads(gg(repo, "ledger", "--json").stdout)}


def _dirty(repo: Path) -> dict[str, tuple[str, str]]:
    return {d["path"]: (d["owner"], d["confidence"])
            for d in json.loads(gg(repo, "status", "--json").stdout)["dirty"]}


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
def test_a_foreground_subagent_owns_its_writes_and_never_the_users(repo: Path,
                                                                   daemon: bool) -> None:
    gg(repo, "init", "--no-daemon")
    with _maybe_daemon(repo, daemon):
        hook(repo, S, "UserPromptSubmit", prompt="delegate")
        pre(repo, S, "toolu_agent", "Agent", _delegate(False))
        hook(repo, S, "SubagentStart", **AGENT)
        pre(repo, S, "toolu_sub_bash", "Bash", {"command": "echo sub > sub.txt"}, **AGENT)
        (repo / "sub.txt").write_text("sub\n")
        post(repo, S, "toolu_sub_bash", "Bash", {"command": "echo sub > sub.txt"},
             "(Bash completed with no output)", **AGENT)
        # the user edits a file nobody declared while the subagent runs
        (repo / "README.md").write_text("# project\nthe user's line\n")
        hook(repo, S, "SubagentStop", agent_transcript_path=str(repo.parent / "agent.jsonl"),
             background_tasks=[], **AGENT)
        post(repo, S, "toolu_agent", "Agent", _delegate(False), {"status": "completed"})
        hook(repo, S, "Stop", stop_hook_active=False, background_tasks=[])
        ledger = _ledger(repo)
        dirty = _dirty(repo)
        first = json.loads(gg(repo, "checkpoints", "--json").stdout)[0]["checkpointId"]
        plan = json.loads(gg(repo, "rollback-files", "--to", first, "--dry-run",
                             "--json").stdout)
    assert ledger["toolu_sub_bash"]["agentId"] == AGENT["agent_id"]
    assert ledger["toolu_sub_bash"]["agentType"] == "general-purpose"
    assert ledger["toolu_agent"]["agentId"] is None, "the main loop's call"
    assert ledger["toolu_agent"]["filePatches"] == [], "a delegation owns no change"
    assert [p["path"] for p in ledger["toolu_sub_bash"]["filePatches"]] == ["sub.txt"]
    assert dirty["sub.txt"][0] == "toolu_sub_bash", dirty
    assert dirty["README.md"][0] == "user", dirty
    assert "README.md" not in plan["restored"], plan
    assert plan["deleted"] == ["sub.txt"], plan
    sessions = json.loads(gg(repo, "session", "list", "--json").stdout)
    mine = next(s for s in sessions if s["sessionId"] == S)
    assert [a["agentId"] for a in mine["subagents"]] == [AGENT["agent_id"]]
    assert mine["subagents"][0]["endedAt"] is not None


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
def test_a_background_subagents_calls_outlive_the_main_loops_stop(repo: Path,
                                                                  daemon: bool) -> None:
    gg(repo, "init", "--no-daemon")
    with _maybe_daemon(repo, daemon):
        hook(repo, S, "UserPromptSubmit", prompt="delegate")
        pre(repo, S, "toolu_agent", "Agent", _delegate(True))
        hook(repo, S, "SubagentStart", **AGENT)
        post(repo, S, "toolu_agent", "Agent", _delegate(True),
             {"status": "async_launched", "agentId": AGENT["agent_id"]})
        pre(repo, S, "toolu_sub_bash", "Bash", {"command": "sleep 5; echo late > late.txt"},
            **AGENT)
        main_stop = hook(repo, S, "Stop", stop_hook_active=False, background_tasks=[
            {"type": "subagent", "status": "running", "id": AGENT["agent_id"]}])
        assert main_stop == {}, "no 'no PostToolUse came' for a running subagent's call"
        assert _ledger(repo)["toolu_sub_bash"]["status"] == "started"
        (repo / "late.txt").write_text("late\n")           # the subagent's command, later
        post(repo, S, "toolu_sub_bash", "Bash", {"command": "sleep 5; echo late > late.txt"},
             "(Bash completed with no output)", **AGENT)
        hook(repo, S, "SubagentStop", agent_transcript_path=str(repo.parent / "agent.jsonl"),
             background_tasks=[], **AGENT)
        ledger = _ledger(repo)
        dirty = _dirty(repo)
    assert ledger["toolu_sub_bash"]["status"] == "succeeded"
    assert [p["path"] for p in ledger["toolu_sub_bash"]["filePatches"]] == ["late.txt"]
    assert dirty["late.txt"][0] == "toolu_sub_bash", dirty


def test_subagent_stop_settles_only_that_subagents_calls(repo: Path) -> None:
    gg(repo, "init", "--no-daemon")
    other = {"agent_id": "b0000000000000001", "agent_type": "Explore"}
    hook(repo, S, "SubagentStart", **AGENT)
    hook(repo, S, "SubagentStart", **other)
    pre(repo, S, "toolu_a", "Bash", {"command": "make a"}, **AGENT)
    pre(repo, S, "toolu_b", "Bash", {"command": "make b"}, **other)
    transcript = repo.parent / "agent.jsonl"
    transcript.write_text("")
    answer = hook_lenient(repo, "SubagentStop", agent_transcript_path=str(transcript),
                          background_tasks=[], **AGENT)
    ledger = _ledger(repo)
    assert ledger["toolu_a"]["status"] == "uncertain", answer
    assert ledger["toolu_b"]["status"] == "started"


def hook_lenient(repo: Path, event: str, **fields: Any) -> dict[str, Any]:
    import subprocess
    import sys
    payload = {"session_id": S, "cwd": str(repo), "hook_event_name": event,
               "transcript_path": str(repo.parent / f"{S}.jsonl"), **fields}
    proc = subprocess.run([sys.executable, "-m", "gitguard", "hook", "claude-code"], cwd=repo,
                          input=json.dumps(payload), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    found: dict[str, Any] = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return found


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
def test_a_tool_batch_settles_its_calls_and_ledgers_one_never_announced(repo: Path,
                                                                       daemon: bool) -> None:
    gg(repo, "init", "--no-daemon")
    edit = {"file_path": str(repo / "src" / "app.py"), "old_string": "return 1",
            "new_string": "return 2", "replace_all": False}
    with _maybe_daemon(repo, daemon):
        pre(repo, S, "toolu_read", "Read", {"file_path": str(repo / "README.md")})
        (repo / "src" / "app.py").write_text("def main():\n    return 2\n")
        hook(repo, S, "PostToolBatch", tool_calls=[
            {"tool_name": "Read", "tool_input": {"file_path": str(repo / "README.md")},
             "tool_use_id": "toolu_read", "tool_response": "# project"},
            {"tool_name": "Edit", "tool_input": edit, "tool_use_id": "toolu_edit",
             "tool_response": "The file has been updated."}])
        ledger = _ledger(repo)
    assert ledger["toolu_read"]["status"] == "succeeded"
    assert ledger["toolu_edit"]["status"] == "succeeded"
    assert ledger["toolu_edit"]["declaredWrites"] == ["src/app.py"]


def test_stop_failure_ends_the_turn_and_records_the_error(repo: Path) -> None:
    gg(repo, "init", "--no-daemon")
    pre(repo, S, "toolu_bash", "Bash", {"command": "make"})
    answer = hook_lenient(repo, "StopFailure", error="server_error",
                          last_assistant_message="API Error: 500")
    assert "no PostToolUse came for toolu_bash" in answer.get("systemMessage", "")
    assert _ledger(repo)["toolu_bash"]["status"] == "uncertain"
    trace = gg(repo, "trace", "--json").stdout
    assert "session.turn_failed" in trace and "server_error" in trace


def test_a_codex_interrupt_settles_the_running_command(repo: Path) -> None:
    gg(repo, "init", "--no-daemon")
    codex = {"turn_id": "turn-1", "transcript_path": str(repo.parent / "rollout-x.jsonl")}
    hook_lenient(repo, "PreToolUse", tool_name="Bash", tool_input={"command": "sleep 100"},
                 tool_use_id="call_sleep", **codex)
    hook_lenient(repo, "Interrupt", **codex)
    assert _ledger(repo)["call_sleep"]["status"] == "uncertain"


def test_each_event_goes_to_the_worktree_it_acts_on(repo: Path, tmp_path: Path) -> None:
    """`claude --add-dir ../wt`, then `cd ../wt`: CLAUDE_PROJECT_DIR stays the project the
    session began in; the payload's cwd, or the file a tool names, says where it acts."""
    import subprocess
    import sys

    other = tmp_path / "wt"
    subprocess.run(["git", "worktree", "add", "-q", str(other), "-b", "side"], cwd=repo,
                   check=True)
    gg(repo, "init", "--no-daemon")
    gg(other, "init", "--no-daemon")

    def send(cwd: Path, event: str, **fields: Any) -> None:
        payload = {"session_id": S, "cwd": str(cwd), "hook_event_name": event,
                   "transcript_path": str(tmp_path / f"{S}.jsonl"), **fields}
        proc = subprocess.run([sys.executable, "-m", "gitguard", "hook", "claude-code"],
                              cwd=repo, input=json.dumps(payload), capture_output=True,
                              text=True, env={**__import__("os").environ,
                                              "CLAUDE_PROJECT_DIR": str(repo)})
        assert proc.returncode == 0 and "systemMessage" not in proc.stdout, proc

    write = {"file_path": str(other / "there.txt"), "content": "there\n"}
    send(repo, "PreToolUse", tool_name="Write", tool_input=write, tool_use_id="toolu_w")
    (other / "there.txt").write_text("there\n")
    send(repo, "PostToolUse", tool_name="Write", tool_input=write, tool_use_id="toolu_w",
         tool_response={"type": "create"})
    send(other, "CwdChanged", old_cwd=str(repo), new_cwd=str(other))
    bash = {"command": "echo shell > shell.txt"}
    send(other, "PreToolUse", tool_name="Bash", tool_input=bash, tool_use_id="toolu_b")
    (other / "shell.txt").write_text("shell\n")
    send(other, "PostToolUse", tool_name="Bash", tool_input=bash, tool_use_id="toolu_b",
         tool_response={"stdout": "", "stderr": "", "interrupted": False})
    assert set(_ledger(other)) == {"toolu_w", "toolu_b"}
    assert _ledger(repo) == {}
    owners = _dirty(other)
    assert owners["there.txt"] == ("toolu_w", "exact") and owners["shell.txt"][0] == "toolu_b"
