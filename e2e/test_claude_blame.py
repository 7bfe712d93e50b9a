"""`gitguard blame` of a real Claude Code session: two turns, you editing and committing
between them through the installed git hooks, then each line's writer, and the undo
command blame lists, run in a shell."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from e2e import harness
from e2e.harness import Repo, bash


def _edit(repo: Repo, rel: str, old: str, new: str) -> dict[str, Any]:
    return {"name": "Edit", "input": {"file_path": str(repo.root / rel), "old_string": old,
                                      "new_string": new, "replace_all": False}}


def _owners(document: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [(ln["text"], ln["owner"], ln.get("callId")) for ln in document["lines"]]


def test_blame_names_each_calls_lines_across_your_commit(make_repo: Any, daemon: bool) -> None:
    repo: Repo = make_repo(daemon=daemon)
    first = [{"tools": [_edit(repo, "app.py", "    return 1", "    return 2")]},
             {"tools": [{"name": "Write", "input": {"file_path": str(repo.root / "new.py"),
                                                    "content": "print('new')\n"}}]},
             {"text": "first turn done"}]
    second = [{"tools": [_edit(repo, "app.py", "    return 2",
                               "    return 2\n\n\ndef helper():\n    return 3")]},
              {"tools": [bash("echo '# generated' >> app.py")]},
              {"text": "second turn done"}]

    def between(_turn: int) -> None:
        repo.write("app.py", "# my header\n" + repo.read("app.py"))
        harness.git(repo.root, "add", "-A", env=repo.env)
        harness.git(repo.root, "commit", "-q", "-m", "my commit", env=repo.env)

    run = harness.claude_turns(repo, [("first", first), ("second", second)], between)
    assert run.returncode == 0, run.stderr[-3000:]
    assert not run.hook_failures(), run.hook_failures()
    assert repo.hook_errors() == ""
    calls = {(e["toolName"], e["summary"][:60]): e["callId"] for e in repo.ledger()}
    by_tool: dict[str, list[str]] = {}
    for entry in repo.ledger():
        by_tool.setdefault(entry["toolName"], []).append(entry["callId"])
    edit_1, edit_2 = by_tool["Edit"]
    (write,), (echo,) = by_tool["Write"], by_tool["Bash"]
    assert calls

    document = repo.gg_json("blame", "app.py")
    assert document["schema"] == "gitguard.blame/1"
    assert _owners(document) == [
        ("# my header", "user", None), ("def main():", "commit", None),
        ("    return 2", "call", edit_1), ("", "call", edit_2), ("", "call", edit_2),
        ("def helper():", "call", edit_2), ("    return 3", "call", edit_2),
        ("# generated", "call", echo)]
    mine = harness.git(repo.root, "rev-parse", "HEAD", env=repo.env).strip()
    lines = document["lines"]
    assert lines[0]["commit"] == lines[2]["commit"] == mine      # committed, still theirs
    assert lines[3].get("commit") is None                          # not committed yet
    assert lines[7]["confidence"] == "window" and lines[2]["confidence"] == "exact"
    assert document["commits"][mine]["summary"] == "my commit"
    assert document["calls"][edit_2]["sessionId"] == run.session_id
    new_py = repo.gg_json("blame", "new.py")
    assert _owners(new_py) == [("print('new')", "call", write)]
    assert new_py["lines"][0]["commit"] == mine

    # The undo of the second turn's Edit, as blame lists it, run in a shell: its lines
    # and the later command's go; yours, the commit's and the first turn's stay.
    undo = document["calls"][edit_2]["undo"]
    ran = subprocess.run(undo, shell=True, cwd=repo.home, env=repo.env, capture_output=True,
                         text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert repo.read("app.py") == "# my header\ndef main():\n    return 2\n"
    after = repo.gg_json("blame", "app.py")
    assert _owners(after) == [("# my header", "user", None), ("def main():", "commit", None),
                              ("    return 2", "call", edit_1)]
    assert json.loads(repo.gitguard("status", "--json").stdout)["head"] == mine
