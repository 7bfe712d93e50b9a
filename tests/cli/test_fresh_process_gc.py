"""A fresh process that runs a command itself (no daemon answered) takes what it holds out
of the cyclic GC's reach before it exits, and one that runs a single hook or call runs no
collection while it works (gitguard.cli.entry: nothing_to_collect_at_exit, one_command);
any other command keeps the collector on. `make bench` shows what it saves; this checks
the settings the process exits with, through the console script and the git shims' launcher."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gitguard.api import Guard
from tests.helpers.commands import git
from tests.helpers.hooks import payload

LAUNCHER = Path(__file__).resolve().parents[2] / "gitguard" / "hookmain.py"
# What the process's collector looks like once it is done: atexit handlers run after the
# command, before the interpreter shuts down.
_PROBE = ("import atexit, gc, os\n"
          "atexit.register(lambda: open(os.environ['PROBE'], 'w').write("
          "f'{gc.isenabled()} {gc.get_freeze_count() > 0}'))\n")
_ENTRY = _PROBE + "from gitguard.cli.entry import main\nmain()\n"
_HOOKMAIN = _PROBE + f"import runpy\nrunpy.run_path({str(LAUNCHER)!r}, run_name='__main__')\n"


def _gc_at_exit(repo: Path, runner: str, *argv: str, stdin: str = "") -> tuple[str, str]:
    probe = repo.parent / "gc.probe"
    proc = subprocess.run([sys.executable, "-c", runner, *argv], cwd=repo, input=stdin,
                          capture_output=True, text=True, env={**os.environ, "PROBE": str(probe)})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout, probe.read_text()


def test_a_hook_or_call_runs_without_collections_and_exits_frozen(repo: Path) -> None:
    Guard.init(repo).close()
    event = json.dumps(payload("claude_code/pre_tool_use_edit.json", repo))
    answer, collector = _gc_at_exit(repo, _ENTRY, "hook", "claude-code", stdin=event)
    assert json.loads(answer) == {} and collector == "False True"
    begun, collector = _gc_at_exit(repo, _ENTRY, "call", "begin", "--tool", "Read", "--json")
    assert "callId" in json.loads(begun) and collector == "False True"
    head = git(repo, "rev-parse", "HEAD").strip()
    _, collector = _gc_at_exit(repo, _HOOKMAIN, "hook", "git", "post-checkout", head, head, "1")
    assert collector == "False True"
    with Guard.open(repo) as guard:
        assert [e.tool_name for e in guard.ledger()] == ["Edit", "Read"]


def test_any_other_command_keeps_the_collector_on_until_it_exits(repo: Path) -> None:
    Guard.init(repo).close()
    status, collector = _gc_at_exit(repo, _ENTRY, "status", "--json")
    assert "dirty" in json.loads(status) and collector == "True True"
