"""One table of what the daemon answers (daemon.OPS) and one list of the command lines the
CLI forwards to it (client.FORWARDED): a real daemon answers every op in the table, times
exactly the ones marked as a tool call's, and answers every forwarded command line."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from gitguard.cli import entry
from gitguard.daemon.daemon import OPS, Daemon
from gitguard.ipc import client
from gitguard.workspace import discover
from tests.helpers.commands import gg
from tests.helpers.daemons import alive, request, store_of, wait_for


def _args(repo: Path, op: str, call_id: str) -> dict[str, Any]:
    """Arguments a gitguard client would send with `op`."""
    line = {"call.begin": ["call", "begin", "--tool", "Read", "--input", "{}"],
            "call.end": ["call", "end", call_id, "--status", "succeeded"],
            "hook": ["hook", "git", "post-commit"], "resume": ["resume"],
            "explain": ["explain"]}
    env = dict(os.environ)
    if op in line:
        return {"argv": line[op], "cwd": str(repo), "env": env, "stdin": None}
    if op == "api.begin_call":
        return {"kwargs": {"tool": "Read", "tool_input": {}}, "cwd": str(repo), "env": env}
    if op == "api.end_call":
        return {"kwargs": {"call_id": call_id, "status": "succeeded", "result": None},
                "cwd": str(repo), "env": env}
    if op == "hook.claude_code":
        return {"payload": {"hook_event_name": "UserPromptSubmit", "session_id": "s9",
                            "cwd": str(repo), "prompt": "hello"}}
    if op == "hook.git":
        return {"name": "post-commit", "args": [], "stdin": ""}
    return {}


def test_every_op_in_the_table_is_answered(repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    gg(repo, "daemon", "start")
    pid = client.pid_of(str(store_of(repo)))
    assert pid is not None
    answered: dict[str, int] = {}
    try:
        last_call = ""
        for op in [o for o in OPS if o != "stop"]:
            answer = request(repo, op, **_args(repo, op, last_call))
            answered[op] = answer["exit"]
            if op == "call.begin":
                last_call = answer["stdout"].strip()
            elif op == "api.begin_call":
                last_call = answer["entry"]["callId"]
        recent = request(repo, "status")["result"]["requests"]["recent"]
        # a command line as typed (the native client's op) is dispatched by the same table
        answered["cli explain"] = request(repo, "cli", argv=["explain"], cwd=str(repo),
                                          env=dict(os.environ), stdin=None)["exit"]
        with pytest.raises(client.Unreachable, match="not a command the daemon runs"):
            request(repo, "cli", argv=["status"], cwd=str(repo), env=dict(os.environ))
        answered["stop"] = request(repo, "stop")["exit"]
        wait_for("the daemon to stop", lambda: not alive(pid))
    finally:
        if alive(pid):
            gg(repo, "daemon", "stop")
    assert answered == dict.fromkeys([*OPS, "cli explain"], 0)
    assert {r["op"] for r in recent} == {op for op, how in OPS.items() if how.call}


@pytest.mark.parametrize(("words", "op"), list(client.FORWARDED.items()))
def test_every_forwarded_command_line_has_its_op(words: tuple[str, ...], op: str) -> None:
    assert op in OPS
    assert entry.op_of([*words, "x"]) == op
    assert entry.op_of([*words, "--help"]) is None


def test_nothing_else_is_forwarded() -> None:
    for line in (["status"], ["call"], ["call", "list"], ["ledger", "--json"], ["hooks"]):
        assert entry.op_of(line) is None, line


def test_a_request_whose_args_are_not_an_object_is_left_to_its_client(repo: Path) -> None:
    """No client of this version sends one; the daemon says so instead of answering with
    Error text of its own, and the client then runs the command itself."""
    gg(repo, "init", "--no-hooks", "--no-daemon")
    daemon = Daemon(discover(repo), logging.getLogger("gitguard.test"))
    daemon.start(serve_socket=False)
    try:
        for op in OPS:
            assert daemon.handle({"op": op, "args": ["resume"]}) == {
                "fallback": True, "reason": "the request's args are not an object"}, op
    finally:
        daemon.shutdown()
