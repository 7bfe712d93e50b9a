"""A Claude Code session across processes: `-p`, SessionEnd, `--resume`, `--continue`,
`--fork-session`, and a `kill -9` in the middle of a Bash call."""

from __future__ import annotations

from typing import Any

from e2e.harness import Repo, Run, bash, claude, claude_until, kill9, publish_command

DENIED_BY_GITGUARD = "gitguard:"


def _denied(run: Run) -> list[dict[str, Any]]:
    return [r for r in run.tool_results() if DENIED_BY_GITGUARD in str(r.get("content"))]


def _ran(run: Run) -> list[str]:
    """tool_use_ids of the calls that ran (not refused by a hook)."""
    return [r["tool_use_id"] for r in run.tool_results()
            if DENIED_BY_GITGUARD not in str(r.get("content"))]


def _clean(repo: Repo, run: Run) -> None:
    assert run.returncode == 0, (run.returncode, run.stderr[-3000:])
    assert not run.hook_failures(), run.hook_failures()
    assert repo.hook_errors() == ""


def test_resume_and_continue_keep_guarding_the_session(make_repo: Any, daemon: bool) -> None:
    repo: Repo = make_repo(daemon=daemon)
    publish = publish_command(repo.server)
    first = claude(repo, "publish the package",
                   [{"tools": [bash(publish)]}, {"tools": [bash("echo one > one.txt")]},
                    {"text": "published"}])
    _clean(repo, first)
    session = first.session_id
    assert repo.server.count("publish") == 1
    assert not _denied(first)

    again = [{"tools": [bash(publish)]}, {"tools": [bash("echo two > two.txt")]},
             {"text": "checked"}]
    resumed = claude(repo, "publish it again", again, "--resume", session)
    continued = claude(repo, "and once more", again, "--continue")
    ran: list[str] = []
    for run in (first, resumed, continued):
        _clean(repo, run)
        ran += _ran(run)
    for run in (resumed, continued):
        assert run.session_id == session
        [refused] = _denied(run)
        assert refused["is_error"] is True and "must not run twice" in str(refused["content"])
    assert repo.server.count("publish") == 1

    ledger = {e["callId"]: e for e in repo.ledger()}
    assert set(ran) <= set(ledger), set(ran) - set(ledger)
    assert all(ledger[c]["status"] == "succeeded" for c in ran)
    assert {ledger[c]["sessionId"] for c in ran} == {session}


def test_fork_session_remembers_the_parents_publish(make_repo: Any, daemon: bool) -> None:
    repo: Repo = make_repo(daemon=daemon)
    publish = publish_command(repo.server)
    first = claude(repo, "publish the package", [{"tools": [bash(publish)]}, {"text": "ok"}])
    _clean(repo, first)
    fork = claude(repo, "publish it in the fork", [{"tools": [bash(publish)]}, {"text": "ok"}],
                  "--resume", first.session_id, "--fork-session")
    _clean(repo, fork)
    assert fork.session_id != first.session_id
    [refused] = _denied(fork)
    assert "must not run twice" in str(refused["content"])
    assert repo.server.count("publish") == 1


def test_kill_9_mid_bash_then_resume_brings_the_recovery_note(make_repo: Any,
                                                             daemon: bool) -> None:
    repo: Repo = make_repo(daemon=daemon)
    # the same command in both runs: the repeat is a replay of the killed call
    publish = publish_command(repo.server) + " && sleep 30"
    run, proc = claude_until(
        repo, "publish, then wait for the registry",
        [{"tools": [bash(publish)]}, {"text": "never reached"}],
        lambda: repo.server.count("publish") >= 1)
    assert repo.server.count("publish") == 1, run.stderr
    session = run.session_id
    [killed_call] = repo.server.tool_ids()
    kill9(proc)

    seen = len(repo.server.requests)
    resumed = claude(repo, "what happened? publish if needed",
                     [{"tools": [bash(publish)]},
                      {"if_last_result_contains": "must not run twice",
                       "then": {"text": "not publishing twice"},
                       "else": {"text": "published again"}}],
                     "--resume", session)
    _clean(repo, resumed)
    after = [r for r in repo.server.model_requests()
             if repo.server.requests.index(r) >= seen]
    assert after, "the resumed run asked the model nothing"
    note = str(after[0].body["messages"])
    assert "System resumed" in note or "recovery" in note.lower(), note[-3000:]
    assert killed_call in note and "outcome is unknown" in note
    [refused] = _denied(resumed)
    assert killed_call in str(refused["content"])
    assert resumed.events[-1].get("result") == "not publishing twice"
    assert repo.server.count("publish") == 1
    entry = {e["callId"]: e for e in repo.ledger()}[killed_call]
    assert entry["status"] == "uncertain"
