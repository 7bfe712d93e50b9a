"""`call begin`/`call end` in the daemon without click (gitguard.cli.call_parser) print and
exit exactly as through click, for good and bad input alike."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

import pytest

from gitguard.cli import call_parser
from gitguard.daemon.daemon import Daemon
from gitguard.storage.store import Store
from gitguard.workspace import discover

ENV = {"GITGUARD_NOW": "2026-03-04T05:06:07Z", "GITGUARD_SESSION": "s1"}

# (argv, stdin, which file the agent writes before it runs, whether the fast path takes it)
SCRIPT: list[tuple[list[str], bytes, str | None, bool]] = [
    (["call", "begin", "--tool", "Write", "--input", '{"file_path": "a.txt"}',
      "--writes", "a.txt", "--json"], b"", None, True),
    (["call", "end", "call_1", "--status", "succeeded", "--result", "wrote", "--json"], b"",
     "a.txt", True),
    (["call", "begin", "--tool=Edit", "--input-file", "-", "--writes=b.txt", "--writes",
      "c.txt", "--side-effect", "net", "--step", "st_7", "--call-id", "mine",
      "--idempotency", "conditional", "--risk=high", "--session", "s1"],
     b'{"file_path": "b.txt"}', None, True),
    (["call", "end", "--status=failed", "mine", "--result-file", "-"], b"boom\nexit 2\n",
     "b.txt", True),
    (["call", "begin", "--tool", "send_email", "--input", '{"to": "x@y.z"}',
      "--replay", "never"], b"", None, True),
    (["call", "end", "call_3", "--status", "succeeded", "--result", "sent"], b"", None, True),
    (["call", "begin", "--tool", "send_email", "--input", '{"to": "x@y.z"}',
      "--replay", "never"], b"", None, True),                            # refused: exit 4
    (["call", "begin", "--tool", "send_email", "--input", '{"to": "x@y.z"}',
      "--replay", "never", "--force-replay", "--confirm", "--json", "--json"], b"", None,
     True),
    (["call", "end", "call_9", "--status", "succeeded"], b"", None, True),    # unknown: 1
    (["call", "end", "call_1", "--status", "succeeded"], b"", None, True),    # ended: 1
    (["call", "end", "call_4", "--status", "succeeded", "--result-file", "missing.txt"], b"",
     None, True),                                                        # cannot read: 1
    (["call", "begin", "--tool", "Bash", "--input", "not json"], b"", None, True),
    (["call", "begin", "--tool", "Bash", "--input", "[1, 2]"], b"", None, True),
    (["call", "begin", "--tool", "", "--input", "{}"], b"", None, True),
    # click's own: usage errors and help
    (["call", "begin", "--input", "{}"], b"", None, False),
    (["call", "begin", "--tool"], b"", None, False),
    (["call", "begin", "--tool", "X", "--risk", "extreme"], b"", None, False),
    (["call", "begin", "--tool", "X", "--json=yes"], b"", None, False),
    (["call", "begin", "--tool", "X", "extra"], b"", None, False),
    (["call", "begin", "--tol", "X"], b"", None, False),
    (["call", "begin", "--tool", "X", "--", "y"], b"", None, False),
    (["call", "begin", "--tool", "-X"], b"", None, False),     # click takes it: exit 0
    (["call", "end", "--status", "succeeded"], b"", None, False),
    (["call", "end", "a", "b", "--status", "failed"], b"", None, False),
    (["call", "end", "call_4", "--status", "done"], b"", None, False),
    (["call", "end", "--help"], b"", None, False),
    (["call", "--help"], b"", None, False),
    (["call", "begin", "-h"], b"", None, False),
]


def _run(repo: Path, fast: bool, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str, str]]:
    ws = discover(repo)
    Store(ws).create()
    daemon = Daemon(ws, logging.getLogger("gitguard.test"))
    daemon.start(serve_socket=False)
    env = {**os.environ, **ENV}
    results = []
    try:
        with monkeypatch.context() as patched:
            if not fast:
                patched.setattr(call_parser, "parse", lambda argv: None)
            for argv, stdin, edit, _ in SCRIPT:
                if edit is not None:
                    (repo / edit).write_text(f"written by the agent: {edit}\n")
                answer = daemon.run_cli({"argv": argv, "cwd": str(repo), "env": env,
                                         "stdin": stdin})
                results.append((answer["exit"], answer["stdout"].replace(str(repo), "<ws>"),
                                answer["stderr"].replace(str(repo), "<ws>")))
    finally:
        daemon.shutdown()
    return results


def test_the_parser_takes_the_plain_shapes_and_leaves_the_rest_to_click() -> None:
    for argv, _, _, fast in SCRIPT:
        assert (call_parser.parse(argv) is not None) == fast, argv


def test_direct_dispatch_prints_and_exits_exactly_as_click(repo: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    twin = tmp_path / "twin"
    subprocess.run(["cp", "-a", str(repo), str(twin)], check=True)
    fast = _run(repo, True, monkeypatch)
    slow = _run(twin, False, monkeypatch)
    assert [r[0] for r in fast] == [0, 0, 0, 0, 0, 0, 4, 0, 1, 1, 1, 1, 1, 1,
                                    2, 2, 2, 2, 2, 2, 2, 0, 2, 2, 2, 0, 0, 0]
    assert fast == slow
    assert fast[0][1].startswith("{") and fast[2][1] == "mine\n"
    assert fast[3][1] == "mine failed: 1 file(s) changed\n"
    assert fast[6][2].startswith("Error: send_email with this input already ran")
