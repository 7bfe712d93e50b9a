"""The real Codex CLI (0.171) with a subagent: `spawn_agent`, `wait_agent` and `close_agent`
(model `gpt-5-codex`, whose tools include the `multi_agent_v1` namespace), the user
editing while the subagent works, then `rollback-files` and `conflicts resolve --merge`
(issue 29, item 7).

The subagent answers its own requests from the script in its prompt; the parent's
`wait_agent` and `close_agent` name the agent id `spawn_agent` returned (`$result[0]`).
The subagent patches through the shell (`apply_patch <<'EOF'`, which Codex runs itself
and sends no PostToolUse for) and runs a shell command. The user edits the shared file
before the subagent's patch, an unrelated file and a new one while the subagent works
(the patch done, no hook event since), and the shared file again once Codex is done.
"""

from __future__ import annotations

import json
from typing import Any

from e2e.harness import Repo, Run, codex_argv, codex_model, script_prompt, start

SHARED = ('# shared module\n'
          'def main():\n'
          '    return 1\n'
          '\n'
          '\n'
          'def helper():\n'
          '    return "h"\n')
USER_FIRST = SHARED.replace("# shared module\n", "# shared module, the user's header\n")
PATCH = ("*** Begin Patch\n*** Update File: shared.py\n@@ def main():\n-    return 1\n"
         "+    return 2\n*** End Patch\n")
AGENT = USER_FIRST.replace("    return 1\n", "    return 2\n")
USER_AFTER = AGENT.replace('    return "h"\n', '    return "the user\'s h"\n')
MERGED = USER_FIRST.replace('    return "h"\n', '    return "the user\'s h"\n')
NOTES = "# Notes\n\nfirst line\n"
USER_LINE = "the user's line, written while the subagent worked\n"
FILES = {"shared.py": SHARED, "NOTES.md": NOTES, "log.txt": "log\n", "README.md": "demo\n"}
DELEGATIONS = {"spawn_agent", "multi_agent_v1wait_agent", "multi_agent_v1close_agent"}


def _multi(name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "namespace": "multi_agent_v1", "input": tool_input}


def _exec(cmd: str) -> dict[str, Any]:
    return {"name": "exec_command", "input": {"cmd": cmd}}


def _ledger(repo: Repo) -> dict[str, dict[str, Any]]:
    return {e["callId"]: e for e in repo.ledger()}


def test_a_codex_subagent_while_the_user_edits_then_rollback_and_merge(
        make_repo: Any, daemon: bool) -> None:
    repo: Repo = make_repo(daemon=daemon, agents=("codex",), files=FILES)
    codex_model(repo, "gpt-5-codex")
    sub = [{"pause": "before-patch",
            "tools": [_exec(f"apply_patch <<'EOF'\n{PATCH}EOF\n")]},
           {"pause": "after-patch",
            "tools": [_exec("echo from the subagent > sub.txt && echo appended >> log.txt")]},
           {"text": "sub done"}]
    spawned = "$result[0].agent_id"
    live = start(repo, codex_argv(script_prompt("delegate", [
        {"tools": [_multi("spawn_agent", {"message": script_prompt("Do the work.", sub)})]},
        {"tools": [_multi("wait_agent", {"targets": [spawned], "timeout_ms": 120000})]},
        {"tools": [_multi("close_agent", {"target": spawned})]},
        {"text": "main done"}])))
    # The user edits the shared file before the subagent's patch ...
    repo.server.wait_paused("before-patch")
    repo.write("shared.py", USER_FIRST)
    repo.server.release("before-patch")
    # ... and, once it is patched (no hook event since), an unrelated file and a new one.
    repo.server.wait_paused("after-patch")
    assert repo.read("shared.py") == AGENT
    repo.write("NOTES.md", NOTES + USER_LINE)
    repo.write("mine.txt", USER_LINE)
    repo.server.release("after-patch")
    run: Run = live.finish(timeout=240)
    assert run.returncode == 0, (run.returncode, run.stderr[-3000:])
    assert repo.hook_errors() == ""
    assert "hook failed" not in run.stderr
    assert repo.read("sub.txt") == "from the subagent\n"
    # And once Codex is done, the shared file again, further down.
    repo.write("shared.py", USER_AFTER)

    ledger = _ledger(repo)
    assert all(e["status"] == "succeeded" for e in ledger.values()), "\n".join(
        f"{e['toolName']} {e['status']} {e['note']}" for e in ledger.values())
    delegations = [e for e in ledger.values() if e["toolName"] in DELEGATIONS]
    assert sorted(e["toolName"] for e in delegations) == sorted(DELEGATIONS), ledger
    assert all(e["filePatches"] == [] and e["agentId"] is None for e in delegations)
    subs = [e for e in ledger.values() if e["agentId"]]
    assert len(subs) == 2 and {e["agentType"] for e in subs} == {"default"}, subs
    assert set(ledger) == {e["callId"] for e in delegations + subs}, ledger
    [agent_id] = {e["agentId"] for e in subs}
    # the parent waited on the agent spawn_agent made, and got its final message
    waits = [json.loads(i["arguments"]) for r in repo.server.requests if r.reply
             for i in r.reply["output"] if i.get("name") == "wait_agent"]
    assert waits == [{"targets": [agent_id], "timeout_ms": 120000}], waits
    outputs = [i["output"] for r in repo.server.model_requests() for i in r.body["input"]
               if i.get("type") == "function_call_output"
               and i.get("call_id") in {e["callId"] for e in delegations}]
    assert any('"completed":"sub done"' in str(o) for o in outputs), outputs
    patch_call, shell_call = sorted(subs, key=lambda e: e["startedAt"])
    assert patch_call["declaredWrites"] == ["shared.py"], patch_call
    assert [p["path"] for p in patch_call["filePatches"]] == ["shared.py"], patch_call
    assert sorted(p["path"] for p in shell_call["filePatches"]) == ["log.txt", "sub.txt"]
    sessions = repo.gg_json("session", "list")
    [listed] = [a for s in sessions for a in s.get("subagents", [])]
    assert listed["agentId"] == agent_id and listed["endedAt"] is not None, sessions

    owners = {d["path"]: (d["owner"], d["confidence"]) for d in repo.gg_json("status")["dirty"]}
    assert owners["NOTES.md"][0] == "user" and owners["mine.txt"][0] == "user", owners
    assert owners["shared.py"][0] == "user", owners
    assert owners["sub.txt"][0] == shell_call["callId"], owners
    assert owners["log.txt"][0] == shell_call["callId"], owners

    first = repo.gg_json("checkpoints")[0]["checkpointId"]
    done = repo.gitguard("rollback-files", "--to", first, "--json", check=False)
    assert done.returncode == 5, (done.returncode, done.stdout, done.stderr)
    result = json.loads(done.stdout)
    assert [c["path"] for c in result["conflicts"]] == ["shared.py"], result
    assert result["deleted"] == ["sub.txt"], result
    assert not (repo.root / "sub.txt").exists()
    assert repo.read("log.txt") == "log\n", "the subagent's append undone"
    assert repo.read("NOTES.md") == NOTES + USER_LINE, "the user's unrelated edit kept"
    assert repo.read("mine.txt") == USER_LINE
    assert repo.read("shared.py") == USER_AFTER, "a conflict is left as it is"

    merged = repo.gitguard("conflicts", "resolve", "shared.py", "--merge", check=False)
    assert merged.returncode == 0, (merged.stdout, merged.stderr)
    # every line the user wrote, before and after the subagent's patch; none of the agent's
    assert repo.read("shared.py") == MERGED
    assert [c for c in repo.gg_json("conflicts") if c.get("resolution") == "pending"] == []
