"""Codex as a first-class client: failures from what Codex sends, apply_patch's paths from
its patch text, and only answers Codex honours (never `ask`: Codex would run the tool)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.commands import gg
from tests.helpers.hooks import hook_cc, payload

PATCH = """*** Begin Patch
*** Add File: docs/new.md
+hello
*** Update File: src/app.py
@@
-    return 1
+    return 2
*** Update File: README.md
*** Move to: docs/README.md
*** Delete File: old.txt
*** End Patch
"""
# What Codex's PreToolUse output may carry (codex-rs/hooks/schema: pre-tool-use output).
CODEX_PRE_FIELDS = {"hookEventName", "permissionDecision", "permissionDecisionReason",
                    "additionalContext", "updatedInput"}


def _event(repo: Path, name: str, **changes: Any) -> dict[str, Any]:
    return payload(f"codex/{name}.json", repo, **changes)


def _rollout(tmp: Path, call: str, code: int, shape: str) -> str:
    """A Codex rollout file as `transcript_path`: the command's completed item (as Codex
    0.171 writes it before PostToolUse), or only its output item."""
    path = tmp / "rollout.jsonl"
    records: list[dict[str, Any]] = [
        {"type": "response_item", "payload": {"type": "function_call", "call_id": call,
                                              "name": "exec_command",
                                              "arguments": "{\"cmd\":\"npm test\"}"}}]
    if shape == "item":
        records.append({"type": "event_msg", "payload": {"type": "item_completed", "item": {
            "type": "CommandExecution", "id": call, "status": "failed" if code else
            "completed", "exit_code": code}}})
    else:
        records.append({"type": "response_item", "payload": {
            "type": "function_call_output", "call_id": call,
            "output": f"Wall time: 0.2 seconds\nProcess exited with code {code}\nOutput:\n"}})
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def _ledger(repo: Path) -> dict[str, dict[str, Any]]:
    return {e["callId"]: e for e in json.loads(gg(repo, "ledger", "--json").stdout)}


@pytest.mark.parametrize("shape", ["item", "output"])
@pytest.mark.parametrize("code, status", [(1, "failed"), (0, "succeeded")])
def test_a_codex_command_is_ledgered_by_its_exit_code(repo: Path, tmp_path: Path, code: int,
                                                      status: str, shape: str) -> None:
    call = "call_npm_test"
    rollout = _rollout(tmp_path, call, code, shape)
    test = {"command": "npm test"}
    hook_cc(repo, _event(repo, "pre_tool_use_bash", tool_use_id=call, tool_input=test,
                         transcript_path=rollout))
    hook_cc(repo, _event(repo, "post_tool_use_bash", tool_use_id=call, tool_input=test,
                         transcript_path=rollout, tool_response="2 tests failed\n"))
    entry = _ledger(repo)[call]
    assert entry["status"] == status
    if status == "failed":
        assert f"exited with code {code}" in entry["errorSummary"]


def test_a_structured_codex_response_says_failed(repo: Path) -> None:
    call = "call_publish"
    hook_cc(repo, _event(repo, "pre_tool_use_bash", tool_use_id=call))
    hook_cc(repo, _event(repo, "post_tool_use_bash", tool_use_id=call,
                         tool_response={"exit_code": 1, "output": "E403 forbidden"}))
    assert _ledger(repo)[call]["status"] == "failed"
    retry = hook_cc(repo, _event(repo, "pre_tool_use_bash", tool_use_id="call_retry"))
    assert retry == {}, "a publish that failed may be tried again"


def test_apply_patch_declares_the_paths_of_its_patch_text(repo: Path) -> None:
    call = "call_patch"
    hook_cc(repo, _event(repo, "pre_tool_use_bash", tool_use_id=call, tool_name="apply_patch",
                         tool_input={"command": PATCH}))
    assert sorted(_ledger(repo)[call]["declaredWrites"]) == \
        ["README.md", "docs/README.md", "docs/new.md", "old.txt", "src/app.py"]


def test_codex_is_never_asked_only_denied(repo: Path) -> None:
    """A replay Claude Code would put to the user (`ask`) is a deny for Codex, with the
    reason, and the answer holds only fields Codex's schema has."""
    commit = {"command": "git commit -qm wip"}
    hook_cc(repo, _event(repo, "pre_tool_use_bash", tool_use_id="call_c1", tool_input=commit))
    hook_cc(repo, _event(repo, "post_tool_use_bash", tool_use_id="call_c1", tool_input=commit,
                         tool_response=""))
    answer = hook_cc(repo, _event(repo, "pre_tool_use_bash", tool_use_id="call_c2",
                                  tool_input=commit))
    assert set(answer) == {"hookSpecificOutput"}
    specific = answer["hookSpecificOutput"]
    assert set(specific) <= CODEX_PRE_FIELDS
    assert specific["permissionDecision"] == "deny"
    assert "call_c1" in specific["permissionDecisionReason"]
