"""Demo chapter: an agent process is killed with SIGKILL in the middle of `npm publish`;
resume marks the call uncertain, hands over the recovery note, and the replay is refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from gitguard.api import Guard
from gitguard.errors import ReplayRefused

Echo = Callable[[str], None]

# The "agent": begins a ledgered npm publish, starts writing the tarball, then waits on
# stdin as a long tool run would, until it is killed.
AGENT = """
import sys
from pathlib import Path
from gitguard.api import Guard
guard = Guard.open(sys.argv[1])
guard.checkpoint("manual", "step_4", state={"plan": ["test", "publish", "announce"], "next": 2},
                 messages=[{"role": "user", "content": "release 1.0"}])
entry = guard.begin_call("Bash", {"command": "npm publish"}, step_id="step_5")
Path(sys.argv[1], "dist").mkdir(exist_ok=True)
Path(sys.argv[1], "dist", "pkg-1.0.0.tgz").write_bytes(b"half a tarball")
print(entry.call_id, flush=True)
sys.stdin.read()
"""


def _kill_agent_mid_call(echo: Echo, repo: Path) -> str:
    agent = subprocess.Popen([sys.executable, "-c", AGENT, str(repo)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    assert agent.stdout is not None
    call_id = agent.stdout.readline().strip()   # the call is started, fsynced, tool running
    os.kill(agent.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while agent.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    echo(f"agent process {agent.pid}: began {call_id} `npm publish`, wrote half of "
         f"dist/pkg-1.0.0.tgz, then got kill -9 (exit {agent.returncode})")
    return call_id


def chapter_resume(echo: Echo, repo: Path, guard: Guard) -> None:
    echo("== Crash recovery: kill -9 mid-call, resume, no repeat ==")
    call_id = _kill_agent_mid_call(echo, repo)
    entry = {e.call_id: e for e in guard.ledger()}[call_id]
    echo(f"ledger after the crash: {call_id} is {entry.status} (durable before the tool ran)")

    result = guard.resume()
    echo(f"\n$ gitguard resume   (checkpoint {result.checkpoint_id}, run state "
         f"{result.run_state}, {len(result.messages)} message(s) returned)")
    for line in result.note.splitlines():
        echo(f"  | {line}")
    again = guard.resume()
    echo(f"resume again: same answer: {again.to_json() == result.to_json()}")

    echo("\nthe agent, restarted, tries `npm publish` again:")
    try:
        guard.begin_call("Bash", {"command": "npm publish"})
    except ReplayRefused as refused:
        echo(f"  Error: {refused.message}")
        echo(f"  Hint: {refused.hint}  (exit code {refused.exit_code})")
    else:
        raise RuntimeError("the replay of npm publish was not refused")

    settled = guard.reconcile(call_id, "succeeded", "version 1.0.0 is on the registry")
    echo(f"\nsomeone checks the registry: `gitguard reconcile {call_id} --status succeeded` "
         f"-> {settled.status}; it stays on the do-not-repeat list")
    for view in guard.explain().calls:
        if not view.verdict.replayable:
            echo(f"  do not repeat {view.entry.call_id}: {view.verdict.why}")
