"""Calls an agent announced (PreToolUse) and never reported own nothing (DESIGN.md,
Attribution): closed at the session's next event, the transcript telling "never ran"
(failed, owning nothing) from "ran, outcome unknown" (uncertain, its window's changes
ambiguous: rollback makes them conflicts). The same with and without the daemon."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from gitguard.integrations import dangling
from tests.helpers.commands import gg
from tests.helpers.daemons import running_daemon
from tests.helpers.hooks import hook_cc, payload

SESSION = "3f6c1a52-9b8e-4d47-a1d2-6e0c9f4b7a15"


@pytest.fixture(params=["no-daemon", "daemon"])
def guarded(request: pytest.FixtureRequest, repo: Path) -> Iterator[Path]:
    with running_daemon(repo) if request.param == "daemon" else nullcontext():
        yield repo


def _transcript(tmp: Path, results: dict[str, str]) -> str:
    """A Claude Code transcript holding a tool_result for each call id."""
    path = tmp / f"{SESSION}.jsonl"
    lines = [{"type": "user", "sessionId": SESSION, "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": call, "content": text, "is_error": True}]}}
        for call, text in results.items()]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


def _bash(repo: Path, event: str, call: str, command: str, transcript: str,
          **extra: Any) -> dict[str, Any]:
    name = "pre_tool_use_bash.json" if event == "PreToolUse" else "post_tool_use_bash.json"
    return hook_cc(repo, payload(f"claude_code/{name}", repo, tool_use_id=call,
                                 tool_input={"command": command},
                                 transcript_path=transcript, **extra))


def _ledger(repo: Path) -> dict[str, dict[str, Any]]:
    return {e["callId"]: e for e in json.loads(gg(repo, "ledger", "--json").stdout)}


def _first_checkpoint(repo: Path) -> str:
    rows = json.loads(gg(repo, "checkpoints", "--json").stdout)
    return str(rows[0]["checkpointId"])


def _agent_edit(repo: Path, transcript: str) -> None:
    hook_cc(repo, payload("claude_code/pre_tool_use_edit.json", repo,
                          transcript_path=transcript))
    (repo / "src" / "app.py").write_text("def main():\n    return 2\n")
    hook_cc(repo, payload("claude_code/post_tool_use_edit.json", repo,
                          transcript_path=transcript))


@pytest.mark.parametrize("denial", [
    "Permission to use Bash with command rm NOTES.md has been denied.",
    "Claude requested permissions to use Bash, but you haven't granted it yet.",
    dangling.REJECTED + ". The tool use was rejected (eg. if it was a file edit, the "
    "new_string was NOT written to the file). STOP what you are doing and wait for the user "
    "to tell you how to proceed.",
    "Hook PreToolUse:Bash denied this tool",
])
def test_a_denied_call_owns_nothing_and_rollback_keeps_the_users_edits(
        guarded: Path, tmp_path: Path, denial: str) -> None:
    repo = guarded
    (repo / "NOTES.md").write_text("notes\n")
    transcript = _transcript(tmp_path, {})
    hook_cc(repo, payload("claude_code/user_prompt_submit.json", repo,
                          transcript_path=transcript))
    first = _first_checkpoint(repo)
    _agent_edit(repo, transcript)
    _bash(repo, "PreToolUse", "toolu_rm", "rm NOTES.md", transcript)
    # Claude Code refused it after PreToolUse: no PostToolUse. The user edits meanwhile.
    (repo / "NOTES.md").write_text("notes\nthe user's own line\n")
    (repo / "todo.txt").write_text("the user's new file\n")
    transcript = _transcript(tmp_path, {"toolu_rm": denial})
    # The session's next event closes it: here the model's next call.
    _bash(repo, "PreToolUse", "toolu_ls", "ls", transcript)
    _bash(repo, "PostToolUse", "toolu_ls", "ls", transcript,
          tool_response={"stdout": "NOTES.md\n", "stderr": ""})
    assert hook_cc(repo, payload("claude_code/stop.json", repo,
                                 transcript_path=transcript)) == {}

    rm = _ledger(repo)["toolu_rm"]
    assert rm["status"] == "failed" and "did not run" in rm["errorSummary"]
    assert rm["filePatches"] == [] and rm["postCheckpointId"] == rm["preCheckpointId"]
    dirty = {d["path"]: d for d in json.loads(gg(repo, "status", "--json").stdout)["dirty"]}
    assert dirty["NOTES.md"]["owner"] == "user" and dirty["todo.txt"]["owner"] == "user"
    note = json.loads(gg(repo, "resume", "--json").stdout)
    assert "toolu_rm" not in note["doNotRepeat"] and "toolu_rm" in note["neverStarted"]
    assert "Bash(toolu_rm) was planned but never started: it did not run." in \
        note["recoveryNote"]

    done = gg(repo, "rollback-files", "--to", first, "--json", check=False)
    result = json.loads(done.stdout)
    assert result["restored"] == ["src/app.py"]
    assert (repo / "src" / "app.py").read_text() == "def main():\n    return 1\n"
    assert (repo / "NOTES.md").read_text() == "notes\nthe user's own line\n"
    assert (repo / "todo.txt").read_text() == "the user's new file\n"
    gg(repo, "verify")


def test_a_call_with_no_end_and_no_evidence_makes_its_window_a_conflict(
        guarded: Path, tmp_path: Path) -> None:
    """It may have run: uncertain, and the user's edit while it was open is not restored
    (a conflict), with or without the daemon."""
    repo = guarded
    (repo / "NOTES.md").write_text("notes\n")
    transcript = _transcript(tmp_path, {})
    hook_cc(repo, payload("claude_code/user_prompt_submit.json", repo,
                          transcript_path=transcript))
    first = _first_checkpoint(repo)
    _agent_edit(repo, transcript)
    _bash(repo, "PreToolUse", "toolu_deploy", "./deploy.sh", transcript)
    (repo / "NOTES.md").write_text("notes\nwritten while the deploy was open\n")
    stop = hook_cc(repo, payload("claude_code/stop.json", repo, transcript_path=transcript))
    message = stop["systemMessage"]
    assert "`gitguard reconcile toolu_deploy --status failed`" in message
    assert "CALL" not in message
    assert _ledger(repo)["toolu_deploy"]["status"] == "uncertain"
    dirty = {d["path"]: d for d in json.loads(gg(repo, "status", "--json").stdout)["dirty"]}
    assert (dirty["NOTES.md"]["owner"], dirty["NOTES.md"]["confidence"]) == \
        ("toolu_deploy", "ambiguous")

    done = gg(repo, "rollback-files", "--to", first, "--json", check=False)
    assert done.returncode == 5, done.stderr
    result = json.loads(done.stdout)
    assert "src/app.py" in result["restored"]
    assert [c["path"] for c in result["conflicts"]] == ["NOTES.md"]
    assert (repo / "NOTES.md").read_text() == "notes\nwritten while the deploy was open\n"


def test_a_call_with_no_result_yet_stays_open_at_the_next_pre_tool_use(
        repo: Path, tmp_path: Path) -> None:
    """Parallel tool calls: a call with no tool_result may still be running beside the
    new one; only the end of the turn closes it."""
    transcript = _transcript(tmp_path, {})
    _bash(repo, "PreToolUse", "toolu_slow", "sleep 5", transcript)
    _bash(repo, "PreToolUse", "toolu_fast", "ls", transcript)
    assert _ledger(repo)["toolu_slow"]["status"] == "started"
    hook_cc(repo, payload("claude_code/user_prompt_submit.json", repo,
                          transcript_path=transcript))
    assert {c: e["status"] for c, e in _ledger(repo).items()} == \
        {"toolu_slow": "uncertain", "toolu_fast": "uncertain"}


def test_a_result_without_its_post_tool_use_is_uncertain_at_the_next_call(
        repo: Path, tmp_path: Path) -> None:
    """The transcript shows an ordinary result: it ran, gitguard never saw its end."""
    transcript = _transcript(tmp_path, {})
    _bash(repo, "PreToolUse", "toolu_ran", "npm publish", transcript)
    transcript = _transcript(tmp_path, {"toolu_ran": "+ demo-package@1.0.1"})
    _bash(repo, "PreToolUse", "toolu_next", "ls", transcript)
    ran = _ledger(repo)["toolu_ran"]
    assert ran["status"] == "uncertain" and "shows a result" in ran["note"]
    again = _bash(repo, "PreToolUse", "toolu_again", "npm publish", transcript)
    assert again["hookSpecificOutput"]["permissionDecision"] == "deny"
