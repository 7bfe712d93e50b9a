"""Today's Claude Code (2.1.332): subagents in the foreground and in the background, a tool
batch, the model API failing for good, and a delegation launched again after `--resume`
(issue 29). The user edits while the subagent works; every test checks the ledger, the
owners and the rollback byte for byte."""

from __future__ import annotations

import json
from typing import Any

from e2e.harness import Repo, Run, bash, claude, claude_start, script_prompt

USER_LINE = "the user's line, written while the subagent worked\n"


def _agent(script: list[dict[str, Any]], background: bool) -> dict[str, Any]:
    return {"name": "Agent", "input": {
        "description": "Helper", "subagent_type": "general-purpose",
        "run_in_background": background,
        "prompt": script_prompt("Do the work.", script)}}


def _write(repo: Repo, rel: str, text: str) -> dict[str, Any]:
    return {"name": "Write", "input": {"file_path": str(repo.root / rel), "content": text}}


def _clean(repo: Repo, run: Run) -> None:
    assert run.returncode == 0, (run.returncode, run.stderr[-3000:])
    assert not run.hook_failures(), run.hook_failures()
    assert repo.hook_errors() == ""


def _ledger(repo: Repo) -> dict[str, dict[str, Any]]:
    return {e["callId"]: e for e in repo.ledger()}


def _subagent_run(make_repo: Any, daemon: bool, background: bool) -> None:
    repo: Repo = make_repo(daemon=daemon)
    sub = [{"tools": [bash("echo from the subagent > sub.txt")]},
           {"pause": "user-edits", "tools": [_write(repo, "subw.txt", "written\n")]},
           {"tools": [bash("echo appended >> NOTES.md")]},
           {"text": "sub done"}]
    live = claude_start(repo, "delegate", [{"tools": [_agent(sub, background)]},
                                          {"text": "main done"}])
    repo.server.wait_paused("user-edits")
    # The user edits while the subagent works: a file nobody declared, and a new file.
    repo.write("README.md", repo.read("README.md") + USER_LINE)
    repo.write("mine.txt", USER_LINE)
    repo.server.release("user-edits")
    run = live.finish(timeout=240)
    _clean(repo, run)

    ledger = _ledger(repo)
    agents = [e for e in ledger.values() if e["toolName"] == "Agent"]
    subs = [e for e in ledger.values() if e["agentId"]]
    assert len(agents) == 1 and agents[0]["filePatches"] == [], agents
    assert {e["toolName"] for e in subs} == {"Bash", "Write"}, subs
    assert all(e["status"] == "succeeded" for e in ledger.values()), ledger
    assert {e["agentType"] for e in subs} == {"general-purpose"}
    owners = {d["path"]: (d["owner"], d["confidence"]) for d in repo.gg_json("status")["dirty"]}
    assert owners["README.md"][0] == "user" and owners["mine.txt"][0] == "user", owners
    assert owners["sub.txt"][0] in ledger and owners["subw.txt"] == (
        next(e["callId"] for e in subs if e["toolName"] == "Write"), "exact"), owners
    sessions = repo.gg_json("session", "list")
    [agent] = [a for s in sessions for a in s.get("subagents", [])]
    assert agent["endedAt"] is not None, sessions

    first = repo.gg_json("checkpoints")[0]["checkpointId"]
    done = repo.gitguard("rollback-files", "--to", first, "--json", check=False)
    assert done.returncode == 0, (done.stdout, done.stderr)
    result = json.loads(done.stdout)
    assert result["conflicts"] == [], result
    assert not (repo.root / "sub.txt").exists() and not (repo.root / "subw.txt").exists()
    assert repo.read("NOTES.md") == "# Notes\n\nfirst line\n", "the subagent's append undone"
    assert repo.read("README.md") == "demo project\n" + USER_LINE, "the user's edit kept"
    assert repo.read("mine.txt") == USER_LINE


def test_a_foreground_subagent_while_the_user_edits(make_repo: Any, daemon: bool) -> None:
    _subagent_run(make_repo, daemon, background=False)


def test_a_background_subagent_outlives_the_main_loops_stop(make_repo: Any,
                                                           daemon: bool) -> None:
    _subagent_run(make_repo, daemon, background=True)


def test_a_tool_batch_is_ledgered_whole(make_repo: Any) -> None:
    repo: Repo = make_repo(daemon=True)
    run = claude(repo, "two at once", [
        {"tools": [_write(repo, "a.txt", "a\n"), bash("echo b > b.txt"),
                   {"name": "Read", "input": {"file_path": str(repo.root / "app.py")}}]},
        {"text": "done"}])
    _clean(repo, run)
    ledger = _ledger(repo)
    assert set(ledger) == set(repo.server.tool_ids()), (ledger, repo.server.tool_ids())
    assert all(e["status"] == "succeeded" for e in ledger.values()), ledger
    owners = {d["path"]: d["owner"] for d in repo.gg_json("status")["dirty"]}
    assert owners["a.txt"] in ledger and owners["b.txt"] in ledger, owners


def test_an_api_failure_ends_the_turn_and_resume_goes_on(make_repo: Any, daemon: bool) -> None:
    repo: Repo = make_repo(daemon=daemon)
    repo.env["CLAUDE_CODE_MAX_RETRIES"] = "0"
    for status in (500, 529):
        failed = claude(repo, "build", [{"tools": [bash(f"echo {status} > s{status}.txt")]},
                                        {"fail": status}])
        assert failed.returncode in (0, 1), failed.stderr[-2000:]
        assert not failed.hook_failures(), failed.hook_failures()
        ledger = _ledger(repo)
        assert all(e["status"] == "succeeded" for e in ledger.values()), ledger
        resumed = claude(repo, "go on", [{"tools": [bash(f"echo again > r{status}.txt")]},
                                         {"text": "done"}], "--resume", failed.session_id)
        _clean(repo, resumed)
        assert all(e["status"] == "succeeded" for e in _ledger(repo).values())
        owners = {d["path"]: d["owner"] for d in repo.gg_json("status")["dirty"]}
        assert owners[f"s{status}.txt"] != "user" and owners[f"r{status}.txt"] != "user"


def test_a_delegation_launched_again_after_resume_is_no_replay(make_repo: Any) -> None:
    repo: Repo = make_repo(daemon=True)
    sub = [{"tools": [bash("echo counted > count.txt")]}, {"text": "counted"}]
    first = claude(repo, "count", [{"tools": [_agent(sub, False)]}, {"text": "done"}])
    _clean(repo, first)
    again = claude(repo, "count again", [{"tools": [_agent(sub, False)]}, {"text": "done"}],
                   "--resume", first.session_id)
    _clean(repo, again)
    refused = [r for r in again.tool_results() if "gitguard:" in str(r.get("content"))]
    assert refused == [], refused
    agents = [e for e in repo.ledger() if e["toolName"] == "Agent"]
    assert len(agents) == 2 and all(e["status"] == "succeeded" for e in agents), agents


def test_a_session_that_cds_into_another_worktree_guards_it_there(make_repo: Any) -> None:
    """`claude --add-dir ../wt`, then `cd ../wt`: later calls act in the other worktree,
    so they are ledgered there (CLAUDE_PROJECT_DIR stays the first one) and rollback there
    undoes them."""
    import subprocess

    repo: Repo = make_repo(daemon=True)
    other = repo.root.parent / "wt"
    subprocess.run(["git", "worktree", "add", "-q", str(other), "-b", "side"], cwd=repo.root,
                   env=repo.env, check=True)
    from e2e.harness import VENV_BIN

    subprocess.run([str(VENV_BIN / "gitguard"), "init", "--no-daemon"], cwd=other,
                   env=repo.env, check=True, capture_output=True)
    run = claude(repo, "work over there", [
        {"tools": [bash(f"cd {other}")]},
        {"tools": [bash("echo there > there.txt")]},
        {"tools": [_write(repo, "here.txt", "here\n")]},
        {"text": "done"}], "--add-dir", str(other))
    _clean(repo, run)
    assert (other / "there.txt").read_text() == "there\n"
    here = {e["summary"] for e in repo.ledger()}
    wt = subprocess.run([str(VENV_BIN / "gitguard"), "ledger", "--json"], cwd=other,
                        env=repo.env, check=True, capture_output=True, text=True)
    there = {e["callId"]: e for e in json.loads(wt.stdout)}
    assert "echo there > there.txt" in {e["summary"] for e in there.values()}, there
    assert "echo there > there.txt" not in here, here
    [call] = [e for e in there.values() if e["summary"] == "echo there > there.txt"]
    assert [p["path"] for p in call["filePatches"]] == ["there.txt"], call
    # CwdChanged went where the session arrived: the move is in its lineage there, and
    # the session is shown as one from either worktree.
    listed = subprocess.run([str(VENV_BIN / "gitguard"), "session", "list", "--json"],
                            cwd=other, env=repo.env, check=True, capture_output=True, text=True)
    [session] = json.loads(listed.stdout)
    assert [(m["fromDir"], m["toDir"]) for m in session["moves"]] == [
        (str(repo.root), str(other))], session
    across = repo.gg_json("ledger", "--session", run.session_id)
    assert {(e["summary"], e["worktree"]) for e in across} == {
        *((s, str(repo.root)) for s in here), *((e["summary"], str(other))
                                                for e in there.values())}, across
