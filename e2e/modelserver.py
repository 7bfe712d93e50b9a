"""A scripted model on 127.0.0.1 for the real Claude Code and Codex CLIs (stdlib only).

It speaks enough of the Anthropic Messages API (`POST /v1/messages`, SSE or JSON,
`count_tokens`, `HEAD /`) and of the OpenAI Responses API (`POST /v1/responses`, SSE)
for both CLIs to run a whole session offline.

What the model "says" is a script carried by the conversation itself: the user prompt
holds a line `gg-script: [STEP, ...]` (JSON). The reply is chosen from the conversation
state, never from request order: find the newest user prompt holding a script, count the
tool results that came after it, and answer with that step. A step is `{"text": "..."}`
(end of turn) or `{"tools": [{"name": ..., "input": {...}}, ...]}` (one or more tool
calls in one turn; a tool may fix its call `id`). `"pause": NAME` in a step holds the
reply until the test releases it (the user edits files while the model "thinks"). A
step may be `{"if_last_result_contains": S, "then": STEP, "else": STEP}`, decided by
the last tool result's content. A string `"$last_result.KEY"` anywhere in a tool's
input is replaced by KEY of the last tool result read as JSON, `"$result[N].KEY"` by KEY
of the Nth result since the script's prompt (Responses API; Codex's `wait_agent` and
`close_agent` take the id its `spawn_agent` returned). Past the end of the script the
model says `done`.

Every request and every reply is recorded (`/_requests`, `Server.requests`), so a test
can assert what reached the model. `POST /counter/<name>` counts an external side effect
(a "publish") that a scripted shell command performs with curl.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MARKER = "gg-script:"


def _text_of(content: Any) -> str:
    """All text in a message's content (string, blocks, nested tool_result blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(b) for b in content)
    if isinstance(content, dict):
        parts = [str(content.get(k)) for k in ("text", "output") if isinstance(content.get(k), str)]
        if "content" in content:
            parts.append(_text_of(content["content"]))
        return "\n".join(parts)
    return ""


def parse_script(text: str) -> list[dict[str, Any]] | None:
    """The JSON list after the last MARKER in `text` that starts one (it runs to the end of
    its line). A script may carry another inside a string (a subagent's prompt): that one's
    marker is escaped JSON and does not parse, so the outer script is found before it."""
    at = len(text)
    while (at := text.rfind(MARKER, 0, at)) >= 0:
        line = text[at + len(MARKER):].split("\n", 1)[0].strip()
        try:
            script = json.loads(line)
        except ValueError:
            continue
        if isinstance(script, list):
            return script
    return None


@dataclass
class Turn:
    """The conversation reduced to what picks the reply."""

    script: list[dict[str, Any]] | None
    results_since_prompt: int
    last_result: str
    results: list[str] = field(default_factory=list)   # since the prompt (Responses API)


def anthropic_turn(body: dict[str, Any]) -> Turn:
    messages = body.get("messages") or []
    script, results, last = None, 0, ""
    for msg in messages:
        content = msg.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if msg.get("role") != "user":
            continue
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                results += 1
                last = _text_of(block.get("content"))
            elif block.get("type") == "text":
                found = parse_script(str(block.get("text") or ""))
                if found is not None:
                    script, results, last = found, 0, ""
    return Turn(script, results, last)


def responses_turn(body: dict[str, Any]) -> Turn:
    script, results, last = None, 0, ""
    outputs: list[str] = []
    for item in body.get("input") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message" and item.get("role") == "user":
            found = parse_script(_text_of(item.get("content")))
            if found is not None:
                script, results, last = found, 0, ""
                outputs = []
        elif kind in ("function_call_output", "custom_tool_call_output"):
            results += 1
            last = _text_of(item.get("output"))
            outputs.append(last)
    return Turn(script, results, last, outputs)


def choose(turn: Turn) -> dict[str, Any]:
    """The step for this conversation state; a branch is decided by the last result."""
    if turn.script is None:
        return {"text": "ok"}
    # Each tool step produces one result per tool call: walk the script counting them.
    seen = 0
    for step in turn.script:
        step = _resolve(step, turn.last_result)
        if "tools" not in step:
            if seen >= turn.results_since_prompt:
                return step
            continue
        if seen >= turn.results_since_prompt:
            return _fill(step, turn)
        seen += len(step["tools"])
    return {"text": "done"}


LAST_RESULT = "$last_result."
NTH_RESULT = re.compile(r"\$result\[(\d+)\]\.(\w+)$")


def _fill(step: dict[str, Any], turn: Turn) -> dict[str, Any]:
    """The step with every `"$last_result.KEY"` and `"$result[N].KEY"` string in its
    tools' inputs replaced by KEY of that tool result read as JSON."""
    if "$last_result." not in json.dumps(step.get("tools")) and \
            "$result[" not in json.dumps(step.get("tools")):
        return step

    def field_of(text: str, key: str, ref: str) -> Any:
        try:
            result = json.loads(text)
        except ValueError:
            result = None
        if not isinstance(result, dict) or key not in result:
            raise ValueError(f"{ref}: that tool result has no {key}: {text!r}")
        return result[key]

    def fill(value: Any) -> Any:
        if isinstance(value, str) and value.startswith(LAST_RESULT):
            return field_of(turn.last_result, value[len(LAST_RESULT):], value)
        if isinstance(value, str) and (nth := NTH_RESULT.match(value)):
            index = int(nth.group(1))
            if index >= len(turn.results):
                raise ValueError(f"{value}: only {len(turn.results)} results so far")
            return field_of(turn.results[index], nth.group(2), value)
        if isinstance(value, list):
            return [fill(v) for v in value]
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return value

    return {**step, "tools": [{**tool, "input": fill(tool["input"])} for tool in step["tools"]]}


def _resolve(step: dict[str, Any], last_result: str) -> dict[str, Any]:
    while "if_last_result_contains" in step:
        step = step["then"] if step["if_last_result_contains"] in last_result else step["else"]
    return step


@dataclass
class Record:
    path: str
    body: dict[str, Any]
    reply: dict[str, Any] | None = None
    tool_ids: list[str] = field(default_factory=list)


class Server:
    """The model server; `with Server() as srv:` serves on `srv.url` until the block ends."""

    def __init__(self) -> None:
        self.requests: list[Record] = []
        self.counters: dict[str, int] = {}
        self._pauses: dict[str, tuple[threading.Event, threading.Event]] = {}
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Server:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def count(self, name: str) -> int:
        with self._lock:
            return self.counters.get(name, 0)

    def bump(self, name: str) -> int:
        with self._lock:
            self.counters[name] = self.counters.get(name, 0) + 1
            return self.counters[name]

    def record(self, rec: Record) -> None:
        with self._lock:
            self.requests.append(rec)

    def _pause(self, name: str) -> tuple[threading.Event, threading.Event]:
        with self._lock:
            return self._pauses.setdefault(name, (threading.Event(), threading.Event()))

    def hold(self, name: str, timeout: float = 300.0) -> None:
        """A step with `"pause": name` waits here before it is sent (the model thinking),
        until the test calls `release(name)`."""
        reached, released = self._pause(name)
        reached.set()
        released.wait(timeout)

    def wait_paused(self, name: str, timeout: float = 120.0) -> None:
        if not self._pause(name)[0].wait(timeout):
            raise TimeoutError(f"the model never reached pause {name}")

    def release(self, name: str) -> None:
        self._pause(name)[1].set()

    def model_requests(self) -> list[Record]:
        """The requests that asked the model for a turn (they carry tools)."""
        with self._lock:
            return [r for r in self.requests
                    if r.path in ("/v1/messages", "/v1/responses") and r.body.get("tools")]

    def tool_ids(self) -> list[str]:
        with self._lock:
            return [i for r in self.requests for i in r.tool_ids]

    def wait_for(self, name: str, at_least: int, timeout: float = 60.0) -> int:
        """Poll the counter until it reaches `at_least` (a condition, not a timed guess)."""
        deadline = time.monotonic() + timeout
        while self.count(name) < at_least:
            if time.monotonic() > deadline:
                raise TimeoutError(f"counter {name} stayed at {self.count(name)}")
            time.sleep(0.05)
        return self.count(name)


def _new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return

        def _json(self, status: int, obj: Any) -> None:
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            if self.headers.get("content-encoding") == "zstd":
                raise ValueError("zstd request bodies are not supported")
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                return {"_raw": raw.decode("utf-8", "replace")}
            return body if isinstance(body, dict) else {"_body": body}

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path.startswith("/counter/"):
                self._json(200, {"count": server.count(path[len("/counter/"):])})
            elif path == "/v1/models" or path == "/models":
                self._json(200, {"data": [], "object": "list", "models": []})
            else:
                self._json(200, {})

        def do_POST(self) -> None:
            path = self.path.split("?", 1)[0]
            body = self._body()
            if path.startswith("/counter/"):
                self._json(200, {"count": server.bump(path[len("/counter/"):])})
                return
            rec = Record(path, body)
            server.record(rec)
            if path == "/v1/messages/count_tokens":
                self._json(200, {"input_tokens": 100})
            elif path == "/v1/messages":
                self._anthropic(body, rec)
            elif path in ("/v1/responses", "/responses"):
                self._responses(body, rec)
            else:
                self._json(404, {"error": {"type": "not_found", "message": path}})

        # --- Anthropic Messages ----------------------------------------------------------
        def _anthropic(self, body: dict[str, Any], rec: Record) -> None:
            step = choose(anthropic_turn(body)) if body.get("tools") else {"text": "ok"}
            if "pause" in step:
                server.hold(step["pause"])
            if "fail" in step:          # the API failing for good (500, 529): every retry too
                rec.reply = {"status": step["fail"]}
                kind = "overloaded_error" if step["fail"] == 529 else "api_error"
                self._json(int(step["fail"]), {"type": "error", "error": {
                    "type": kind, "message": f"scripted failure {step['fail']}"}})
                return
            blocks: list[dict[str, Any]] = []
            if "tools" in step:
                for tool in step["tools"]:
                    tid = tool.get("id") or _new_id("toolu_01")
                    rec.tool_ids.append(tid)
                    blocks.append({"type": "tool_use", "id": tid, "name": tool["name"],
                                   "input": tool["input"]})
                stop = "tool_use"
            else:
                blocks.append({"type": "text", "text": step["text"]})
                stop = "end_turn"
            rec.reply = {"content": blocks, "stop_reason": stop}
            message = {"id": _new_id("msg_01"), "type": "message", "role": "assistant",
                       "model": body.get("model", "claude-scripted"), "content": [],
                       "stop_reason": None, "stop_sequence": None,
                       "usage": {"input_tokens": 10, "output_tokens": 1,
                                 "cache_creation_input_tokens": 0,
                                 "cache_read_input_tokens": 0}}
            if not body.get("stream"):
                message.update(content=blocks, stop_reason=stop,
                               usage={"input_tokens": 10, "output_tokens": 5})
                self._json(200, message)
                return
            self._sse_start()
            self._event("message_start", {"type": "message_start", "message": message})
            for i, block in enumerate(blocks):
                if block["type"] == "text":
                    self._event("content_block_start", {
                        "type": "content_block_start", "index": i,
                        "content_block": {"type": "text", "text": ""}})
                    self._event("content_block_delta", {
                        "type": "content_block_delta", "index": i,
                        "delta": {"type": "text_delta", "text": block["text"]}})
                else:
                    self._event("content_block_start", {
                        "type": "content_block_start", "index": i,
                        "content_block": {"type": "tool_use", "id": block["id"],
                                          "name": block["name"], "input": {}}})
                    self._event("content_block_delta", {
                        "type": "content_block_delta", "index": i,
                        "delta": {"type": "input_json_delta",
                                  "partial_json": json.dumps(block["input"])}})
                self._event("content_block_stop", {"type": "content_block_stop", "index": i})
            self._event("message_delta", {"type": "message_delta",
                                          "delta": {"stop_reason": stop, "stop_sequence": None},
                                          "usage": {"output_tokens": 5}})
            self._event("message_stop", {"type": "message_stop"})
            self.close_connection = True

        # --- OpenAI Responses --------------------------------------------------------------
        def _responses(self, body: dict[str, Any], rec: Record) -> None:
            step = choose(responses_turn(body)) if body.get("tools") else {"text": "ok"}
            if "pause" in step:
                server.hold(step["pause"])
            items: list[dict[str, Any]] = []
            if "tools" in step:
                for tool in step["tools"]:
                    cid = tool.get("id") or _new_id("call_")
                    rec.tool_ids.append(cid)
                    if tool.get("custom"):  # a freeform tool (Codex's apply_patch)
                        items.append({"type": "custom_tool_call", "id": _new_id("ctc_"),
                                      "status": "completed", "call_id": cid,
                                      "name": tool["name"], "input": tool["input"]})
                    else:
                        items.append({"type": "function_call", "id": _new_id("fc_"),
                                      "status": "completed", "call_id": cid,
                                      "name": tool["name"],
                                      "arguments": json.dumps(tool["input"])})
                        if tool.get("namespace"):  # a tool of a namespace (multi_agent_v1)
                            items[-1]["namespace"] = tool["namespace"]
            else:
                items.append({"type": "message", "id": _new_id("msg_"), "role": "assistant",
                              "status": "completed",
                              "content": [{"type": "output_text", "text": step["text"],
                                           "annotations": []}]})
            rec.reply = {"output": items}
            resp_id = _new_id("resp_")
            base = {"id": resp_id, "object": "response", "created_at": int(time.time()),
                    "model": body.get("model", "gpt-scripted"), "output": []}
            self._sse_start()
            seq = 0

            def emit(kind: str, data: dict[str, Any]) -> None:
                nonlocal seq
                data = {"type": kind, "sequence_number": seq, **data}
                seq += 1
                self._event(kind, data)

            emit("response.created", {"response": {**base, "status": "in_progress"}})
            for i, item in enumerate(items):
                emit("response.output_item.added", {"output_index": i, "item": item})
                if item["type"] == "message":
                    emit("response.output_text.delta", {
                        "item_id": item["id"], "output_index": i, "content_index": 0,
                        "delta": item["content"][0]["text"]})
                emit("response.output_item.done", {"output_index": i, "item": item})
            emit("response.completed", {"response": {
                **base, "status": "completed", "output": items,
                "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens": 5,
                          "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": 15}}})
            self.close_connection = True

        def _sse_start(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()

        def _event(self, name: str, data: dict[str, Any]) -> None:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

    return Handler


if __name__ == "__main__":  # manual use: python e2e/modelserver.py
    with Server() as srv:
        print(srv.url, flush=True)
        threading.Event().wait()
