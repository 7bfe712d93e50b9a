"""The real Codex CLI (`codex exec --json`) against the scripted Responses API: with the
project's hooks trusted (`--dangerously-bypass-hook-trust`), and before they are."""

from __future__ import annotations

from typing import Any

from e2e.harness import Repo, Run, codex, publish_command

PATCH = ("*** Begin Patch\n*** Add File: hello.txt\n+hello\n*** Update File: app.py\n@@\n"
         "-    return 1\n+    return 3\n*** End Patch\n")


def _exec(cmd: str) -> dict[str, Any]:
    return {"name": "exec_command", "input": {"cmd": cmd}}


def _commands(run: Run) -> list[dict[str, Any]]:
    return [e["item"] for e in run.events if e.get("type") == "item.completed"
            and e["item"].get("type") == "command_execution"]


def _clean(repo: Repo, run: Run) -> None:
    assert run.returncode == 0, (run.returncode, run.stderr[-3000:])
    assert repo.hook_errors() == ""
    assert "hook failed" not in run.stderr


def test_codex_failures_patches_and_a_publish_that_must_not_run_twice(make_repo: Any) -> None:
    repo: Repo = make_repo(daemon=True, agents=("codex",))
    publish = publish_command(repo.server)
    script = [
        {"tools": [_exec(publish)]},
        {"tools": [_exec("ls no-such-file")]},
        {"tools": [{"name": "apply_patch", "input": PATCH, "custom": True}]},
        {"tools": [_exec(publish)]},
        {"text": "done"},
    ]
    first = codex(repo, "publish, look, patch, publish", script)
    _clean(repo, first)
    publish_id, failing_id, patch_id, repeat_id = repo.server.tool_ids()

    # hooks fired: every call that ran is ledgered under Codex's call_id
    ledger = {e["callId"]: e for e in repo.ledger()}
    assert {publish_id, failing_id, patch_id} <= set(ledger), ledger.keys()
    assert ledger[publish_id]["status"] == "succeeded"
    # the failing command: Codex's exit code 2 is a failure in the ledger
    [failed_cmd] = [c for c in _commands(first) if "no-such-file" in c["command"]]
    assert failed_cmd["exit_code"] != 0
    assert ledger[failing_id]["status"] == "failed", ledger[failing_id]
    # apply_patch declares the paths its patch names
    assert sorted(ledger[patch_id]["declaredWrites"]) == ["app.py", "hello.txt"]
    # the repeated publish was blocked in the run, and the model was told why
    assert repeat_id not in ledger or ledger[repeat_id]["status"] != "succeeded"
    outputs = [i for i in repo.server.model_requests()[-1].body["input"]
               if i.get("type") == "function_call_output" and i.get("call_id") == repeat_id]
    assert outputs and "gitguard" in str(outputs[0]["output"]), outputs
    assert repo.server.count("publish") == 1

    # exec resume: the recovery note reaches the model, the publish stays blocked
    seen = len(repo.server.requests)
    thread = first.session_id
    resumed = codex(repo, "publish again", [{"tools": [_exec(publish)]}, {"text": "ok"}],
                    resume=thread)
    _clean(repo, resumed)
    after = [r for r in repo.server.model_requests() if repo.server.requests.index(r) >= seen]
    assert after, "the resumed run asked the model nothing"
    first_request = str(after[0].body["input"])
    assert "Do not repeat" in first_request and publish_id in first_request, first_request[-3000:]
    [resumed_id] = repo.server.tool_ids()[4:]
    outputs = [i for i in after[-1].body["input"]
               if i.get("type") == "function_call_output" and i.get("call_id") == resumed_id]
    assert outputs and "must not run twice" in str(outputs[0]["output"]), outputs
    assert repo.server.count("publish") == 1


def test_untrusted_hooks_never_reach_gitguard_and_status_says_so(make_repo: Any) -> None:
    """Codex runs a project's hooks only once the user trusts them in `/hooks`. Until then
    gitguard records nothing of Codex's calls, and `gitguard status` says so with the way
    out, instead of looking like a guarded session."""
    repo: Repo = make_repo(daemon=False, agents=("codex",))
    run = codex(repo, "write a file", [{"tools": [_exec("echo hi > untrusted.txt")]},
                                        {"text": "done"}], trust_hooks=False)
    assert run.returncode == 0, (run.returncode, run.stderr[-3000:])
    assert repo.read("untrusted.txt") == "hi\n", "the command ran"
    assert repo.ledger() == []
    [codex_agent] = [a for a in repo.gg_json("status")["agents"] if a["agent"] == "codex"]
    assert codex_agent["reached"] is False
    status = repo.gitguard("status").stdout
    assert "agent codex: integrated" in status and "/hooks" in status, status


def test_three_parallel_calls_each_own_their_own_file(make_repo: Any, daemon: bool) -> None:
    """Codex runs a response's parallel calls at once (three PreToolUse before any
    PostToolUse): each call owns its own file, none holds another's in its patches, and
    rollback undoes all three without a conflict."""
    repo: Repo = make_repo(daemon=daemon, agents=("codex",))
    run = codex(repo, "three at once", [
        {"tools": [_exec(f"sleep 1; echo {i} > par{i}.txt") for i in (1, 2, 3)]},
        {"text": "done"}])
    _clean(repo, run)
    ids = repo.server.tool_ids()
    ledger = {e["callId"]: e for e in repo.ledger()}
    assert set(ids) <= set(ledger) and all(ledger[i]["status"] == "succeeded" for i in ids)
    for i, call in enumerate(ids, 1):
        assert [p["path"] for p in ledger[call]["filePatches"]] == [f"par{i}.txt"], ledger[call]
    owners = {d["path"]: d["owner"] for d in repo.gg_json("status")["dirty"]}
    assert [owners[f"par{i}.txt"] for i in (1, 2, 3)] == ids, owners
    first = repo.gg_json("checkpoints")[0]["checkpointId"]
    done = repo.gg_json("rollback-files", "--to", first)
    assert sorted(done["deleted"]) == ["par1.txt", "par2.txt", "par3.txt"], done
    assert done["conflicts"] == [], done


def test_an_interrupt_settles_the_running_command_and_exec_resume_goes_on(
        make_repo: Any) -> None:
    """Ctrl-C while a command runs fires only Interrupt and SessionEnd: the call is settled
    (uncertain: it may have done part of its work), not left started until Codex runs
    again; `exec resume` then works on."""
    import os
    import signal
    import time

    from e2e.harness import codex_argv, script_prompt, start

    repo: Repo = make_repo(daemon=True, agents=("codex",))
    live = start(repo, codex_argv(script_prompt("wait", [
        {"tools": [_exec("sleep 60")]}, {"text": "slept"}])))
    deadline = time.monotonic() + 120
    while not [e for e in repo.ledger() if e["status"] == "started"]:
        assert time.monotonic() < deadline and live.proc.poll() is None, "the call never began"
        time.sleep(0.1)
    os.killpg(live.proc.pid, signal.SIGINT)
    live.finish(timeout=60)
    [call] = repo.ledger()
    assert call["status"] == "uncertain", call
    thread = next(e["thread_id"] for e in live.run.events if e.get("type") == "thread.started")
    resumed = codex(repo, "go on", [{"tools": [_exec("echo on > on.txt")]}, {"text": "ok"}],
                    resume=thread)
    _clean(repo, resumed)
    assert {e["status"] for e in repo.ledger()} == {"uncertain", "succeeded"}
