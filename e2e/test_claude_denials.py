"""Calls Claude Code announces (PreToolUse) and then never runs: a permission rule's deny
and `-p`'s "you haven't granted it yet" (the user not saying yes). They own nothing: they
end `failed`, are not in "Do not repeat", and the user's edits made while they were
pending survive rollback."""

from __future__ import annotations

from typing import Any

from e2e.harness import Repo, bash, claude_start


def test_denied_calls_never_ran_and_own_none_of_the_users_edits(make_repo: Any,
                                                                 daemon: bool) -> None:
    repo: Repo = make_repo(daemon=daemon)
    outside = repo.home / "outside.txt"      # outside the project: -p cannot grant it
    script = [
        {"tools": [{"name": "Write", "input": {"file_path": str(repo.root / "agent.txt"),
                                               "content": "the agent's file\n"}}]},
        {"tools": [bash("rm NOTES.md")]},
        {"pause": "after-rm",
         "tools": [{"name": "Write", "input": {"file_path": str(outside),
                                               "content": "outside\n"}}]},
        {"pause": "after-write", "text": "stopped"},
    ]
    live = claude_start(repo, "tidy up", script, "--disallowedTools", "Bash(rm:*)")
    repo.server.wait_paused("after-rm")
    repo.write("NOTES.md", repo.read("NOTES.md") + "the user's line while rm was pending\n")
    repo.write("app.py", repo.read("app.py") + "# the user's comment\n")
    repo.server.release("after-rm")
    repo.server.wait_paused("after-write")
    repo.write("README.md", "the user's readme while the write was pending\n")
    repo.write("user.txt", "the user's new file\n")
    repo.server.release("after-write")
    run = live.finish()
    assert run.returncode == 0, run.stderr[-3000:]
    assert not run.hook_failures(), run.hook_failures()
    assert repo.hook_errors() == ""

    write_id, rm_id, outside_id = repo.server.tool_ids()
    results = {r["tool_use_id"]: r for r in run.tool_results()}
    assert results[rm_id]["is_error"] and results[outside_id]["is_error"], results
    assert (repo.root / "NOTES.md").exists() and not outside.exists()

    ledger = {e["callId"]: e for e in repo.ledger()}
    assert ledger[write_id]["status"] == "succeeded"
    for never_ran in (rm_id, outside_id):
        assert ledger[never_ran]["status"] == "failed", ledger[never_ran]
    resume = repo.gg_json("resume")
    note = str(resume.get("recoveryNote") or "")
    listed = str(resume["doNotRepeat"]) + "".join(
        line for line in note.splitlines() if line.startswith("Do not repeat"))
    assert rm_id not in listed and outside_id not in listed, resume

    dirty = {d["path"]: d for d in repo.gg_json("status")["dirty"]}
    for rel in ("NOTES.md", "app.py", "README.md", "user.txt"):
        assert dirty[rel]["owner"] == "user", dirty

    first = repo.gg_json("checkpoints")[0]["checkpointId"]
    proc = repo.gitguard("rollback-files", "--to", first, "--json", check=False)
    assert proc.returncode in (0, 5), (proc.returncode, proc.stdout, proc.stderr)
    assert not (repo.root / "agent.txt").exists(), "the agent's file is rolled back"
    assert "the user's line while rm was pending" in repo.read("NOTES.md")
    assert "# the user's comment" in repo.read("app.py")
    assert repo.read("README.md") == "the user's readme while the write was pending\n"
    assert repo.read("user.txt") == "the user's new file\n"
