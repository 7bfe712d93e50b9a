"""Running the git CLI with an environment that cannot touch the user's state by accident."""

from __future__ import annotations

import errno
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from gitguard import errors
from gitguard.errors import GitguardError

# Variables a git hook or the user's shell may set that would redirect our git calls.
_LEAKY = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_PREFIX",
    "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_QUARANTINE_PATH",
)


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _LEAKY}
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["LC_ALL"] = "C"
    if extra:
        env.update(extra)
    return env


def full_disk(stderr: Sequence[str], git_dir: Path) -> GitguardError | None:
    """git's own words for a full disk or a read-only store ("Out of diskspace", "unable to
    write new index file", ...) as the error `errors.translate` gives for an OSError."""
    text = "\n".join(stderr)
    known = errors.translate_text(text, str(git_dir))
    if known is None and "write" in text.lower() and errors.nearly_full(str(git_dir)):
        known = errors.translate(OSError(errno.ENOSPC, "No space left on device",
                                         str(git_dir)))
    return known


def run_git(
    args: Sequence[str],
    *,
    git_dir: Path,
    work_tree: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    cmd = ["git", f"--git-dir={git_dir}"]
    if work_tree is not None:
        cmd.append(f"--work-tree={work_tree}")
    cmd += ["-c", "core.quotepath=off", "-c", "gc.auto=0", "-c", "maintenance.auto=false", *args]
    proc = subprocess.run(
        cmd, input=stdin, capture_output=True, env=git_env(env), cwd=work_tree or git_dir,
        check=False,
    )
    if check and proc.returncode != 0:
        message = proc.stderr.decode(errors="replace").strip().splitlines()
        short = full_disk(message, git_dir)
        if short is not None:
            raise short
        raise GitguardError(
            f"git {args[0]} failed: {message[-1] if message else proc.returncode}",
            "run `git fsck` and `gitguard verify`; report this if it persists",
        )
    return proc


def start_git(
    args: Sequence[str],
    *,
    git_dir: Path,
    work_tree: Path,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """`run_git`'s command started in the background (stdout piped, stderr dropped), to
    run beside another git process on the other core; the caller reads and waits."""
    cmd = ["git", f"--git-dir={git_dir}", f"--work-tree={work_tree}", "-c",
           "core.quotepath=off", "-c", "gc.auto=0", "-c", "maintenance.auto=false", *args]
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=git_env(env), cwd=work_tree)


def git_version(git_dir: Path) -> tuple[int, int]:
    """(major, minor) of the git on PATH; (0, 0) when it says something else."""
    out = run_git(["version"], git_dir=git_dir).stdout.decode(errors="replace")
    found = re.search(r"(\d+)\.(\d+)", out)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)
