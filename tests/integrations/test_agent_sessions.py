"""An agent session outlives its processes (DESIGN.md, Sessions): SessionEnd closes the
turn, `--resume`/`--continue` come back under the same id and are guarded as before,
and a fork (`--fork-session`) sees its parent's calls. No hook fails for session state."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.commands import gg
from tests.helpers.daemons import running_daemon
from tests.helpers.hooks import hook_cc, payload

SESSION = "3f6c1a52-9b8e-4d47-a1d2-6e0c9f4b7a15"
FORK = "9d0e5b7a-1c2f-4e3d-8a6b-5f4e3d2c1b0a"
PUBLISH = {"command": "npm publish"}


@pytest.fixture(params=["no-daemon", "daemon"])
def guarded(request: pytest.FixtureRequest, repo: Path) -> Iterator[Path]:
    with running_daemon(repo) if request.param == "daemon" else nullcontext():
        yield repo


def _publish(repo: Path, call: str, session: str = SESSION, **extra: Any) -> dict[str, Any]:
    return hook_cc(repo, payload("claude_code/pre_tool_use_bash.json", repo, tool_use_id=call,
                                 tool_input=PUBLISH, session_id=session, **extra))


def _one_run(repo: Path, call: str) -> None:
    """`claude -p`: a publish that succeeds, then SessionEnd."""
    assert _publish(repo, call) == {}
    hook_cc(repo, payload("claude_code/post_tool_use_bash.json", repo, tool_use_id=call,
                          tool_input=PUBLISH))
    assert hook_cc(repo, payload("claude_code/session_end.json", repo)) == {}


def test_a_resumed_session_is_guarded_after_session_end(guarded: Path) -> None:
    repo = guarded
    hook_cc(repo, payload("claude_code/session_start_startup.json", repo))
    _one_run(repo, "toolu_publish_1")
    # `claude -p --resume ID`: the same session id after SessionEnd.
    resumed = hook_cc(repo, payload("claude_code/session_start_resume.json", repo))
    assert "systemMessage" not in resumed
    assert "toolu_publish_1" in resumed["hookSpecificOutput"]["additionalContext"]
    again = _publish(repo, "toolu_publish_2")
    assert "systemMessage" not in again, "no hook error after SessionEnd"
    assert again["hookSpecificOutput"]["permissionDecision"] == "deny"
    # `--continue` with no SessionStart answer seen yet: any event reopens it.
    hook_cc(repo, payload("claude_code/session_end.json", repo))
    edit = hook_cc(repo, payload("claude_code/pre_tool_use_edit.json", repo))
    assert "systemMessage" not in edit
    ledger = {e["callId"]: e for e in json.loads(gg(repo, "ledger", "--json").stdout)}
    assert ledger["toolu_01EditAppPy9fQ2"]["sessionId"] == SESSION
    assert "toolu_publish_2" not in ledger
    [session] = json.loads(gg(repo, "session", "list", "--json").stdout)
    assert session["sessionId"] == SESSION and session["endedAt"] is None


def test_a_fork_sees_its_parents_calls(guarded: Path, tmp_path: Path) -> None:
    repo = guarded
    hook_cc(repo, payload("claude_code/session_start_startup.json", repo))
    _one_run(repo, "toolu_publish_1")
    # `--resume ID --fork-session`: a new id; the copied history names the parent.
    transcript = tmp_path / f"{FORK}.jsonl"
    transcript.write_text(json.dumps({
        "type": "user", "sessionId": FORK, "message": {"role": "user", "content": "publish"},
        "forkedFrom": {"sessionId": SESSION, "messageUuid": "u1"}}) + "\n")
    start = hook_cc(repo, payload("claude_code/session_start_resume.json", repo,
                                  session_id=FORK, transcript_path=str(transcript)))
    assert "toolu_publish_1" in start["hookSpecificOutput"]["additionalContext"]
    denied = _publish(repo, "toolu_fork_publish", session=FORK,
                      transcript_path=str(transcript))
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "toolu_publish_1" in denied["hookSpecificOutput"]["permissionDecisionReason"]
    sessions = {s["sessionId"]: s for s in
                json.loads(gg(repo, "session", "list", "--json").stdout)}
    assert sessions[FORK]["parentId"] == SESSION


def test_a_fork_found_only_at_its_first_call_is_linked_then(repo: Path, tmp_path: Path) -> None:
    """Claude Code may write the fork's copied history after SessionStart: the first tool
    call still finds the parent."""
    _one_run(repo, "toolu_publish_1")
    transcript = tmp_path / f"{FORK}.jsonl"
    hook_cc(repo, payload("claude_code/session_start_resume.json", repo, session_id=FORK,
                          transcript_path=str(transcript)))
    transcript.write_text(json.dumps({"type": "user", "sessionId": FORK,
                                      "forkedFrom": {"sessionId": SESSION}}) + "\n")
    denied = _publish(repo, "toolu_fork_publish", session=FORK,
                      transcript_path=str(transcript))
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_session_end_for_a_session_gitguard_never_saw_is_no_error(repo: Path) -> None:
    answer = hook_cc(repo, payload("claude_code/session_end.json", repo, session_id="unseen"))
    assert answer == {}
    gg(repo, "session", "start", "--id", "mine")
    gg(repo, "session", "end")
    assert gg(repo, "session", "start", "--id", "mine").returncode == 0


def test_a_fork_is_known_by_its_parents_calls_in_its_copied_history(
        repo: Path, tmp_path: Path) -> None:
    """Claude Code 2.1.3xx writes no `forkedFrom`: the fork's transcript starts with a copy
    of the parent's messages, its tool_use ids included, under the fork's own id."""
    _one_run(repo, "toolu_publish_1")
    transcript = tmp_path / f"{FORK}.jsonl"
    copied = {"type": "assistant", "sessionId": FORK, "uuid": "u2", "message": {
        "role": "assistant", "content": [{"type": "tool_use", "id": "toolu_publish_1",
                                          "name": "Bash", "input": PUBLISH}]}}
    transcript.write_text(json.dumps(copied) + "\n")
    denied = _publish(repo, "toolu_fork_publish", session=FORK,
                      transcript_path=str(transcript))
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    # The parent resumed under its own id is no fork of itself.
    own = tmp_path / f"{SESSION}.jsonl"
    own.write_text(json.dumps({**copied, "sessionId": SESSION}) + "\n")
    hook_cc(repo, payload("claude_code/session_start_resume.json", repo,
                          transcript_path=str(own)))
    sessions = {s["sessionId"]: s for s in
                json.loads(gg(repo, "session", "list", "--json").stdout)}
    assert (sessions[FORK]["parentId"], sessions[SESSION]["parentId"]) == (SESSION, None)


def test_a_fork_whose_history_is_not_written_yet_is_guarded_by_every_session(
        guarded: Path, tmp_path: Path) -> None:
    """With the daemon the hooks answer before Claude Code writes the fork's copied
    history: the fork's parent cannot be named yet, so every session here is its past
    (the real CLI's publish ran twice before). A later hook names the parent."""
    repo = guarded
    _one_run(repo, "toolu_publish_1")
    transcript = tmp_path / f"{FORK}.jsonl"         # not written yet
    hook_cc(repo, payload("claude_code/session_start_resume.json", repo, session_id=FORK,
                          transcript_path=str(transcript)))
    denied = _publish(repo, "toolu_fork_publish", session=FORK,
                      transcript_path=str(transcript))
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    sessions = {s["sessionId"]: s for s in
                json.loads(gg(repo, "session", "list", "--json").stdout)}
    assert sessions[FORK]["parentId"] == "*"
    copied = {"type": "assistant", "sessionId": FORK, "uuid": "u2", "message": {
        "role": "assistant", "content": [{"type": "tool_use", "id": "toolu_publish_1",
                                          "name": "Bash", "input": PUBLISH}]}}
    transcript.write_text(json.dumps(copied) + "\n")
    _publish(repo, "toolu_fork_publish_2", session=FORK, transcript_path=str(transcript))
    sessions = {s["sessionId"]: s for s in
                json.loads(gg(repo, "session", "list", "--json").stdout)}
    assert sessions[FORK]["parentId"] == SESSION
