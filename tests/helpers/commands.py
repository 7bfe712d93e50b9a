"""git and the real gitguard CLI, each run in a subprocess as a user would run them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def git(repo: Path, *args: str, input: bytes | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, input=input, capture_output=True, check=True)
    return proc.stdout.decode(errors="surrogateescape")


def gg(cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None,
       input: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real gitguard CLI in a subprocess."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    proc = subprocess.run([sys.executable, "-m", "gitguard", *args], cwd=cwd,
                          capture_output=True, text=True, env=full_env,
                          input=None if input is None else input.decode())
    if check and proc.returncode != 0:
        raise AssertionError(f"gitguard {' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc
