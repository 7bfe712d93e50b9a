"""The hook fixtures carry every field gitguard reads that the real CLIs send.

fixtures/claude_code and fixtures/codex are captured from the real CLIs by `make e2e`
(`GITGUARD_E2E_CAPTURE=1`), which also records in fixtures/captured_fields.json every
field each real payload had. A fixture edited by hand, or a gitguard that starts reading
a field the fixtures never had, fails here.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from tests.helpers.paths import FIXTURES, ROOT

CAPTURED: dict[str, dict[str, list[str]]] = json.loads(
    (FIXTURES / "captured_fields.json").read_text())


def names_gitguard_reads() -> set[str]:
    """Every string gitguard's code uses as a mapping key: `x.get("k")`, `x["k"]`."""
    found: set[str] = set()
    for path in sorted((ROOT / "gitguard").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            key: ast.expr | None = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "get" and node.args:
                key = node.args[0]
            elif isinstance(node, ast.Subscript):
                key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                found.add(key.value)
    return found


def key_paths(value: Any, prefix: str = "") -> set[str]:
    """Every key of a payload, nested ones as `outer.inner` (as the capture records them)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            found.add(prefix + key)
            found |= key_paths(inner, f"{prefix}{key}.")
    return found


def missing_fields(fixture: dict[str, Any], captured: list[str], read: set[str]) -> list[str]:
    """Fields the real payload had, that gitguard reads, and the fixture lacks."""
    have = key_paths(fixture)
    return sorted(p for p in captured if p.rsplit(".", 1)[-1] in read and p not in have)


def test_every_captured_field_gitguard_reads_is_in_the_fixture() -> None:
    read = names_gitguard_reads()
    # the scan finds what the hook adapter plainly reads
    assert {"hook_event_name", "session_id", "tool_use_id", "tool_input", "tool_response",
            "transcript_path", "source", "error"} <= read
    gaps = {}
    for agent, fixtures in CAPTURED.items():
        for name, captured in fixtures.items():
            fixture = json.loads((FIXTURES / agent / f"{name}.json").read_text())
            if missing := missing_fields(fixture, captured, read):
                gaps[f"{agent}/{name}"] = missing
    assert not gaps, f"fixtures lack fields the real CLIs send and gitguard reads: {gaps}"


def test_the_capture_covers_every_event_gitguard_handles() -> None:
    from gitguard.integrations import claude_code

    events = {json.loads((FIXTURES / "claude_code" / f"{name}.json").read_text())
              ["hook_event_name"] for name in CAPTURED["claude_code"]}
    codex = {json.loads((FIXTURES / "codex" / f"{name}.json").read_text())["hook_event_name"]
             for name in CAPTURED["codex"]}
    # PermissionDenied never fired under Claude Code 2.1.332 in any mode the e2e suite can
    # drive; its fixture stays hand-written (e2e/test_capture_fixtures.py says so).
    assert set(claude_code._HANDLERS) - events - codex == {"PermissionDenied"}
    assert {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop",
            "Interrupt"} <= codex


def test_a_fixture_that_lost_a_field_is_caught(tmp_path: Path) -> None:
    read = names_gitguard_reads()
    captured = CAPTURED["claude_code"]["post_tool_use_bash"]
    fixture = json.loads((FIXTURES / "claude_code" / "post_tool_use_bash.json").read_text())
    assert missing_fields(fixture, captured, read) == []
    del fixture["tool_use_id"]
    del fixture["tool_response"]["stdout"]
    assert missing_fields(fixture, captured, read) == ["tool_response.stdout", "tool_use_id"]
