"""Subprocesses for the benchmark: an isolated git environment, timing, `du`.

Every git the benchmark runs sees the same environment: no user or system
config, a private HOME, a pinned author and date, no fsmonitor. That keeps the
anchors comparable between machines and keeps the user's config out of them.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

FIXED_DATE = "2024-01-01T00:00:00+0000"
FIXED_EPOCH = 1704067200  # FIXED_DATE as seconds; generated files carry this mtime

_HOME = Path(tempfile.gettempdir()) / "gitguard-bench-home"

GIT = ("git", "-c", "core.fsmonitor=false", "-c", "gc.auto=0", "-c", "maintenance.auto=false")


def isolated_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every benchmark subprocess runs with."""
    _HOME.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "GITGUARD_"))}
    env.update(
        HOME=str(_HOME),
        XDG_CONFIG_HOME=str(_HOME / ".config"),
        GIT_CONFIG_GLOBAL="/dev/null",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="Bench Author",
        GIT_AUTHOR_EMAIL="bench@example.invalid",
        GIT_AUTHOR_DATE=FIXED_DATE,
        GIT_COMMITTER_NAME="Bench Author",
        GIT_COMMITTER_EMAIL="bench@example.invalid",
        GIT_COMMITTER_DATE=FIXED_DATE,
        GIT_TERMINAL_PROMPT="0",
        LC_ALL="C",
    )
    if extra:
        env.update(extra)
    return env


def isolate_this_process() -> None:
    """Give in-process git work (pygit2 inside gitguard) the same isolation.

    Called once by the CLI entry point, before anything imports pygit2, because
    libgit2 reads HOME and the config search path when it first starts.
    """
    env = isolated_env()        # read before clearing: PATH and the rest must survive
    os.environ.clear()
    os.environ.update(env)


def run(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str] | None = None,
    input_bytes: bytes | None = None,
) -> bytes:
    """Run a command to completion and return its stdout; raise on failure."""
    proc = subprocess.run(
        list(argv),
        cwd=cwd,
        env=isolated_env(env),
        input=input_bytes,
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        cmd = " ".join(argv)
        err = proc.stderr.decode(errors="replace").strip()
        raise RuntimeError(f"`{cmd}` exited {proc.returncode} in {cwd}: {err}")
    return proc.stdout


def git(repo: Path, *args: str, env: Mapping[str, str] | None = None) -> bytes:
    return run([*GIT, *args], cwd=repo, env=env)


def timed_ms(argv: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None) -> float:
    """Wall time of one command, process start included, in milliseconds."""
    start = time.perf_counter_ns()
    run(argv, cwd=cwd, env=env)
    return (time.perf_counter_ns() - start) / 1e6


def du_bytes(path: Path) -> int:
    """Apparent size of a directory tree, as `du -sb` reports it."""
    out = run(["du", "-sb", str(path)], cwd=path.parent)
    return int(out.split()[0])


def git_version() -> str:
    return run(["git", "--version"], cwd=Path.cwd()).decode().strip()
