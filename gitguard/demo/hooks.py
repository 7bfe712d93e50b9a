"""Demo chapter: a Claude-Code-shaped agent session driven through the hook adapter, then the
git hooks in a clone (so the demo repository's own HEAD and branches stay as they are)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitguard.api import Guard
from gitguard.integrations import claude_code, dangling, hook_install
from gitguard.ledger import git_moves

Echo = Callable[[str], None]
SESSION = "5b7e2c90-1f4d-4a8e-9c3b-7d6a2e1f0b84"


def _event(repo: Path, transcript: Path, name: str, **fields: Any) -> dict[str, Any]:
    return {"session_id": SESSION, "transcript_path": str(transcript), "cwd": str(repo),
            "permission_mode": "default", "hook_event_name": name, **fields}


def _tool(repo: Path, transcript: Path, name: str, call: str, tool: str,
          tool_input: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return _event(repo, transcript, name, tool_name=tool, tool_input=tool_input,
                  tool_use_id=call, **fields)


def _answer(echo: Echo, what: str, answer: dict[str, Any]) -> None:
    out = answer.get("hookSpecificOutput", {})
    decision = out.get("permissionDecision")
    said = f"{decision}: {out.get('permissionDecisionReason')}" if decision else \
        "no objection (Claude Code's own permission rules decide)"
    echo(f"  {what:<34} -> {said}")


def chapter_hooks(echo: Echo, repo: Path, guard: Guard) -> None:
    echo("== Claude Code hooks: every tool call ledgered, a second `npm publish` denied ==")
    transcript = repo.parent / "transcript.jsonl"
    transcript.write_text(json.dumps({"type": "user", "message": "add farewell(), publish"})
                          + "\n")

    def send(event: dict[str, Any]) -> dict[str, Any]:
        return claude_code.handle(guard, event)  # what `gitguard hook claude-code` prints

    send(_event(repo, transcript, "SessionStart", source="startup"))
    send(_event(repo, transcript, "UserPromptSubmit", prompt="add farewell(), then publish"))
    write = {"file_path": str(repo / "farewell.py"),
             "content": "def farewell(name):\n    return 'bye ' + name\n"}
    _answer(echo, "PreToolUse Write farewell.py",
            send(_tool(repo, transcript, "PreToolUse", "toolu_demo_1", "Write", write)))
    (repo / "farewell.py").write_text(write["content"])
    send(_tool(repo, transcript, "PostToolUse", "toolu_demo_1", "Write", write,
               tool_response={"type": "create", "filePath": write["file_path"]}))
    publish = {"command": "npm publish", "description": "Publish the package"}
    _answer(echo, "PreToolUse Bash `npm publish`",
            send(_tool(repo, transcript, "PreToolUse", "toolu_demo_2", "Bash", publish)))
    send(_tool(repo, transcript, "PostToolUse", "toolu_demo_2", "Bash", publish,
               tool_response={"stdout": "+ demo@1.0.1\n", "stderr": "", "interrupted": False}))
    again = {"command": "npm publish", "description": "Publish it once more"}
    _answer(echo, "PreToolUse Bash `npm publish` again",
            send(_tool(repo, transcript, "PreToolUse", "toolu_demo_3", "Bash", again)))
    deploy = {"command": "curl -X POST https://deploy.example.com/release"}
    _answer(echo, "PreToolUse Bash `curl -X POST ...`",
            send(_tool(repo, transcript, "PreToolUse", "toolu_demo_4", "Bash", deploy)))
    echo("  (the agent process dies here: no PostToolUse for toolu_demo_4)")
    resumed = send(_event(repo, transcript, "SessionStart", source="resume"))
    echo("SessionStart resume -> additionalContext:")
    for line in resumed["hookSpecificOutput"]["additionalContext"].splitlines():
        echo(f"  | {line}")
    _denied(echo, repo, transcript, send)
    _git_hooks(echo, repo)


def _denied(echo: Echo, repo: Path, transcript: Path,
            send: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """PreToolUse runs before Claude Code's permission dialog: a call the user denies there
    was begun and never ends. At Stop the transcript says it never ran."""
    push = {"command": "git push origin main"}
    _answer(echo, "PreToolUse Bash `git push`",
            send(_tool(repo, transcript, "PreToolUse", "toolu_demo_5", "Bash", push)))
    echo("  (the user answers No in Claude Code's permission dialog: no PostToolUse)")
    rejection = {"type": "tool_result", "tool_use_id": "toolu_demo_5", "is_error": True,
                 "content": f"{dangling.REJECTED}. The tool use was rejected."}
    with transcript.open("a") as fh:
        fh.write(json.dumps({"type": "user", "message": {"role": "user",
                                                         "content": [rejection]}}) + "\n")
    send(_event(repo, transcript, "Stop", stop_hook_active=False))
    entry = {e.call_id: e for e in Guard.open(repo).ledger()}["toolu_demo_5"]
    echo(f"Stop -> toolu_demo_5 {entry.status}: {entry.error_summary} (asking again is no replay)")


def _git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    from gitguard.demo.demo_repo import DEMO_ENV

    # No autostart: a daemon started by the clone's hooks would outlive the demo's tree
    # (the daemon chapter shows the daemon, started and stopped on purpose).
    env = {**os.environ, **DEMO_ENV, "GIT_CONFIG_GLOBAL": os.devnull, "GITGUARD_NO_DAEMON": "1"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          check=check)


def _git_hooks(echo: Echo, repo: Path) -> None:
    echo("\n== git hooks: the user's git operations recorded, hidden refs never pushed ==")
    clone, remote = repo.parent / "clone", repo.parent / "remote.git"
    _git(repo.parent, "clone", "-q", str(repo), str(clone))
    _git(repo.parent, "init", "-q", "--bare", str(remote))
    _git(clone, "remote", "set-url", "origin", str(remote))
    guard = Guard.open(clone)
    report = hook_install.install(guard.ws)
    guard.store.create()
    echo(f"gitguard hooks install: {', '.join(h.name for h in report.hooks)} in "
         f"{report.hooks_dir.path.relative_to(clone)}")
    with guard.tool_call("Edit", {"file_path": "app.py"}, writes=["app.py"]) as call:
        (clone / "app.py").write_text("def greet(name):\n    return 'Hi ' + name\n")
    echo(f"agent: {call.call_id} Edit app.py")
    _git(clone, "switch", "-q", "-c", "feature")
    _git(clone, "commit", "-qam", "friendlier greeting")
    found = git_moves.summary(guard.store)
    echo("user: git switch -c feature; git commit -am ...  recorded:")
    for move in found["moves"]:
        echo(f"  {git_moves.describe_move(move)}")
    for commit in found["commits"]:
        for line in git_moves.describe_commit(commit):
            echo(f"  {line}")
    pushed = _git(clone, "push", "-q", "origin", "feature", check=False)
    echo(f"git push origin feature: {'ok' if pushed.returncode == 0 else pushed.stderr}")
    mirror = _git(clone, "push", "--mirror", "origin", check=False)
    refused = next((ln for ln in mirror.stderr.splitlines() if "refusing" in ln), "")
    echo(f"git push --mirror origin: exit {mirror.returncode}")
    echo(f"  {refused[:150]}...")
    leaked = _git(clone, "ls-remote", "origin").stdout.count("refs/gitguard/")
    echo(f"refs/gitguard/* on the remote: {leaked}")
    hook_install.uninstall(guard.ws)
    echo("gitguard hooks uninstall: the hooks directory is as it was")
