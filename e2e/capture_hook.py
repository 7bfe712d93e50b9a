"""Capture mode's hook wrapper: save the payload a real CLI sent, then run gitguard's hook.

    capture_hook.py DIR AGENT WORKSPACE HOME -- COMMAND

The payload is read from stdin, written (redacted) to DIR/AGENT/raw/NNN-EVENT[-TOOL].json,
and fed unchanged to COMMAND (one shell command line, as the agent would run it), whose
output and exit code are passed through. Redaction
replaces the temp workspace and HOME with the placeholders the fixtures use, so a capture
is stable from run to run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

FIXTURE_PROJECT = "/home/user/project"
FIXTURE_HOME = "/home/user"


def redact(value: Any, workspace: str, home: str) -> Any:
    if isinstance(value, str):
        text = value.replace(workspace, FIXTURE_PROJECT)
        # Claude Code names a project's transcript dir after its path, each [^A-Za-z0-9] -> '-'
        text = text.replace(re.sub(r"[^A-Za-z0-9]", "-", workspace),
                            re.sub(r"[^A-Za-z0-9]", "-", FIXTURE_PROJECT))
        return text.replace(home, FIXTURE_HOME)
    if isinstance(value, list):
        return [redact(v, workspace, home) for v in value]
    if isinstance(value, dict):
        return {k: redact(v, workspace, home) for k, v in value.items()}
    return value


def main(argv: list[str]) -> int:
    out_dir, agent, workspace, home = argv[:4]
    command = argv[argv.index("--") + 1:]
    data = sys.stdin.buffer.read()
    try:
        payload = json.loads(data)
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        raw = Path(out_dir) / agent / "raw"
        raw.mkdir(parents=True, exist_ok=True)
        name = str(payload.get("hook_event_name") or "unknown")
        if payload.get("tool_name"):
            name += "-" + str(payload["tool_name"])
        # a counter file keeps the order the CLI sent them in (hooks run one at a time here)
        seq = len(list(raw.glob("*.json"))) + 1
        text = json.dumps(redact(payload, os.path.realpath(workspace), home), indent=2)
        (raw / f"{seq:03d}-{name}.json").write_text(text + "\n")
    proc = subprocess.run(command[0], shell=True, input=data, capture_output=True)
    sys.stdout.buffer.write(proc.stdout)
    sys.stderr.buffer.write(proc.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
