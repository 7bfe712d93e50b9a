"""The Claude Code / Codex hook adapter, fed the fixture payloads of every event."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitguard.api import Guard
from gitguard.integrations import claude_code
from gitguard.recovery import resume
from gitguard.storage import durable
from tests.helpers.commands import gg, git
from tests.helpers.hooks import hook_cc, payload
from tests.helpers.paths import FIXTURES

EVENTS = {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
          "PermissionDenied", "PostToolBatch", "SubagentStart", "SubagentStop", "Stop",
          "StopFailure", "CwdChanged", "SessionEnd"}
SESSION = "3f6c1a52-9b8e-4d47-a1d2-6e0c9f4b7a15"


def test_fixtures_cover_every_event() -> None:
    seen = set()
    for path in sorted((FIXTURES / "claude_code").glob("*.json")) + \
            sorted((FIXTURES / "codex").glob("*.json")):
        if path.name == "tools_request.json":   # the tools lists, not a hook payload
            continue
        event = json.loads(path.read_text())
        assert {"session_id", "transcript_path", "cwd", "hook_event_name"} <= set(event), path
        if event["hook_event_name"].endswith(("ToolUse", "ToolUseFailure")):
            assert {"tool_name", "tool_input", "tool_use_id"} <= set(event), path
        if path.parent.name == "claude_code":
            seen.add(event["hook_event_name"])
    assert seen == EVENTS
    sources = {json.loads((FIXTURES / "claude_code" / f"session_start_{s}.json").read_text())
               ["source"] for s in ("startup", "resume", "compact")}
    assert sources == {"startup", "resume", "compact"}


def test_a_claude_code_session_through_the_hook(repo: Path) -> None:
    assert hook_cc(repo, payload("claude_code/session_start_startup.json", repo)) == {}
    assert hook_cc(repo, payload("claude_code/user_prompt_submit.json", repo)) == {}
    pre = hook_cc(repo, payload("claude_code/pre_tool_use_edit.json", repo))
    assert "permissionDecision" not in json.dumps(pre)  # Claude Code's own rules decide
    (repo / "src" / "app.py").write_text("def main():\n    return 2\n")
    assert hook_cc(repo, payload("claude_code/post_tool_use_edit.json", repo)) == {}
    hook_cc(repo, payload("claude_code/pre_tool_use_bash.json", repo,
                          tool_use_id="toolu_01NpmTest5Hw",
                          tool_input={"command": "npm test"}))
    hook_cc(repo, payload("claude_code/post_tool_use_failure.json", repo))
    assert hook_cc(repo, payload("claude_code/stop.json", repo)) == {}

    ledger = {e["callId"]: e for e in json.loads(gg(repo, "ledger", "--json").stdout)}
    edit = ledger["toolu_01EditAppPy9fQ2"]
    assert (edit["status"], edit["sessionId"], edit["declaredWrites"]) == \
        ("succeeded", SESSION, ["src/app.py"])
    assert [p["path"] for p in edit["filePatches"]] == ["src/app.py"]
    response = payload("claude_code/post_tool_use_edit.json", repo)["tool_response"]
    store = repo / ".git" / "gitguard"
    with Guard.open(repo) as guard:      # in the session's artifact journal, not a file
        assert guard.store.read_artifact(edit["resultRef"]) == durable.canonical_json(response)
    failed = ledger["toolu_01NpmTest5Hw"]
    assert failed["status"] == "failed" and "2 tests failed" in failed["errorSummary"]

    status = json.loads(gg(repo, "status", "--json").stdout)
    assert {"path": "src/app.py", "owner": "toolu_01EditAppPy9fQ2", "confidence": "exact",
            "change": "M"} in status["dirty"]
    rows = json.loads(gg(repo, "checkpoints", "--json").stdout)
    assert [r["stepId"] for r in rows if r["kind"] == "post" and r["stepId"] in
            ("user-prompt", "stop")] == ["user-prompt", "stop"]
    stop = json.loads((store / "checkpoints" / f"{rows[-1]['checkpointId']}.json").read_text())
    assert stop["transcriptPath"].endswith(f"{SESSION}.jsonl")
    sessions = json.loads(gg(repo, "session", "list", "--json").stdout)
    assert [(s["sessionId"], s["agent"]) for s in sessions] == [(SESSION, "claude-code")]


def test_a_repeated_npm_publish_is_denied(repo: Path) -> None:
    guard = Guard.open(repo)
    assert claude_code.handle(guard, payload("claude_code/pre_tool_use_bash.json", repo)) == {}
    claude_code.handle(guard, payload("claude_code/post_tool_use_bash.json", repo))
    # The model asks again, in other words and under a new tool_use_id.
    again = payload("claude_code/pre_tool_use_bash.json", repo, tool_use_id="toolu_01Again",
                    tool_input={"command": "npm publish", "description": "Publish again"})
    answer = hook_cc(repo, again)["hookSpecificOutput"]
    assert answer["hookEventName"] == "PreToolUse"
    assert answer["permissionDecision"] == "deny"
    assert "already ran as toolu_01NpmPublish3Rt" in answer["permissionDecisionReason"]
    assert "toolu_01Again" not in {e.call_id for e in guard.ledger()}


def test_an_ask_replay_is_ledgered_once_the_user_approves(repo: Path) -> None:
    guard = Guard.open(repo)
    commit = {"command": "git commit -qm wip"}
    first = payload("claude_code/pre_tool_use_bash.json", repo, tool_input=commit,
                    tool_use_id="toolu_commit_1")
    claude_code.handle(guard, first)
    claude_code.handle(guard, {**first, "hook_event_name": "PostToolUse",
                               "tool_response": {"stdout": "", "stderr": ""}})
    second = {**first, "tool_use_id": "toolu_commit_2"}
    asked = claude_code.handle(guard, second)["hookSpecificOutput"]
    assert asked["permissionDecision"] == "ask"
    assert "toolu_commit_1" in asked["permissionDecisionReason"]
    # The user said yes in Claude Code's prompt, so the tool ran: gitguard ledgers it now.
    claude_code.handle(guard, {**second, "hook_event_name": "PostToolUse",
                               "tool_response": {"stdout": "", "stderr": ""}})
    entry = {e.call_id: e for e in guard.ledger()}["toolu_commit_2"]
    assert (entry.status, entry.replay_of) == ("succeeded", "toolu_commit_1")


def test_a_resumed_session_gets_the_recovery_note(repo: Path) -> None:
    guard = Guard.open(repo)
    claude_code.handle(guard, payload("claude_code/session_start_startup.json", repo))
    claude_code.handle(guard, payload("claude_code/pre_tool_use_bash.json", repo))
    claude_code.handle(guard, payload("claude_code/post_tool_use_bash.json", repo))
    deploy = {"command": "curl -X POST https://deploy.example.com/api/release"}
    claude_code.handle(guard, payload("claude_code/pre_tool_use_bash.json", repo,
                                      tool_input=deploy, tool_use_id="toolu_01Deploy"))
    # ... and here the agent died: no PostToolUse for toolu_01Deploy.
    for source in ("resume", "compact"):
        answer = hook_cc(repo, payload(f"claude_code/session_start_{source}.json", repo))
        out = answer["hookSpecificOutput"]
        assert out["hookEventName"] == "SessionStart"
        note = out["additionalContext"]
        assert "toolu_01Deploy" in note and "outcome is unknown" in note
        assert "Do not repeat:" in note and "Bash(toolu_01NpmPublish3Rt)" in note
    startup = hook_cc(repo, payload("claude_code/session_start_startup.json", repo))
    assert startup == {}


def test_an_internal_error_never_blocks_the_agent(repo: Path) -> None:
    bad = gg(repo, "hook", "claude-code", input=b"{not json")
    assert json.loads(bad.stdout)["systemMessage"].startswith("gitguard: its hook failed")
    guard = Guard.open(repo)
    claude_code.handle(guard, payload("claude_code/pre_tool_use_edit.json", repo))
    ledger_file = repo / ".git" / "gitguard" / "ledger.jsonl"
    lines = ledger_file.read_bytes().split(b"\n")
    lines[0] = lines[0].replace(b"Edit", b"Tide")  # checksum no longer matches
    ledger_file.write_bytes(b"\n".join(lines))
    answer = hook_cc(repo, payload("claude_code/pre_tool_use_bash.json", repo))
    assert "permissionDecision" not in json.dumps(answer)
    assert "the PreToolUse hook failed" in answer["systemMessage"]
    assert "ledger.jsonl line 1" in answer["systemMessage"]
    log = (repo / ".git" / "gitguard" / "hook-errors.log").read_text()
    assert "claude-code PreToolUse" in log and "CorruptRecord" in log


def test_codex_events_have_the_same_shape(repo: Path) -> None:
    assert hook_cc(repo, payload("codex/pre_tool_use_bash.json", repo)) == {}
    hook_cc(repo, payload("codex/post_tool_use_bash.json", repo))
    again = hook_cc(repo, payload("codex/pre_tool_use_bash.json", repo, tool_use_id="call_2"))
    assert again["hookSpecificOutput"]["permissionDecision"] == "deny"
    note = hook_cc(repo, payload("codex/session_start_resume.json", repo))
    assert "Bash(call_Yh2kQ8vN1pZ4)" in note["hookSpecificOutput"]["additionalContext"]
    assert git(repo, "status", "--porcelain") == ""  # nothing written into the worktree


def test_the_note_is_resumes_and_a_failing_resume_falls_back_to_the_ledgers(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gitguard.recovery.resume gives the note; when it raises, the ledger's note is given
    and the failure logged."""
    guard = Guard.open(repo)
    claude_code.handle(guard, payload("claude_code/pre_tool_use_bash.json", repo))
    event = payload("claude_code/session_start_resume.json", repo)
    note = claude_code.handle(guard, event)["hookSpecificOutput"]["additionalContext"]
    assert note.startswith("System resumed from checkpoint.\nCheckpoint: ckpt_")
    assert "Tool Bash(toolu_01NpmPublish3Rt) started but its outcome is unknown" in note

    def broken(guard: Guard, *, checkpoint_id: str | None = None,
               session_id: str | None = None) -> resume.ResumeResult:
        raise RuntimeError("resume is not finished")

    monkeypatch.setattr(resume, "resume", broken)
    note = claude_code.handle(guard, event)["hookSpecificOutput"]["additionalContext"]
    assert note.startswith("System resumed; gitguard's ledger of this session says:")
    assert "Bash(toolu_01NpmPublish3Rt) started `npm publish`" in note
    assert "resume is not finished" in (repo / ".git/gitguard/hook-errors.log").read_text()


def _transcript(repo: Path, tmp: Path) -> str:
    target = tmp / "transcript.jsonl"
    target.write_bytes((FIXTURES / "claude_code" / "transcript_denied.jsonl").read_bytes())
    return str(target)


def test_a_call_denied_at_the_prompt_is_failed_at_stop_and_may_be_asked_again(
        repo: Path, tmp_path: Path) -> None:
    """PreToolUse runs before Claude Code's dialog: the user said no, no PostToolUse came.
    The transcript's rejection says the tool never ran, so a later npm publish is no replay."""
    transcript = _transcript(repo, tmp_path)
    assert hook_cc(repo, payload("claude_code/pre_tool_use_bash.json", repo)) == {}
    assert hook_cc(repo, payload("claude_code/stop.json", repo,
                                 transcript_path=transcript)) == {}
    ledger = {e["callId"]: e for e in json.loads(gg(repo, "ledger", "--json").stdout)}
    denied = ledger["toolu_01NpmPublish3Rt"]
    assert denied["status"] == "failed"
    assert "denied at the permission prompt" in denied["errorSummary"]
    again = payload("claude_code/pre_tool_use_bash.json", repo, tool_use_id="toolu_01Approved")
    assert hook_cc(repo, again) == {}, "a call that never ran is not a replay"
    rows = json.loads(gg(repo, "checkpoints", "--json").stdout)
    assert any(r["stepId"] == "stop" for r in rows)


def test_a_call_with_no_end_and_no_evidence_is_uncertain_and_its_window_closes(
        repo: Path, tmp_path: Path) -> None:
    """Interrupted (the transcript's marker) or no transcript: it may have run. Uncertain,
    the user is told, a repeat of a never-replay call is denied; the user's later edit is
    the user's, not ambiguous."""
    transcript = _transcript(repo, tmp_path)
    push = payload("claude_code/pre_tool_use_bash.json", repo, tool_use_id="toolu_01GitPush7Kd",
                   tool_input={"command": "git push origin main"})
    publish = payload("claude_code/pre_tool_use_bash.json", repo, tool_use_id="toolu_01Nothing",
                      tool_input={"command": "npm publish --tag next"})
    hook_cc(repo, push)
    hook_cc(repo, publish)
    answer = hook_cc(repo, payload("claude_code/stop.json", repo, transcript_path=transcript))
    assert "toolu_01GitPush7Kd" in answer["systemMessage"]
    assert "toolu_01Nothing" in answer["systemMessage"]
    (repo / "README.md").write_text("# the user's words after the turn\n")
    ledger = {e["callId"]: e for e in json.loads(gg(repo, "ledger", "--json").stdout)}
    for call in ("toolu_01GitPush7Kd", "toolu_01Nothing"):
        assert ledger[call]["status"] == "uncertain"
        assert f"gitguard reconcile {call}" in ledger[call]["note"]
        assert ledger[call]["postCheckpointId"]
    repeat = hook_cc(repo, {**publish, "tool_use_id": "toolu_01Repeat"})
    assert repeat["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "toolu_01Nothing" in repeat["hookSpecificOutput"]["permissionDecisionReason"]
    dirty = json.loads(gg(repo, "status", "--json").stdout)["dirty"]
    readme = [d for d in dirty if d["path"] == "README.md"]
    assert readme and readme[0]["owner"] == "user"
    gg(repo, "verify")


def test_permission_denied_ends_the_call_and_session_end_closes_the_session(
        repo: Path) -> None:
    hook_cc(repo, payload("claude_code/session_start_startup.json", repo))
    hook_cc(repo, payload("claude_code/pre_tool_use_bash.json", repo))
    assert hook_cc(repo, payload("claude_code/permission_denied.json", repo)) == {}
    assert hook_cc(repo, payload("claude_code/permission_denied.json", repo)) == {}, "again"
    edit = payload("claude_code/pre_tool_use_edit.json", repo)
    hook_cc(repo, edit)
    missing = str(repo.parent / "no-such-transcript.jsonl")
    end = hook_cc(repo, payload("claude_code/session_end.json", repo, transcript_path=missing))
    assert edit["tool_use_id"] in end["systemMessage"]
    ledger = {e["callId"]: e for e in json.loads(gg(repo, "ledger", "--json").stdout)}
    publish = ledger["toolu_01NpmPublish3Rt"]
    assert publish["status"] == "failed" and "auto-mode classifier" in publish["errorSummary"]
    assert ledger[edit["tool_use_id"]]["status"] == "uncertain"
    [session] = json.loads(gg(repo, "session", "list", "--json").stdout)
    assert session["sessionId"] == SESSION and session["endedAt"]
    assert any(r["stepId"] == "session-end" for r in
               json.loads(gg(repo, "checkpoints", "--json").stdout))


@pytest.mark.parametrize("depth", [150, 5000])
def test_a_deeply_nested_event_is_said_plainly_and_blocks_nothing(repo: Path,
                                                                 depth: int) -> None:
    """5,000 levels printed a RecursionError traceback (exit 1) before the hook ran: the
    early scan's look at stdin caught only ValueError."""
    gg(repo, "init", "--no-hooks", "--no-daemon")
    deep = "[" * depth + "]" * depth
    event = (f'{{"hook_event_name": "PreToolUse", "tool_name": "Bash", "cwd": "{repo}", '
             f'"tool_input": {{"command": {deep}}}}}')
    proc = gg(repo, "hook", "claude-code", input=event.encode(), check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    said = json.loads(proc.stdout)["systemMessage"]
    assert "nests deeper than 100 levels" in said and "RecursionError" not in said
    assert "permissionDecision" not in proc.stdout
