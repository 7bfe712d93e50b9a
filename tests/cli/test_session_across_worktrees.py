"""One agent session followed across worktrees is shown as one (issue 29): `ledger
--session S` and `status --session S` read the store of every worktree of the repository
(the main one, linked ones, ones nested in `.claude/worktrees`), and CwdChanged, routed
by its `new_cwd`, keeps the move in the session's lineage where it arrived."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.commands import gg, git

S = "7926a250-82e2-4d72-a3d3-0cc9ccfca137"
OTHER = "0c5e1d2a-6b7f-4e8d-9a1b-2c3d4e5f6a7b"


def _send(repo: Path, cwd: Path, event: str, session: str = S, **fields: Any) -> None:
    payload = {"session_id": session, "cwd": str(cwd), "hook_event_name": event,
               "transcript_path": str(repo.parent / f"{session}.jsonl"), **fields}
    proc = subprocess.run([sys.executable, "-m", "gitguard", "hook", "claude-code"],
                          cwd=repo, input=json.dumps(payload), capture_output=True, text=True,
                          env={**os.environ, "CLAUDE_PROJECT_DIR": str(repo)})
    assert proc.returncode == 0 and "systemMessage" not in proc.stdout, proc


def _bash(repo: Path, cwd: Path, call: str, command: str, target: str,
          session: str = S) -> None:
    tool = {"command": command}
    _send(repo, cwd, "PreToolUse", session, tool_name="Bash", tool_input=tool,
          tool_use_id=call)
    (cwd / target).write_text(f"{call}\n")
    _send(repo, cwd, "PostToolUse", session, tool_name="Bash", tool_input=tool,
          tool_use_id=call, tool_response={"stdout": "", "stderr": "", "interrupted": False})


@pytest.fixture
def three(repo: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """The project, a sibling worktree, and one nested in `.claude/worktrees`."""
    sibling = tmp_path / "wt"
    nested = repo / ".claude" / "worktrees" / "agent-a1"
    git(repo, "worktree", "add", "-q", str(sibling), "-b", "side")
    git(repo, "worktree", "add", "-q", str(nested), "-b", "agent-a1")
    gg(repo, "init", "--no-daemon")
    return repo, sibling, nested


def test_a_session_across_three_worktrees_is_listed_as_one(
        three: tuple[Path, Path, Path]) -> None:
    repo, sibling, nested = three
    _bash(repo, repo, "toolu_here", "echo here > here.txt", "here.txt")
    _send(repo, sibling, "CwdChanged", old_cwd=str(repo), new_cwd=str(sibling))
    _bash(repo, sibling, "toolu_there", "echo there > there.txt", "there.txt")
    _bash(repo, nested, "toolu_nested", "echo sub > sub.txt", "sub.txt")
    _bash(repo, repo, "toolu_other", "echo other > other.txt", "other.txt", session=OTHER)

    for where in (repo, sibling, nested):       # the same answer from any of them
        rows = json.loads(gg(where, "ledger", "--session", S, "--json").stdout)
        assert [(r["callId"], r["worktree"]) for r in rows] == [
            ("toolu_here", str(repo)), ("toolu_nested", str(nested)),
            ("toolu_there", str(sibling))], rows
        assert {r["sessionId"] for r in rows} == {S}
    plain = json.loads(gg(repo, "ledger", "--json").stdout)
    assert [r["callId"] for r in plain] == ["toolu_here", "toolu_other"]
    assert all("worktree" not in r for r in plain), "the plain ledger keeps its shape"

    status = json.loads(gg(sibling, "status", "--session", S, "--json").stdout)
    assert status["workspace"] == str(sibling) and "dirty" in status
    touched = {t["worktree"]: t for t in status["sessionWorktrees"]}
    assert list(touched) == [str(repo), str(nested), str(sibling)]
    assert [t["current"] for t in touched.values()] == [False, False, True]
    assert touched[str(repo)]["callIds"] == ["toolu_here"]
    assert [(d["path"], d["owner"]) for d in touched[str(repo)]["dirty"]] == [
        ("here.txt", "toolu_here")], "another session's file is not this session's"
    assert [(d["path"], d["owner"]) for d in touched[str(nested)]["dirty"]] == [
        ("sub.txt", "toolu_nested")]
    assert touched[str(sibling)]["byStatus"] == {"succeeded": 1}
    [move] = touched[str(sibling)]["moves"]
    assert (move["fromDir"], move["toDir"]) == (str(repo), str(sibling))
    assert touched[str(repo)]["moves"] == []
    human = gg(repo, "status", "--session", S).stdout
    assert f"session {S} in 3 worktree(s):" in human
    assert f"arrived by cd from {repo}" in human


def test_a_session_no_worktree_knows_is_an_error(three: tuple[Path, Path, Path]) -> None:
    repo, _sibling, _nested = three
    for command in ("ledger", "status"):
        proc = gg(repo, command, "--session", "nobody-here", check=False)
        assert proc.returncode == 1, proc
        assert "Error: no worktree of this repository knows session 'nobody-here'" \
            in proc.stderr and "Hint:" in proc.stderr


def test_cwd_changed_is_routed_by_new_cwd(three: tuple[Path, Path, Path]) -> None:
    """The move is recorded where the session arrived (`new_cwd`; the captured payload's
    `cwd` is the new directory too, but a `cwd` still naming the old one changes nothing),
    and the old worktree's store is left alone."""
    repo, sibling, _nested = three
    _send(repo, repo, "SessionStart", source="startup")
    _send(repo, repo, "CwdChanged", old_cwd=str(repo), new_cwd=str(sibling))
    there = json.loads(gg(sibling, "session", "list", "--json").stdout)
    assert [(s["sessionId"], [m["toDir"] for m in s["moves"]]) for s in there] == [
        (S, [str(sibling)])]
    here = json.loads(gg(repo, "session", "list", "--json").stdout)
    assert [(s["sessionId"], s["moves"]) for s in here] == [(S, [])]


def test_the_captured_cwd_changed_moves_the_session(three: tuple[Path, Path, Path]) -> None:
    """fixtures/claude_code/cwd_changed.json is what Claude Code 2.1.332 sent after `cd
    ../wt` (captured by e2e/test_capture_fixtures.py), its paths moved to this test's."""
    from tests.helpers.hooks import hook_cc, payload

    repo, sibling, _nested = three
    event = payload("claude_code/cwd_changed.json", repo)
    event = json.loads(json.dumps(event).replace("/home/user/wt", str(sibling)))
    assert (event["old_cwd"], event["new_cwd"], event["cwd"]) == (
        str(repo), str(sibling), str(sibling))
    assert hook_cc(repo, event, env={"CLAUDE_PROJECT_DIR": str(repo)}) == {}
    [session] = json.loads(gg(sibling, "session", "list", "--json").stdout)
    assert session["sessionId"] == event["session_id"]
    assert [(m["fromDir"], m["toDir"]) for m in session["moves"]] == [
        (str(repo), str(sibling))]
    trace = gg(sibling, "trace").stdout
    assert "session.cwd_changed" in trace


def test_session_end_ends_the_session_in_every_worktree_it_acted_in(
        three: tuple[Path, Path, Path]) -> None:
    """SessionEnd comes from where the session ended; a call it left open in another
    worktree (a subagent's nested one that never reported its end) is settled there too,
    uncertain, and the session is ended everywhere."""
    repo, sibling, nested = three
    _bash(repo, repo, "toolu_here", "echo here > here.txt", "here.txt")
    _send(repo, nested, "PreToolUse", tool_name="Bash", tool_input={"command": "make"},
          tool_use_id="toolu_cut", agent_id="a1", agent_type="general-purpose")
    _send(repo, sibling, "CwdChanged", old_cwd=str(repo), new_cwd=str(sibling))
    _send(repo, sibling, "SessionEnd", reason="other")
    status = json.loads(gg(repo, "status", "--session", S, "--json").stdout)
    ended = {t["worktree"]: t["endedAt"] is not None for t in status["sessionWorktrees"]}
    assert ended == {str(repo): True, str(nested): True, str(sibling): True}, status
    [cut] = json.loads(gg(nested, "ledger", "--json").stdout)
    assert (cut["callId"], cut["status"]) == ("toolu_cut", "uncertain"), cut


def test_a_worktree_whose_directory_is_gone_is_skipped(three: tuple[Path, Path, Path]) -> None:
    """A linked worktree deleted without `git worktree remove` (git would prune it) is no
    place to read; the others still are."""
    import shutil

    repo, sibling, nested = three
    _bash(repo, nested, "toolu_nested", "echo sub > sub.txt", "sub.txt")
    _bash(repo, sibling, "toolu_there", "echo there > there.txt", "there.txt")
    shutil.rmtree(sibling)
    rows = json.loads(gg(repo, "ledger", "--session", S, "--json").stdout)
    assert [(r["callId"], r["worktree"]) for r in rows] == [("toolu_nested", str(nested))]
