"""Kill-loop driver: `python -m tests.crash.killtrial ROOT TRIALS SEED` (from the repository).

Imports gitguard once, then for each trial makes a fresh repository and forks a child
that plays a random agent session through `gitguard.api.Guard`, arming one random fault
point before a random operation; the child SIGKILLs itself when gitguard reaches it.
Forking keeps a trial at a few tens of milliseconds instead of an interpreter start.

The child acknowledges each thing it was told had happened in `<trial>.acks` (one JSON
line, written straight to the kernel, so a SIGKILL keeps every acknowledgement made
before it). The driver prints one JSON line per trial; the test verifies from there.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import random
import shutil
import sys
import traceback
from pathlib import Path
from typing import Any

from gitguard import faults
from gitguard.api import Guard
from gitguard.errors import ReplayRefused
from tests.helpers.crashkit import KNOWN_POINTS, make_repo, user_git_state, workspace_files

# Few distinct external inputs, so random sessions try to repeat them.
EXTERNAL = [("Bash", {"command": "npm publish"}), ("Bash", {"command": "git push origin main"}),
            ("send_email", {"to": "ops@example.com", "subject": "released"}),
            ("mcp__github__create_issue", {"title": "flaky test"})]
OPS = ("write", "edit", "read", "test_fail", "external", "external", "abandon", "abandon",
       "user", "checkpoint", "resume", "resume", "reconcile", "force")


class Trial:
    def __init__(self, repo: Path, acks: Path, rng: random.Random) -> None:
        self.repo = repo
        self.rng = rng
        self.fd = os.open(acks, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.guard = Guard.open(repo)
        self.files = 0
        self.uncertain: list[str] = []
        self.external: list[tuple[str, dict[str, Any]]] = []

    def ack(self, op: str, **fields: Any) -> None:
        os.write(self.fd, json.dumps({"op": op, **fields}).encode() + b"\n")

    def write_file(self, rel: str, text: str) -> None:
        path = self.repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        self.ack("file", path=rel, sha256=hashlib.sha256(text.encode()).hexdigest())

    def call(self, tool: str, tool_input: dict[str, Any], writes: list[str] | None = None,
             end: str | None = "succeeded", result: str = "ok", force: bool = False) -> None:
        try:
            entry = self.guard.begin_call(tool, tool_input, writes=writes or [],
                                          force_replay=force)
        except ReplayRefused:
            self.ack("refused", tool=tool, input=tool_input)
            return
        self.ack("begin", callId=entry.call_id, tool=tool, input=tool_input)
        for rel in writes or []:
            self.write_file(rel, f"{entry.call_id} {self.rng.random()}\n")
        if end is not None:
            self.ack("ending", callId=entry.call_id, status=end)
            self.guard.end_call(entry.call_id, end, result)
            self.ack("end", callId=entry.call_id, status=end)

    def step(self, op: str) -> None:
        rng = self.rng
        if op == "write":
            self.files += 1
            self.call("Write", {"file_path": f"agent/f{self.files}.txt"},
                      writes=[f"agent/f{self.files}.txt"])
        elif op == "edit":
            self.call("Edit", {"file_path": "src/app.py", "n": rng.randrange(3)},
                      writes=["src/app.py"])
        elif op == "read":
            self.call("Read", {"file_path": "README.md"})
        elif op == "test_fail":
            self.call("Bash", {"command": "pytest -q"}, end="failed", result="1 failed\n")
        elif op in ("external", "abandon"):
            tool, tool_input = rng.choice(EXTERNAL)
            self.external.append((tool, tool_input))
            self.call(tool, tool_input, end=None if op == "abandon" else "succeeded")
        elif op == "force" and self.external:
            tool, tool_input = rng.choice(self.external)
            self.call(tool, tool_input, force=True)
        elif op == "user":
            self.write_file(rng.choice(["README.md", "notes.txt", "src/app.py"]),
                            f"user {rng.random()}\n")
        elif op == "checkpoint":
            made = self.guard.checkpoint("manual", state={"r": rng.random()},
                                         messages=[{"role": "user", "content": "go on"}])
            self.ack("checkpoint", checkpointId=made.checkpoint_id)
        elif op == "resume":
            self.ack("resuming")
            self.uncertain = list(self.guard.resume().uncertain)
            self.ack("resume", uncertain=self.uncertain)
        elif op == "reconcile" and self.uncertain:
            call_id = self.uncertain.pop(0)
            status = rng.choice(["succeeded", "failed"])
            self.ack("reconciling", callId=call_id, status=status)
            self.guard.reconcile(call_id, status, "checked by the kill loop")
            self.ack("reconcile", callId=call_id, status=status)


def play(repo: Path, acks: Path, rng: random.Random, ops: list[str], arm_at: int,
         point: str) -> None:
    trial = Trial(repo, acks, rng)
    for number, op in enumerate(ops):
        if number == arm_at:
            # faults reads GITGUARD_FAULT once at import; re-reading it arms this child only.
            os.environ["GITGUARD_FAULT"] = point
            importlib.reload(faults)
            trial.ack("armed", point=point)
        if number == 0:
            trial.guard.start_session("s1")
            trial.ack("session")
        trial.step(op)
    trial.ack("done")


def main() -> None:
    root, trials, seed = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    # Copies of one repository are byte for byte the same repository (pinned dates, same
    # index bytes), and copying is far cheaper than seven git commands per trial.
    template = make_repo(root / "template")
    git_state, files = user_git_state(template), workspace_files(template)
    for number in range(trials):
        rng = random.Random(f"{seed}-{number}")      # any trial replays alone from its seed
        repo = root / f"t{number}"
        shutil.copytree(template, repo, symlinks=True)
        acks = root / f"t{number}.acks"
        ops = [rng.choice(OPS) for _ in range(rng.randint(2, 6))]
        arm_at = rng.randrange(len(ops))
        point = rng.choice(KNOWN_POINTS)
        line = {"trial": number, "repo": str(repo), "acks": str(acks), "ops": ops,
                "armAt": arm_at, "point": point, "gitState": git_state, "files": files}
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                play(repo, acks, rng, ops, arm_at, point)
            except BaseException:  # noqa: BLE001 - reported to the test as a violation
                with open(acks, "a") as fh:
                    fh.write(json.dumps({"op": "crash", "error": traceback.format_exc()}) + "\n")
                code = 70
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        line["signal"] = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        line["exit"] = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
