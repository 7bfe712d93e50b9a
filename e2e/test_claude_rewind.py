"""Claude Code's own undo (issue 30 item 2): a real session whose turn is rewound the way
the CLI records /rewind "restore code and conversation" (`--rewind-files` then
`--resume-session-at`, e2e/claude_rewind.py), then `status`, `explain`, `resume`,
`rollback-files` and the replay guard tell the truth about it."""

from __future__ import annotations

from typing import Any

from e2e import claude_rewind as cr
from e2e.harness import Repo, Run, bash, claude, publish_command


def _clean(repo: Repo, run: Run) -> None:
    assert run.returncode == 0, (run.returncode, run.stderr[-3000:])
    assert not run.hook_failures(), run.hook_failures()
    assert repo.hook_errors() == ""


def _denied(run: Run) -> list[dict[str, Any]]:
    return [r for r in run.tool_results() if "gitguard:" in str(r.get("content"))]


def _calls(repo: Repo) -> dict[str, dict[str, Any]]:
    return {e["callId"]: e for e in repo.ledger()}


def _two_turns(repo: Repo, second: list[dict[str, Any]]) -> tuple[str, list[str]]:
    """Turn 1 edits app.py; turn 2 runs `second`. The session id and turn 2's calls."""
    cr.enable_checkpointing(repo)
    first = claude(repo, "edit app", [
        {"tools": [cr.read(repo, "app.py")]},
        {"tools": [cr.edit(repo, "app.py", "return 1", "return 2")]}, {"text": "done one"}])
    _clean(repo, first)
    sid = first.session_id
    before = set(repo.server.tool_ids())
    turn = claude(repo, "second turn", second, "--resume", sid)
    _clean(repo, turn)
    return sid, [t for t in repo.server.tool_ids() if t not in before]


def test_a_rewound_local_edit_may_be_redone_and_is_not_the_agents_work(
        make_repo: Any, daemon: bool) -> None:
    repo: Repo = make_repo(daemon=daemon)
    # A project that asks before a file is written again: the replay guard would refuse
    # to redo the very Write the user rewound.
    repo.write(".gitguard.toml", '[tools.Write]\nreplayPolicy = "ask"\n')
    if daemon:      # it read the settings when it started
        repo.gitguard("daemon", "stop")
        repo.gitguard("daemon", "start")
    sid, turn2 = _two_turns(repo, [
        {"tools": [cr.write(repo, "new.txt", "hello\n"), cr.read(repo, "NOTES.md")]},
        {"tools": [cr.edit(repo, "NOTES.md", "first line", "second line")]},
        {"text": "done two"}])
    [write_id, read_id, edit_id] = turn2
    prompt = cr.prompts(cr.transcript(repo, sid))[1]
    assert cr.rewind_files(repo, sid, prompt["uuid"]).startswith("Files rewound")
    assert not (repo.root / "new.txt").exists()
    assert "first line" in repo.read("NOTES.md")

    # The conversation goes on from before turn 2: the agent writes new.txt again.
    seen = len(repo.server.tool_ids())
    redo = claude(repo, "write it again", [
        {"tools": [cr.write(repo, "new.txt", "hello\n")]}, {"text": "redone"}],
        "--resume", sid, "--resume-session-at", prompt["parentUuid"])
    _clean(repo, redo)
    assert not _denied(redo), _denied(redo)
    [redo_id] = repo.server.tool_ids()[seen:]
    # It was about to be refused as a repeat of the rewound Write: the hook read the
    # transcript then (the rare path), found the rewind, and let it run.
    trace = (repo.root / ".git" / "gitguard" / "trace.jsonl").read_text()
    assert '"name":"session.rewind"' in trace and "tool.replay_refused" not in trace
    assert repo.read("new.txt") == "hello\n"

    calls = _calls(repo)
    for call_id in turn2:
        assert calls[call_id]["rewoundAt"], calls[call_id]
        assert calls[call_id]["rewoundBy"].startswith(
            f"Claude Code /rewind to before prompt {prompt['uuid'][:8]}")
        assert calls[call_id]["status"] == "succeeded"
    assert calls[write_id]["rewoundFiles"] == "restored"
    assert calls[edit_id]["rewoundFiles"] == "restored"
    assert "rewoundFiles" not in calls[read_id] or calls[read_id]["rewoundFiles"] is None
    assert calls[redo_id].get("rewoundAt") is None

    # status: turn 1's edit and the redo are the agent's work; the rewound edit is not.
    [turn1_edit] = [c for c in calls if calls[c]["toolName"] == "Edit" and c not in turn2]
    dirty = {d["path"]: d["owner"] for d in repo.gg_json("status")["dirty"]
             if d["owner"] != "user"}
    assert dirty == {"app.py": turn1_edit, "new.txt": redo_id}, dirty
    explained = {c["callId"]: c for c in repo.gg_json("explain")["calls"]}
    assert explained[edit_id]["replayable"] is True
    assert "it was rewound" in explained[edit_id]["why"]
    note = repo.gitguard("resume").stdout
    print(f"\n--- recovery note, rewound local edit ({repo.mode}) ---\n{note}")
    assert (f"Tool Edit({edit_id}) `{repo.root}/NOTES.md` was rewound (Claude Code /rewind "
            f"to before prompt {prompt['uuid'][:8]}") in note
    assert "its file changes were undone; it may be run again." in note
    assert edit_id not in note.split("Do not repeat:")[1]

    # rollback-files to before the session undoes turn 1 and the redo, nothing rewound.
    first_ckpt = repo.gg_json("checkpoints")[0]["checkpointId"]
    plan = repo.gitguard("rollback-files", "--to", first_ckpt, "--dry-run").stdout
    print(f"--- rollback-files --dry-run ({repo.mode}) ---\n{plan}")
    assert "conflict" not in plan.lower(), plan
    repo.gitguard("rollback-files", "--to", first_ckpt)
    assert not (repo.root / "new.txt").exists()
    assert "return 1" in repo.read("app.py") and "first line" in repo.read("NOTES.md")


def test_a_rewound_publish_stays_unrepeatable(make_repo: Any, daemon: bool) -> None:
    repo: Repo = make_repo(daemon=daemon)
    publish = publish_command(repo.server)
    sid, turn2 = _two_turns(repo, [
        {"tools": [cr.read(repo, "NOTES.md")]},
        {"tools": [cr.edit(repo, "NOTES.md", "first line", "release notes")]},
        {"tools": [bash(publish)]}, {"text": "published"}])
    [_read_id, edit_id, publish_id] = turn2
    assert repo.server.count("publish") == 1
    prompt = cr.prompts(cr.transcript(repo, sid))[1]
    redo = cr.rewind(repo, sid, prompt, "publish again", [
        {"tools": [bash(publish)]},
        {"if_last_result_contains": "must not run twice",
         "then": {"text": "not publishing twice"}, "else": {"text": "published again"}}])
    _clean(repo, redo)
    [refused] = _denied(redo)
    assert "must not run twice" in str(refused["content"])
    assert repo.server.count("publish") == 1          # the rewind never undid it
    assert "first line" in repo.read("NOTES.md")      # the code was restored

    calls = _calls(repo)
    assert calls[publish_id]["rewoundAt"] and calls[publish_id]["status"] == "succeeded"
    assert calls[edit_id]["rewoundFiles"] == "restored"
    explained = {c["callId"]: c for c in repo.gg_json("explain")["calls"]}
    assert explained[publish_id]["replayable"] is False
    assert "the rewind did not undo its external effect" in explained[publish_id]["why"]
    assert explained[edit_id]["replayable"] is True
    note = repo.gitguard("resume").stdout
    print(f"\n--- recovery note, rewound publish ({repo.mode}) ---\n{note}")
    assert (f"It was rewound in the conversation (Claude Code /rewind to before prompt "
            f"{prompt['uuid'][:8]}") in note
    assert "but the rewind did not undo its external effect: do not repeat it." in note
    assert f"Bash({publish_id})" in note.split("Do not repeat:")[1]
    assert f"Edit({edit_id})" not in note.split("Do not repeat:")[1]
