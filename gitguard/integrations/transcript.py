"""What an agent's transcript says that its hook payloads do not.

Claude Code's transcript (`transcript_path`, JSONL) holds each tool call's `tool_result`
(its text, `is_error`), and a forked session's transcript starts with a copy of its
parent's history (with the parent's tool_use ids; some versions add
`forkedFrom.sessionId`). Codex's rollout file (its `transcript_path`; a subagent's
events name the subagent's own) records each command's end with its `exit_code`, and
each call's output (`function_call_output`, written once the tool has finished). Readers
here never raise: an unreadable or unfamiliar transcript gives no evidence, and the
caller stays cautious.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

TAIL = 8 << 20          # the calls of one turn are near the end of the transcript
HEAD = 256 << 10        # a fork's copied history starts the file
INTERRUPTED = "[Request interrupted by user for tool use]"
_EXIT_TEXT = re.compile(rb"(?:Process exited with code|Exit code:?) (-?\d+)")


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    text: str
    is_error: bool
    interrupted: bool       # the user stopped the turn while it may have been running
    finished: bool = False  # Codex's output record: written once the tool had finished


def _read(path: str | None, head: bool) -> bytes:
    if not path:
        return b""
    try:
        with open(path, "rb") as fh:
            if head:
                return fh.read(HEAD)
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - TAIL))
            return fh.read()
    except OSError:
        return b""


def _records(data: bytes, needles: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    wanted = tuple(needles)
    for line in data.splitlines():
        if not any(n in line for n in wanted):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield record


def fork_parent(path: str | None, session_id: str | None) -> str | None:
    """The session a Claude Code session was forked from (`--fork-session`), if its
    transcript says so."""
    for record in _records(_read(path, head=True), (b'"forkedFrom"',)):
        forked = record.get("forkedFrom")
        parent = forked.get("sessionId") if isinstance(forked, dict) else None
        if isinstance(parent, str) and parent and parent != session_id:
            return parent
    return None


def tool_use_ids(path: str | None) -> Iterator[str]:
    """The ids of the tool calls at the head of a transcript, in order. A fork's transcript
    starts with a copy of its parent's history, tool_use ids included (Claude Code 2.1)."""
    for record in _records(_read(path, head=True), (b'"tool_use"',)):
        for block in _content(record):
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                yield str(block["id"])


def tool_results(path: str | None, call_ids: Iterable[str]) -> dict[str, ToolResult]:
    """The newest tool_result for each of `call_ids` found in the transcript's tail."""
    wanted = set(call_ids)
    found: dict[str, ToolResult] = {}
    if not wanted:
        return found
    for record in _records(_read(path, head=False), (k.encode() for k in wanted)):
        codex = _codex_output(record, wanted)
        if codex is not None:
            found[codex.call_id] = codex
            continue
        blocks = _content(record)
        interrupted = any(_text(b).startswith(INTERRUPTED) for b in blocks)
        for block in blocks:
            call_id = block.get("tool_use_id")
            if block.get("type") != "tool_result" or call_id not in wanted:
                continue
            found[str(call_id)] = ToolResult(str(call_id), _text(block),
                                             bool(block.get("is_error")), interrupted)
    return found


_OUTPUTS = ("function_call_output", "custom_tool_call_output")


def _codex_output(record: dict[str, Any], wanted: set[str]) -> ToolResult | None:
    """A Codex rollout's output record of one of `wanted`: its text, an error when the
    text says the command exited non-zero."""
    payload = record.get("payload")
    if record.get("type") != "response_item" or not isinstance(payload, dict) \
            or payload.get("type") not in _OUTPUTS or payload.get("call_id") not in wanted:
        return None
    output = payload.get("output")
    text = output if isinstance(output, str) else json.dumps(output)
    code = exit_code_in_text(text)
    return ToolResult(str(payload["call_id"]), text, code not in (None, 0), False, True)


def exit_code(path: str | None, call_id: str) -> int | None:
    """A Codex command's exit code from its rollout file: the command's completed item
    (Codex 0.17x: `item_completed` with a `CommandExecution` item) or `exec_command_end`
    event, else the `function_call_output` text ("Process exited with code N")."""
    code: int | None = None
    for record in _records(_read(path, head=False), (call_id.encode(),)):
        payload = record.get("payload")
        item = payload.get("item") if isinstance(payload, dict) else None
        if isinstance(item, dict) and item.get("id") == call_id and \
                isinstance(item.get("exit_code"), int):
            return int(item["exit_code"])
        if not isinstance(payload, dict) or payload.get("call_id") != call_id:
            continue
        if payload.get("type") == "exec_command_end" and isinstance(payload.get("exit_code"),
                                                                     int):
            return int(payload["exit_code"])
        output = payload.get("output")
        if payload.get("type") == "function_call_output" and output is not None:
            match = _EXIT_TEXT.search(json.dumps(output).encode())
            if match:
                code = int(match.group(1))
    return code


def exit_code_in_text(text: str) -> int | None:
    match = _EXIT_TEXT.search(text.encode())
    return int(match.group(1)) if match else None


def _content(record: dict[str, Any]) -> list[dict[str, Any]]:
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _text(block: dict[str, Any]) -> str:
    content = block.get("content", block.get("text"))
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""
