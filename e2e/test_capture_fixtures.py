"""The hook payloads in fixtures/ are what the real CLIs send.

Every `make e2e` runs a scripted Claude Code session (startup, tools, a failure, Stop,
SessionEnd, `--resume`, `/compact`, a `cd` into another worktree) and a Codex one
(`exec`, `exec resume`) with capture_hook.py in front of gitguard's hook, then checks
that each fixture has every field the real payload has (values may differ: the unit
tests edit them). With `GITGUARD_E2E_CAPTURE=1` it rewrites fixtures/claude_code and
fixtures/codex from the capture, and fixtures/captured_fields.json (every field each real
payload had: what tests/integrations/test_fixture_fields.py holds the fixtures to).
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

from e2e import harness
from e2e.modelserver import Server

FIXTURES = harness.ROOT / "fixtures"
CLAUDE_SESSION = "3f6c1a52-9b8e-4d47-a1d2-6e0c9f4b7a15"   # the id the fixtures always had
CODEX_SESSION = "0199a3c2-7d41-7b10-9e5f-2b8c4d6e1a37"
CODEX_AGENT = "0199a3c2-8e52-7c21-af30-3c9d5e7f2b48"     # the subagent's thread id, likewise
FAKE_NPM = """#!/bin/sh
# A stand-in registry client: the captured payloads show a publish and a failing test run.
case "$1" in
  publish) echo "+ demo-package@1.0.1"
           echo "npm notice Publishing to https://registry.npmjs.org/" >&2 ;;
  test) echo "npm ERR! 2 tests failed" >&2; exit 1 ;;
esac
"""
# Hand-written, not captured: Claude Code 2.1.332 never fired PermissionDenied in any mode
# the suite can drive (rule deny, -p's ungranted write, acceptEdits), nor is the denied
# transcript one the scripted model can produce.
NOT_CAPTURED = {"claude_code/permission_denied.json", "claude_code/transcript_denied.jsonl"}


def _fake_npm(repo: harness.Repo) -> None:
    bin_dir = repo.home / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "npm").write_text(FAKE_NPM)
    (bin_dir / "npm").chmod(0o755)
    repo.env["PATH"] = f"{bin_dir}{os.pathsep}{repo.env['PATH']}"
    # Codex runs commands in a login shell (`bash -lc`), which sets PATH afresh
    (repo.home / ".profile").write_text(f'export PATH="{bin_dir}:$PATH"\n')


def _tool(name: str, tool_id: str, tool_input: Any, **more: Any) -> dict[str, Any]:
    return {"tools": [{"name": name, "id": tool_id, "input": tool_input, **more}]}


def _claude_capture(tmp: Path, capture: Path) -> None:
    with Server() as server:
        repo = harness.make_repo(tmp, server, daemon=False, capture=capture, files={
            "README.md": "# project\n", "src/app.py": "def main():\n    return 1\n"})
        _fake_npm(repo)
        app = str(repo.root / "src" / "app.py")
        script = [
            _tool("Read", "toolu_01ReadAppPy4mZ8", {"file_path": app}),
            _tool("Edit", "toolu_01EditAppPy9fQ2", {"file_path": app, "old_string": "    return 1",
                                                     "new_string": "    return 2",
                                                     "replace_all": False}),
            _tool("Write", "toolu_01WriteNewPy7kX", {"file_path": str(repo.root / "src/new.py"),
                                                      "content": "print('new')\n"}),
            _tool("Bash", "toolu_01NpmPublish3Rt", {
                "command": "npm publish",
                "description": "Publish the package to the npm registry"}),
            _tool("Bash", "toolu_01NpmTest5Hw", {"command": "npm test",
                                                  "description": "Run the test suite"}),
            _tool("Agent", "toolu_01AgentHelp2Kd", {
                "description": "Count the sources", "subagent_type": "general-purpose",
                "run_in_background": False, "prompt": "Count them.\ngg-script: " + json.dumps([
                    _tool("Bash", "toolu_01SubCount8Jw", {"command": "ls src | wc -l",
                                                           "description": "Count"}),
                    {"text": "2 files"}])}),
            {"text": "Published demo-package 1.0.1; the tests fail."},
        ]
        first = harness.claude(repo, "publish the package", script,
                               "--session-id", CLAUDE_SESSION)
        assert first.returncode == 0, first.stderr[-3000:]
        resumed = harness.claude(repo, "what is left?", [{"text": "nothing"}],
                                 "--resume", CLAUDE_SESSION)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        compact = harness.run_claude(repo, ["-p", "/compact", "--resume", CLAUDE_SESSION])
        assert compact.returncode == 0, compact.stderr[-3000:]
        # The model API failing for good: StopFailure. A session that goes on after it (a
        # -p run exits at once, and the CLI does not wait for a slow StopFailure hook).
        repo.env["CLAUDE_CODE_MAX_RETRIES"] = "0"
        failed = harness.claude_turns(repo, [("build it", [{"fail": 500}]),
                                             ("again", [{"text": "done"}])],
                                      lambda _turn: None, "--resume", CLAUDE_SESSION)
        # `cd` into another worktree of the project: CwdChanged (old_cwd, new_cwd). The
        # worktree lies in HOME, so the capture names it /home/user/wt.
        other = repo.home / "wt"
        harness.git(repo.root, "worktree", "add", "-q", str(other), "-b", "side",
                    env=repo.env)
        moved = harness.claude(repo, "work over there", [
            _tool("Bash", "toolu_01CdOtherWt6Np", {"command": f"cd {other}",
                                                     "description": "Enter the worktree"}),
            {"text": "moved"}], "--add-dir", str(other))
        assert moved.returncode == 0, moved.stderr[-3000:]
        for run in (first, resumed, compact, failed, moved):   # gitguard answered too
            assert not run.hook_failures(), run.hook_failures()
        assert repo.hook_errors() == ""


def _codex_capture(tmp: Path, capture: Path) -> None:
    with Server() as server:
        repo = harness.make_repo(tmp, server, daemon=False, agents=("codex",), capture=capture,
                                 files={"README.md": "# project\n",
                                        "src/app.py": "def main():\n    return 1\n"})
        _fake_npm(repo)
        patch = ("*** Begin Patch\n*** Update File: src/app.py\n@@\n-    return 1\n"
                 "+    return 2\n*** End Patch\n")
        script = [
            _tool("exec_command", "call_Yh2kQ8vN1pZ4", {"cmd": "npm publish"}),
            _tool("exec_command", "call_Tq7NpmTest2Lm", {"cmd": "npm test"}),
            _tool("apply_patch", "call_Pa4tchAppPy9x", patch, custom=True),
            {"text": "Published; the tests fail; app.py patched."},
        ]
        first = harness.codex(repo, "publish the package", script)
        assert first.returncode == 0, first.stderr[-3000:]
        resumed = harness.codex(repo, "what is left?", [{"text": "nothing"}],
                                resume=first.session_id)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        _codex_subagent_capture(repo)
        # Ctrl-C while a command runs: SIGINT to the CLI's process group, as a terminal sends.
        raw = capture / "codex" / "raw"
        live = harness.start(repo, harness.codex_argv(harness.script_prompt("wait", [
            _tool("exec_command", "call_Sl33pL0ng7Qx", {"cmd": "sleep 30"}),
            {"text": "slept"}])))
        deadline = time.monotonic() + 120
        while not any(p.name.endswith("PreToolUse-Bash.json") and "call_Sl33pL0ng7Qx"
                      in p.read_text() for p in raw.glob("*.json")):
            assert time.monotonic() < deadline and live.proc.poll() is None, "no PreToolUse"
            time.sleep(0.1)
        os.killpg(live.proc.pid, signal.SIGINT)
        live.finish(timeout=60)
        assert repo.hook_errors() == ""


def _codex_subagent_capture(repo: harness.Repo) -> None:
    """A subagent (gpt-5-codex's multi_agent_v1 tools): spawn_agent, wait_agent on the id
    it returned, close_agent; the subagent patches through the shell (Codex sends no
    PostToolUse for that) and runs a command."""
    config = repo.home / ".codex" / "config.toml"
    before = config.read_text()
    harness.codex_model(repo, "gpt-5-codex")
    patch = ("*** Begin Patch\n*** Update File: src/app.py\n@@\n-    return 2\n"
             "+    return 3\n*** End Patch\n")
    shell_patch = {"cmd": f"apply_patch <<'EOF'\n{patch}EOF\n"}
    sub = [_tool("exec_command", "call_SubPa7chSh3ll", shell_patch),
           _tool("exec_command", "call_SubEch0Cmd4Vq", {"cmd": "echo counted > count.txt"}),
           {"text": "patched and counted"}]
    agent = "$result[0].agent_id"
    multi = {"namespace": "multi_agent_v1"}
    run = harness.codex(repo, "delegate", [
        _tool("spawn_agent", "call_Sp4wnAgent7Kq",
              {"message": harness.script_prompt("Patch and count.", sub)}, **multi),
        _tool("wait_agent", "call_Wa1tAgent3Mzx", {"targets": [agent], "timeout_ms": 60000},
              **multi),
        _tool("close_agent", "call_Cl0seAgent5Np", {"target": agent}, **multi),
        {"text": "delegated"}])
    assert run.returncode == 0, run.stderr[-3000:]
    config.write_text(before)


def _raw(capture: Path, agent: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((capture / agent / "raw").glob("*.json"))]


def _pick(payloads: list[dict[str, Any]], event: str, **match: Any) -> dict[str, Any]:
    for payload in payloads:
        if payload.get("hook_event_name") != event:
            continue
        if all(_get(payload, k) == v for k, v in match.items()):
            return payload
    raise AssertionError(f"no {event} {match} captured: "
                         f"{[(p.get('hook_event_name'), p.get('tool_name')) for p in payloads]}")


def _get(payload: dict[str, Any], dotted: str) -> Any:
    value: Any = payload
    for part in dotted.split("__"):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def claude_fixtures(payloads: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        "session_start_startup": _pick(payloads, "SessionStart", source="startup"),
        "session_start_resume": _pick(payloads, "SessionStart", source="resume"),
        "session_start_compact": _pick(payloads, "SessionStart", source="compact"),
        "user_prompt_submit": _pick(payloads, "UserPromptSubmit"),
        "pre_tool_use_read": _pick(payloads, "PreToolUse", tool_name="Read"),
        "post_tool_use_read": _pick(payloads, "PostToolUse", tool_name="Read"),
        "pre_tool_use_edit": _pick(payloads, "PreToolUse", tool_name="Edit"),
        "post_tool_use_edit": _pick(payloads, "PostToolUse", tool_name="Edit"),
        "pre_tool_use_write": _pick(payloads, "PreToolUse", tool_name="Write"),
        "post_tool_use_write": _pick(payloads, "PostToolUse", tool_name="Write"),
        "pre_tool_use_bash": _pick(payloads, "PreToolUse", tool_input__command="npm publish"),
        "post_tool_use_bash": _pick(payloads, "PostToolUse", tool_input__command="npm publish"),
        "post_tool_use_failure": _pick(payloads, "PostToolUseFailure"),
        "stop": _pick(payloads, "Stop"),
        "session_end": _pick(payloads, "SessionEnd"),
        "pre_tool_use_agent": _pick(payloads, "PreToolUse", tool_name="Agent"),
        "post_tool_use_agent": _pick(payloads, "PostToolUse", tool_name="Agent"),
        "subagent_start": _pick(payloads, "SubagentStart"),
        "pre_tool_use_subagent_bash": _pick(payloads, "PreToolUse",
                                            tool_use_id="toolu_01SubCount8Jw"),
        "subagent_stop": _pick(payloads, "SubagentStop"),
        "post_tool_batch": _pick(payloads, "PostToolBatch"),
        "stop_failure": _pick(payloads, "StopFailure"),
        "cwd_changed": _pick(payloads, "CwdChanged"),
    }


def codex_fixtures(payloads: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        "session_start_startup": _pick(payloads, "SessionStart", source="startup"),
        "session_start_resume": _pick(payloads, "SessionStart", source="resume"),
        "user_prompt_submit": _pick(payloads, "UserPromptSubmit"),
        "pre_tool_use_bash": _pick(payloads, "PreToolUse", tool_use_id="call_Yh2kQ8vN1pZ4"),
        "post_tool_use_bash": _pick(payloads, "PostToolUse", tool_use_id="call_Yh2kQ8vN1pZ4"),
        "post_tool_use_bash_failed": _pick(payloads, "PostToolUse",
                                           tool_use_id="call_Tq7NpmTest2Lm"),
        "pre_tool_use_apply_patch": _pick(payloads, "PreToolUse",
                                          tool_use_id="call_Pa4tchAppPy9x"),
        "post_tool_use_apply_patch": _pick(payloads, "PostToolUse",
                                           tool_use_id="call_Pa4tchAppPy9x"),
        "stop": _pick(payloads, "Stop"),
        "interrupt": _pick(payloads, "Interrupt"),
        "pre_tool_use_spawn_agent": _pick(payloads, "PreToolUse",
                                          tool_use_id="call_Sp4wnAgent7Kq"),
        "post_tool_use_spawn_agent": _pick(payloads, "PostToolUse",
                                           tool_use_id="call_Sp4wnAgent7Kq"),
        "subagent_start": _pick(payloads, "SubagentStart"),
        "user_prompt_submit_subagent": _pick(payloads, "UserPromptSubmit",
                                             agent_type="default"),
        "pre_tool_use_wait_agent": _pick(payloads, "PreToolUse",
                                         tool_use_id="call_Wa1tAgent3Mzx"),
        "post_tool_use_wait_agent": _pick(payloads, "PostToolUse",
                                          tool_use_id="call_Wa1tAgent3Mzx"),
        "pre_tool_use_subagent_shell_patch": _pick(payloads, "PreToolUse",
                                                   tool_use_id="call_SubPa7chSh3ll"),
        "pre_tool_use_subagent_bash": _pick(payloads, "PreToolUse",
                                            tool_use_id="call_SubEch0Cmd4Vq"),
        "post_tool_use_subagent_bash": _pick(payloads, "PostToolUse",
                                             tool_use_id="call_SubEch0Cmd4Vq"),
        "subagent_stop": _pick(payloads, "SubagentStop"),
        "pre_tool_use_close_agent": _pick(payloads, "PreToolUse",
                                          tool_use_id="call_Cl0seAgent5Np"),
        "post_tool_use_close_agent": _pick(payloads, "PostToolUse",
                                           tool_use_id="call_Cl0seAgent5Np"),
    }


def key_paths(value: Any, prefix: str = "") -> set[str]:
    """Every key of a payload, nested ones as `outer.inner` (lists are not descended)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            path = f"{prefix}{key}"
            found.add(path)
            found |= key_paths(inner, path + ".")
    return found


def _stable(agent: str, payload: dict[str, Any], session: str) -> dict[str, Any]:
    """Codex's thread ids are random: the fixtures carry the ids they always had (the
    session's, and a subagent's, which is its `agent_id`)."""
    if agent != "codex":
        return payload
    text = json.dumps(payload).replace(payload["session_id"], session)
    if isinstance(payload.get("agent_id"), str):
        text = text.replace(payload["agent_id"], CODEX_AGENT)
    for key in ("tool_response", "tool_input"):   # wait_agent/close_agent name it too
        found = re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}",
                          json.dumps(payload.get(key)))
        if found and found.group(0) != payload["session_id"] and \
                payload.get("tool_name", "").endswith(("spawn_agent", "wait_agent",
                                                       "close_agent")):
            text = text.replace(found.group(0), CODEX_AGENT)
    return dict(json.loads(text))


def test_the_fixtures_are_what_the_real_clis_send(tmp_path: Path) -> None:
    capture = tmp_path / "capture"
    (tmp_path / "cc").mkdir()
    (tmp_path / "cx").mkdir()
    _claude_capture(tmp_path / "cc", capture)
    _codex_capture(tmp_path / "cx", capture)
    captured = {
        "claude_code": claude_fixtures(_raw(capture, "claude-code")),
        "codex": {n: _stable("codex", p, CODEX_SESSION)
                  for n, p in codex_fixtures(_raw(capture, "codex")).items()},
    }
    for agent, fixtures in captured.items():
        for payload in fixtures.values():
            text = json.dumps(payload)
            assert str(tmp_path) not in text and "/tmp/" not in text, text  # redacted
        if harness.CAPTURE:
            _write(agent, fixtures)
    if harness.CAPTURE:
        fields = {agent: {name: sorted(key_paths(p)) for name, p in sorted(fixtures.items())}
                  for agent, fixtures in captured.items()}
        (FIXTURES / "captured_fields.json").write_text(json.dumps(fields, indent=2) + "\n")
    recorded = json.loads((FIXTURES / "captured_fields.json").read_text())
    missing = {}
    for agent, fixtures in captured.items():
        fields = recorded[agent]
        for name, payload in fixtures.items():
            path = FIXTURES / agent / f"{name}.json"
            assert path.exists(), f"{path} is missing: capture with GITGUARD_E2E_CAPTURE"
            have = key_paths(json.loads(path.read_text()))
            real = key_paths(payload)
            if real - have:
                missing[f"{agent}/{name}"] = sorted(real - have)
            assert set(fields[name]) >= real, (name, sorted(real - set(fields[name])))
    assert not missing, f"the real CLIs send fields the fixtures lack: {missing}"


def _write(agent: str, fixtures: dict[str, dict[str, Any]]) -> None:
    folder = FIXTURES / agent
    for name, payload in fixtures.items():
        (folder / f"{name}.json").write_text(json.dumps(payload, indent=2) + "\n")


def test_redaction_leaves_no_temp_path() -> None:
    sample = {"cwd": "/tmp/pytest-of-root/x/repo", "transcript_path":
              "/tmp/pytest-of-root/x/home/.claude/projects/-tmp-pytest-of-root-x-repo/s.jsonl"}
    from e2e.capture_hook import redact
    out = redact(sample, "/tmp/pytest-of-root/x/repo", "/tmp/pytest-of-root/x/home")
    assert out == {"cwd": "/home/user/project", "transcript_path":
                   "/home/user/.claude/projects/-home-user-project/s.jsonl"}
    assert not re.search(r"/tmp/", json.dumps(out))


# --- the tools lists ------------------------------------------------------------------
# fixtures/*/tools_request.json hold the tools each CLI offers the model, as its requests
# carry them (descriptions trimmed): tests/calls/test_classify.py fails on any of them the
# classifier does not know, so a CLI version with new tools fails loudly.

def _trim(tool: dict[str, Any]) -> dict[str, Any]:
    out = dict(tool)
    if isinstance(out.get("description"), str):
        first = out["description"].strip().split("\n", 1)[0]
        out["description"] = first if len(first) <= 200 else first[:199] + "…"
    if isinstance(out.get("tools"), list):   # a Codex namespace
        out["tools"] = [_trim(t) for t in out["tools"]]
    return out


def _claude_tools(tmp: Path) -> dict[str, Any]:
    """The first request's tools (Claude Code defers some behind ToolSearch), the CLI's own
    list (its `init` event), and the request after ToolSearch loaded every deferred tool."""
    with Server() as server:
        repo = harness.make_repo(tmp, server, daemon=False)
        first = harness.claude(repo, "list the tools", [{"text": "ok"}])
        assert first.returncode == 0, first.stderr[-3000:]
        offered = server.model_requests()[0].body["tools"]
        init = next(e for e in first.events if e.get("subtype") == "init")
        names = {t["name"] for t in offered}
        # Task is the CLI's other name for Agent
        deferred = [n for n in init["tools"] if n not in names and n != "Task"]
        search = {"query": "select:" + ",".join(deferred), "max_results": len(deferred) + 1}
        loaded = harness.claude(repo, "load the deferred tools",
                                [{"tools": [{"name": "ToolSearch", "input": search}]},
                                 {"text": "ok"}])
        assert loaded.returncode == 0, loaded.stderr[-3000:]
        full = server.model_requests()[-1].body["tools"]
        assert set(deferred) <= {t["name"] for t in full}, (deferred, full)
    return {"cli": f"claude-code {init['claude_code_version']}", "cliTools": init["tools"],
            "request": [_trim(t) for t in offered], "loaded": [_trim(t) for t in full]}


# Codex offers other tools per model and feature: gpt-5-codex gets the multi-agent tools
# (the `multi_agent_v1` namespace, or `collaboration` with features.multi_agent_v2).
CODEX_VARIANTS = {"gpt-5.5": ("gpt-5.5", ""), "gpt-5-codex": ("gpt-5-codex", ""),
                  "gpt-5-codex+multi_agent_v2": ("gpt-5-codex",
                                                 "[features]\nmulti_agent_v2 = true\n")}


def _codex_tools(tmp: Path) -> dict[str, Any]:
    requests: dict[str, Any] = {}
    for i, (variant, (model, extra)) in enumerate(CODEX_VARIANTS.items()):
        (tmp / str(i)).mkdir()
        with Server() as server:
            repo = harness.make_repo(tmp / str(i), server, daemon=False, agents=("codex",))
            config = repo.home / ".codex" / "config.toml"
            text = re.sub(r'(?m)^model = ".*"$', f'model = "{model}"', config.read_text())
            config.write_text(text + extra)
            run = harness.codex(repo, "list the tools", [{"text": "ok"}])
            assert run.returncode == 0, run.stderr[-3000:]
            body = server.model_requests()[0].body
            assert body["model"] == model, body["model"]
            requests[variant] = [_trim(t) for t in body["tools"]]
    return {"cli": "codex 0.171.0", "requests": requests}


def tool_names(fixture: dict[str, Any]) -> set[str]:
    """Every tool name a tools fixture holds (a Codex namespace's tools by their own name,
    a hosted tool such as web_search by its type)."""
    lists = [fixture.get("request", []), fixture.get("loaded", []),
             *fixture.get("requests", {}).values()]
    names = set(fixture.get("cliTools", []))
    for tools in lists:
        for tool in tools:
            inner = tool.get("tools") if tool.get("type") == "namespace" else None
            names |= {t["name"] for t in inner} if inner else {tool.get("name") or tool["type"]}
    return names


def test_the_tools_fixtures_are_what_the_real_clis_offer(tmp_path: Path) -> None:
    (tmp_path / "cc").mkdir()
    (tmp_path / "cx").mkdir()
    captured = {"claude_code": _claude_tools(tmp_path / "cc"),
                "codex": _codex_tools(tmp_path / "cx")}
    for agent, fixture in captured.items():
        path = FIXTURES / agent / "tools_request.json"
        text = json.dumps(fixture, indent=2, ensure_ascii=False) + "\n"
        assert str(tmp_path) not in text
        if harness.CAPTURE:
            path.write_text(text)
        assert path.exists(), f"{path} is missing: capture with GITGUARD_E2E_CAPTURE"
        recorded = json.loads(path.read_text())
        assert tool_names(recorded) == tool_names(fixture), (
            f"{agent} offers other tools than {path} holds: capture with "
            f"GITGUARD_E2E_CAPTURE=1 and classify the new ones")
