"""`gitguard integrate claude-code`: merged into the user's settings, idempotent, removable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gitguard import nativeclient
from gitguard.integrations import claude_settings, codex_settings
from gitguard.workspace import discover
from tests.helpers.commands import gg
from tests.helpers.hooks import payload

USER_SETTINGS = {
    "permissions": {"allow": ["Bash(npm test:*)"], "deny": ["Read(./.env)"]},
    "env": {"NODE_ENV": "development"},
    "model": "opus",
    "hooks": {
        "PostToolUse": [{"matcher": "Edit|Write",
                         "hooks": [{"type": "command", "command": "npx prettier --write ."}]}],
        "Notification": [{"hooks": [{"type": "command", "command": "notify-send claude"}]}],
    },
}


def test_integrate_keeps_every_other_setting_and_is_idempotent(repo: Path) -> None:
    settings = repo / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(USER_SETTINGS, indent=2) + "\n")
    original = settings.read_bytes()

    done = json.loads(gg(repo, "integrate", "claude-code", "--json").stdout)
    assert done["changed"] is True
    merged = json.loads(settings.read_text())
    assert {k: merged[k] for k in ("permissions", "env", "model")} == \
        {k: USER_SETTINGS[k] for k in ("permissions", "env", "model")}
    assert merged["hooks"]["Notification"] == USER_SETTINGS["hooks"]["Notification"]
    assert merged["hooks"]["PostToolUse"][0] == USER_SETTINGS["hooks"]["PostToolUse"][0]
    expected = claude_settings.command(sys.executable, nativeclient.program())
    for event in claude_settings.EVENTS:
        ours = [h for g in merged["hooks"][event] for h in g["hooks"]
                if "gitguard hook claude-code" in h["command"]]
        assert [h["command"] for h in ours] == [expected], event
    assert merged["hooks"]["PreToolUse"][-1]["matcher"] == "*"
    assert "matcher" not in merged["hooks"]["SessionStart"][-1]

    written = settings.read_bytes()
    again = gg(repo, "integrate", "claude-code")
    assert "nothing changed" in again.stdout and settings.read_bytes() == written

    gg(repo, "integrate", "claude-code", "--remove")
    assert json.loads(settings.read_text()) == USER_SETTINGS
    assert settings.read_bytes() == original  # same 2-space layout as Claude Code writes


def test_integrate_creates_and_removes_its_own_file(repo: Path) -> None:
    ws = discover(repo)
    result = claude_settings.integrate(ws, python="/opt/py env/bin/python")
    settings = repo / ".claude" / "settings.local.json"
    assert result.changed and settings.exists()
    command = json.loads(settings.read_text())["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert command.endswith("'/opt/py env/bin/python' -m gitguard hook claude-code")
    assert ".git/gitguard" not in command
    assert claude_settings.integrate(ws, python="/usr/bin/python3").changed  # path updated
    assert claude_settings.integrate(ws, remove=True).changed
    assert not (repo / ".claude").exists()


def test_integrate_refuses_a_broken_settings_file(repo: Path) -> None:
    settings = repo / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text('{"permissions": {"allow": [}\n')
    refused = gg(repo, "integrate", "claude-code", check=False)
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"Error: {settings} is not valid JSON")
    assert "Hint: fix the file" in refused.stderr
    assert settings.read_text() == '{"permissions": {"allow": [}\n'


def test_integrate_codex_writes_its_hooks_file_and_the_events_reach_the_ledger(
        repo: Path) -> None:
    """Codex reads .codex/hooks.json in Claude Code's shape; a user's own hook there stays,
    and the command it runs handles a Codex event end to end."""
    hooks_file = repo / ".codex" / "hooks.json"
    hooks_file.parent.mkdir()
    mine = {"hooks": {"PostToolUse": [{"matcher": "Bash",
                                       "hooks": [{"type": "command", "command": "./lint.sh"}]}]}}
    hooks_file.write_text(json.dumps(mine))
    done = json.loads(gg(repo, "integrate", "codex", "--json").stdout)
    assert done["changed"] and done["events"] == list(codex_settings.EVENTS)
    merged = json.loads(hooks_file.read_text())["hooks"]
    assert merged["PostToolUse"][0] == mine["hooks"]["PostToolUse"][0]
    assert set(merged) == set(codex_settings.EVENTS)
    [pre] = [h for g in merged["PreToolUse"] for h in g["hooks"]]
    assert "matcher" not in merged["PreToolUse"][0], "no matcher: every Codex tool"
    assert not json.loads(gg(repo, "integrate", "codex", "--json").stdout)["changed"]

    event = payload("codex/pre_tool_use_bash.json", repo)
    proc = subprocess.run(pre["command"], shell=True, cwd=repo, input=json.dumps(event),
                          capture_output=True, text=True)
    assert proc.returncode == 0 and json.loads(proc.stdout) == {}, proc.stderr
    [entry] = json.loads(gg(repo, "ledger", "--json").stdout)
    assert (entry["callId"], entry["status"]) == (event["tool_use_id"], "started")

    gg(repo, "integrate", "codex", "--remove")
    assert json.loads(hooks_file.read_text()) == mine


def _run_hook(command: str, cwd: Path, event: dict[str, object],
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", command], cwd=cwd, input=json.dumps(event),
                          capture_output=True, text=True, env={**os.environ, **(env or {})})


def test_the_hook_commands_keep_working_when_the_repository_moves(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the package's native client, and after the store moved with the repository,
    the commands written still run."""
    monkeypatch.setenv("GITGUARD_NATIVE", "1")
    gg(repo, "init", "--no-hooks", "--no-daemon")
    gg(repo, "integrate", "claude-code")
    codex = json.loads(gg(repo, "integrate", "codex", "--json").stdout)
    moved = repo.parent / "moved project"
    repo.rename(moved)
    claude = json.loads((moved / ".claude" / "settings.local.json").read_text())
    [cc_pre] = [h["command"] for g in claude["hooks"]["PreToolUse"] for h in g["hooks"]]
    event = payload("claude_code/pre_tool_use_edit.json", moved)
    ran = _run_hook(cc_pre, moved / "src", event, {"CLAUDE_PROJECT_DIR": str(moved)})
    assert (ran.returncode, json.loads(ran.stdout)) == (0, {}), ran.stderr
    hooks = json.loads((moved / ".codex" / "hooks.json").read_text())["hooks"]
    [cx_pre] = [h["command"] for g in hooks["PreToolUse"] for h in g["hooks"]]
    assert str(nativeclient.PROGRAM) in cx_pre
    event = payload("codex/pre_tool_use_bash.json", moved)
    ran = _run_hook(cx_pre, moved, event)
    assert (ran.returncode, json.loads(ran.stdout)) == (0, {}), ran.stderr
    ledger = {e["callId"] for e in json.loads(gg(moved, "ledger", "--json").stdout)}
    assert ledger == {"toolu_01EditAppPy9fQ2", event["tool_use_id"]}
    assert "/hooks" in codex["next"]


def test_status_names_an_integrated_agent_that_never_reached_gitguard(repo: Path) -> None:
    done = gg(repo, "integrate", "codex")
    assert "trust gitguard's hooks in `/hooks`" in done.stdout
    gg(repo, "integrate", "claude-code")
    status = gg(repo, "status")
    assert "agent codex: integrated" in status.stdout and "/hooks" in status.stdout
    assert "agent claude-code: integrated" in status.stdout
    hooks = json.loads((repo / ".codex" / "hooks.json").read_text())["hooks"]
    [start] = [h["command"] for g in hooks["SessionStart"] for h in g["hooks"]]
    ran = _run_hook(start, repo, payload("codex/session_start_resume.json", repo))
    assert ran.returncode == 0, ran.stderr
    agents = {a["agent"]: a for a in json.loads(gg(repo, "status", "--json").stdout)["agents"]}
    assert agents["codex"]["reached"] and not agents["claude-code"]["reached"]
    assert "agent codex" not in gg(repo, "status").stdout
