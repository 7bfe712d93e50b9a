"""A Codex subagent from the payloads Codex 0.171 sent (fixtures/codex/, captured by
e2e/test_capture_fixtures.py with gpt-5-codex's multi_agent_v1 tools), through the real
hook entry, with and without the daemon.

What Codex does that gitguard has to meet: `spawn_agent`, `multi_agent_v1wait_agent` and
`multi_agent_v1close_agent` are the parent's delegation calls (containers: they own no
change); the subagent's events carry the parent's `session_id`, its `agent_id` and
`agent_type`, and its own rollout file as `transcript_path`; a patch the subagent sends
through the shell (`apply_patch <<'EOF'`) gets a PreToolUse (tool `Bash`) and no
PostToolUse: its output in the subagent's rollout is its end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.commands import gg
from tests.helpers.hooks import payload
from tests.integrations.test_parallel_and_background import _maybe_daemon

AGENT = "0199a3c2-8e52-7c21-af30-3c9d5e7f2b48"      # the captured subagent's id
PATCH_CALL, ECHO_CALL = "call_SubPa7chSh3ll", "call_SubEch0Cmd4Vq"
DELEGATIONS = ("call_Sp4wnAgent7Kq", "call_Wa1tAgent3Mzx", "call_Cl0seAgent5Np")
APP_BEFORE, APP_PATCHED = "def main():\n    return 1\n", "def main():\n    return 3\n"


def _hook(repo: Path, name: str, **changes: Any) -> dict[str, Any]:
    event = payload(f"codex/{name}.json", repo, **changes)
    proc = subprocess.run([sys.executable, "-m", "gitguard", "hook", "claude-code"], cwd=repo,
                          input=json.dumps(event), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    answer: dict[str, Any] = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return answer


def _rollout(path: Path, call: str, output: str) -> str:
    """The subagent's rollout as Codex 0.171 writes it for a patch sent through the shell:
    the function call, the FileChange item, then the call's output."""
    records = [
        {"type": "response_item", "payload": {
            "type": "function_call", "name": "exec_command", "call_id": call,
            "arguments": json.dumps({"cmd": "apply_patch <<'EOF'\n...\nEOF\n"})}},
        {"type": "event_msg", "payload": {"type": "item_completed", "item": {
            "type": "FileChange", "id": call, "status": "completed", "changes": {}}}},
        {"type": "response_item", "payload": {"type": "function_call_output",
                                              "call_id": call, "output": output}},
    ]
    with path.open("a") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def _ledger(repo: Path) -> dict[str, dict[str, Any]]:
    return {e["callId"]: e for e in json.loads(gg(repo, "ledger", "--json").stdout)}


def _dirty(repo: Path) -> dict[str, str]:
    return {d["path"]: d["owner"] for d in json.loads(gg(repo, "status", "--json").stdout)["dirty"]}


def _until_the_patch(repo: Path, rollout: Path) -> None:
    """The parent delegates; the subagent starts and sends its patch through the shell."""
    parent = {"transcript_path": str(rollout.parent / "parent.jsonl")}
    sub = {"transcript_path": str(rollout)}
    _hook(repo, "user_prompt_submit", **parent)
    _hook(repo, "pre_tool_use_spawn_agent", **parent)
    _hook(repo, "post_tool_use_spawn_agent", **parent)
    _hook(repo, "subagent_start")
    _hook(repo, "user_prompt_submit_subagent", **sub)
    _hook(repo, "pre_tool_use_wait_agent", **parent)
    (repo / "README.md").write_text("# project\nthe user's line, during the wait\n")
    _hook(repo, "pre_tool_use_subagent_shell_patch", **sub)


def _rest(repo: Path, rollout: Path) -> None:
    """The subagent's command, its stop, the parent's wait and close, the parent's stop."""
    parent = {"transcript_path": str(rollout.parent / "parent.jsonl")}
    sub = {"transcript_path": str(rollout)}
    _hook(repo, "pre_tool_use_subagent_bash", **sub)
    (repo / "count.txt").write_text("counted\n")
    _hook(repo, "post_tool_use_subagent_bash", **sub)
    _hook(repo, "subagent_stop", agent_transcript_path=str(rollout))
    _hook(repo, "post_tool_use_wait_agent", **parent)
    _hook(repo, "pre_tool_use_close_agent", **parent)
    _hook(repo, "post_tool_use_close_agent", **parent)
    _hook(repo, "stop", **parent)


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
def test_a_codex_subagents_shell_patch_is_its_own_and_ends_by_its_rollout(
        repo: Path, tmp_path: Path, daemon: bool) -> None:
    gg(repo, "init", "--no-daemon")
    rollout = tmp_path / "rollout-subagent.jsonl"
    rollout.write_text("")
    with _maybe_daemon(repo, daemon):
        _until_the_patch(repo, rollout)
        (repo / "src" / "app.py").write_text(APP_PATCHED)          # Codex applies it
        _rollout(rollout, PATCH_CALL, "Exit code: 0\nWall time: 0 seconds\nOutput:\n"
                 "Success. Updated the following files:\nM src/app.py\n")
        # the user saves an unrelated file while the model thinks: no hook event yet
        (repo / "mine.txt").write_text("the user's file\n")
        _rest(repo, rollout)
        ledger = _ledger(repo)
        dirty = _dirty(repo)
        first = json.loads(gg(repo, "checkpoints", "--json").stdout)[0]["checkpointId"]
        plan = json.loads(gg(repo, "rollback-files", "--to", first, "--dry-run",
                             "--json").stdout)
    patch = ledger[PATCH_CALL]
    assert patch["status"] == "succeeded", patch["note"]
    assert patch["toolName"] == "Bash" and patch["declaredWrites"] == ["src/app.py"]
    assert [p["path"] for p in patch["filePatches"]] == ["src/app.py"]
    assert {ledger[c]["agentId"] for c in (PATCH_CALL, ECHO_CALL)} == {AGENT}
    assert {ledger[c]["agentType"] for c in (PATCH_CALL, ECHO_CALL)} == {"default"}
    assert [ledger[c]["toolName"] for c in DELEGATIONS] == [
        "spawn_agent", "multi_agent_v1wait_agent", "multi_agent_v1close_agent"]
    assert all(ledger[c]["filePatches"] == [] and ledger[c]["agentId"] is None
               for c in DELEGATIONS)
    assert {e["status"] for e in ledger.values()} == {"succeeded"}, ledger
    assert dirty["README.md"] == "user" and dirty["mine.txt"] == "user", dirty
    assert dirty["src/app.py"] == PATCH_CALL and dirty["count.txt"] == ECHO_CALL, dirty
    assert plan["restored"] == ["src/app.py"] and plan["deleted"] == ["count.txt"], plan
    assert plan["conflicts"] == [], plan


def test_a_failed_shell_patch_ends_failed(repo: Path, tmp_path: Path) -> None:
    gg(repo, "init", "--no-daemon")
    rollout = tmp_path / "rollout-subagent.jsonl"
    rollout.write_text("")
    _until_the_patch(repo, rollout)
    _rollout(rollout, PATCH_CALL, "Exit code: 1\nWall time: 0 seconds\nOutput:\n"
             "apply_patch verification failed: Failed to find expected lines\n")
    _rest(repo, rollout)
    patch = _ledger(repo)[PATCH_CALL]
    assert patch["status"] == "failed" and patch["filePatches"] == [], patch
    assert "exited with code 1" in patch["errorSummary"] or "Exit code: 1" in \
        patch["errorSummary"], patch["errorSummary"]


def test_a_command_that_writes_anywhere_still_ends_uncertain_without_post_tool_use(
        repo: Path, tmp_path: Path) -> None:
    """Ending by the rollout is for calls that own only what they declared: a build's
    window claims what changed in it, so a late end would claim the user's edits made
    after it finished. It stays uncertain (its changes ambiguous: never reverted)."""
    gg(repo, "init", "--no-daemon")
    rollout = tmp_path / "rollout-subagent.jsonl"
    rollout.write_text("")
    build = {"command": "make build"}
    sub = {"transcript_path": str(rollout)}
    _hook(repo, "subagent_start")
    _hook(repo, "pre_tool_use_subagent_shell_patch", tool_use_id="call_build",
          tool_input=build, **sub)
    _rollout(rollout, "call_build", "Process exited with code 0\nOutput:\n")
    answer = _hook(repo, "subagent_stop", agent_transcript_path=str(rollout))
    entry = _ledger(repo)["call_build"]
    assert entry["status"] == "uncertain", entry
    assert "call_build" in answer.get("systemMessage", ""), answer


def test_a_commands_output_in_the_rollout_before_its_post_tool_use_leaves_it_open(
        repo: Path, tmp_path: Path) -> None:
    """Parallel calls: a command's output may be in the rollout when the next call's
    PreToolUse comes and its own PostToolUse has not yet. It stays open, and its
    PostToolUse ends it."""
    gg(repo, "init", "--no-daemon")
    rollout = tmp_path / "rollout-subagent.jsonl"
    rollout.write_text("")
    build = {"command": "make build"}
    sub = {"transcript_path": str(rollout)}
    _hook(repo, "subagent_start")
    _hook(repo, "pre_tool_use_subagent_shell_patch", tool_use_id="call_build",
          tool_input=build, **sub)
    _rollout(rollout, "call_build", "Process exited with code 0\nOutput:\n")
    _hook(repo, "pre_tool_use_subagent_bash", **sub)
    assert _ledger(repo)["call_build"]["status"] == "started"
    _hook(repo, "post_tool_use_subagent_bash", tool_use_id="call_build", tool_input=build,
          tool_response="built\n", **sub)
    assert _ledger(repo)["call_build"]["status"] == "succeeded"
