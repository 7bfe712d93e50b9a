"""`gitguard status` names the tools it has seen but does not know (issue 29 item 2)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.commands import gg


def test_status_names_the_tools_it_has_seen_but_does_not_know(repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    for n, tool in enumerate(("FrobnicateRemote", "Read", "multi_agent_v1wait_agent",
                              "FrobnicateRemote")):
        gg(repo, "call", "begin", "--tool", tool, "--input", json.dumps({"n": n}))
    # A project that says what a tool does makes it known.
    (repo / ".gitguard.toml").write_text('[tools.Deploy]\nidempotency = "non_idempotent"\n')
    gg(repo, "call", "begin", "--tool", "Deploy", "--input", "{}")
    status = json.loads(gg(repo, "status", "--json").stdout)
    assert status["unknownTools"] == ["FrobnicateRemote"]
    human = gg(repo, "status").stdout
    assert "tools gitguard does not know" in human and "FrobnicateRemote" in human


def test_status_lists_no_unknown_tool_when_every_call_was_known(repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    gg(repo, "call", "begin", "--tool", "Agent", "--input", '{"prompt": "x"}')
    assert json.loads(gg(repo, "status", "--json").stdout)["unknownTools"] == []
    assert "does not know" not in gg(repo, "status").stdout
