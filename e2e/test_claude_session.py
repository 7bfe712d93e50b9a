"""One real Claude Code session, two turns, the user editing between them."""

from __future__ import annotations

import json
from typing import Any

from e2e.harness import Repo, bash, claude_turns


def _edit(repo: Repo, rel: str, old: str, new: str) -> dict[str, Any]:
    return {"name": "Edit", "input": {"file_path": str(repo.root / rel), "old_string": old,
                                      "new_string": new, "replace_all": False}}


def _read(repo: Repo, rel: str) -> dict[str, Any]:
    return {"name": "Read", "input": {"file_path": str(repo.root / rel)}}


def _write(repo: Repo, rel: str, text: str) -> dict[str, Any]:
    return {"name": "Write", "input": {"file_path": str(repo.root / rel), "content": text}}


def test_one_session_is_ledgered_under_its_tool_use_ids_and_rollback_keeps_user_edits(
        make_repo: Any, daemon: bool) -> None:
    repo: Repo = make_repo(daemon=daemon)
    first = [
        {"tools": [bash("echo generated > gen.txt")]},
        {"tools": [_read(repo, "app.py")]},
        {"tools": [_edit(repo, "app.py", "    return 1", "    return 2")]},
        {"tools": [_write(repo, "new.py", "print('new')\n")]},
        {"text": "first turn done"},
    ]
    second = [
        {"tools": [_read(repo, "NOTES.md")]},
        {"tools": [_edit(repo, "NOTES.md", "first line", "first line, agent")]},
        {"tools": [bash("echo more >> gen.txt")]},
        {"text": "second turn done"},
    ]

    def user_edits(_turn: int) -> None:
        repo.write("NOTES.md", repo.read("NOTES.md") + "the user's line\n")
        repo.write("user.txt", "the user's file\n")
        dirty = {d["path"]: d for d in repo.gg_json("status")["dirty"]}
        assert dirty["NOTES.md"]["owner"] == "user", dirty
        assert dirty["user.txt"]["owner"] == "user", dirty

    run = claude_turns(repo, [("make the changes", first), ("more changes", second)],
                       user_edits)
    assert run.returncode == 0, run.stderr[-3000:]
    assert not run.hook_failures(), run.hook_failures()
    assert repo.hook_errors() == ""

    # every ledger entry is a real tool_use_id the model sent, and every one is ledgered
    sent = repo.server.tool_ids()
    ledger = {e["callId"]: e for e in repo.ledger()}
    assert len(sent) == 7
    assert set(ledger) == set(sent)
    assert all(e["status"] == "succeeded" for e in ledger.values()), ledger
    assert [r["tool_use_id"] for r in run.tool_results()] == sent

    # the user's edits stay the user's, also after the agent's second turn
    dirty = {d["path"]: d for d in repo.gg_json("status")["dirty"]}
    assert dirty["user.txt"]["owner"] == "user", dirty
    assert dirty["app.py"]["owner"] in sent, dirty
    assert dirty["new.py"]["owner"] in sent, dirty

    checkpoints = repo.gg_json("checkpoints")
    first_ckpt = checkpoints[0]["checkpointId"]
    result = repo.gg_json("rollback-files", "--to", first_ckpt) \
        if _rollback_ok(repo, first_ckpt) else _rollback_with_conflicts(repo, first_ckpt)
    # the agent's edit undone, its new files gone
    assert repo.read("app.py") == "def main():\n    return 1\n"
    assert not (repo.root / "new.py").exists()
    assert not (repo.root / "gen.txt").exists()
    # every user edit kept, or listed as a conflict (never silently reverted)
    assert repo.read("user.txt") == "the user's file\n"
    conflicts = {c["path"] for c in result["conflicts"]}
    assert "the user's line" in repo.read("NOTES.md") or "NOTES.md" in conflicts, result
    if "NOTES.md" in result["restored"]:
        # restored to what the agent found: the user's line, made before its Edit, kept
        assert repo.read("NOTES.md") == "# Notes\n\nfirst line\nthe user's line\n", result


def _rollback_ok(repo: Repo, ckpt: str) -> bool:
    plan = repo.gitguard("rollback-files", "--to", ckpt, "--dry-run", "--json", check=False)
    return plan.returncode == 0 and not json.loads(plan.stdout).get("conflicts")


def _rollback_with_conflicts(repo: Repo, ckpt: str) -> Any:
    proc = repo.gitguard("rollback-files", "--to", ckpt, "--json", check=False)
    assert proc.returncode == 5, (proc.returncode, proc.stdout, proc.stderr)
    return json.loads(proc.stdout)
