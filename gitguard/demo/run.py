"""`gitguard demo`: a real agent session on a throwaway repository, narrated.

Each chapter shows one capability on the same repository; later capabilities add
chapters. Everything here goes through the public `Guard` API and real git.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from gitguard.api import Guard
from gitguard.demo.daemon import chapter_daemon
from gitguard.demo.demo_repo import Echo, _git, _user_state, make_repo
from gitguard.demo.hooks import chapter_hooks
from gitguard.demo.resume import chapter_resume
from gitguard.demo.rollback import chapter_rollback
from gitguard.demo.storage import chapter_storage


def chapter_core(echo: Echo, repo: Path, guard: Guard) -> None:
    echo("== 1. Ledger, hidden snapshots, checkpoints ==")
    (repo / "NOTES.md").write_text("my own notes, written before the agent starts\n")
    echo("user: wrote NOTES.md before the session (it stays the user's)")
    session = guard.start_session("demo-session", agent="scripted demo agent")
    echo(f"session {session.session_id} started")

    with guard.tool_call("Write", {"file_path": "greeting.txt", "content": "hi"},
                         writes=["greeting.txt"], step_id="step_1") as call:
        (repo / "greeting.txt").write_text("hi from the agent\n")
        call.result = "wrote greeting.txt"
    echo(f"agent: {call.call_id} Write greeting.txt")

    with guard.tool_call("Edit", {"file_path": "app.py", "old_string": "'hello '",
                                  "new_string": "'Hello, '"},
                         writes=["app.py"], step_id="step_2") as call:
        text = (repo / "app.py").read_text().replace("'hello '", "'Hello, '")
        (repo / "app.py").write_text(text)
        call.result = "1 replacement"
    echo(f"agent: {call.call_id} Edit app.py")

    command = "mkdir -p build && echo compiled > build/out.txt && echo 'v2' > VERSION"
    with guard.tool_call("Bash", {"command": command}, step_id="step_3") as call:
        proc = subprocess.run(["sh", "-c", command], cwd=repo, capture_output=True, text=True)
        call.result = proc.stdout + proc.stderr
    echo(f"agent: {call.call_id} Bash `{command}`")

    ckpt = guard.checkpoint("post", "step_3", state={"plan": ["greet", "version"], "next": 4},
                            messages=[{"role": "user", "content": "make the greeting nicer"},
                                      {"role": "assistant", "content": "done: app.py edited"}])
    echo(f"checkpoint {ckpt.checkpoint_id} -> snapshot {ckpt.snapshot_commit[:10]} "
         f"(run state + 2 messages stored as blobs)")

    echo("\nledger:")
    for entry in guard.ledger():
        files = ", ".join(p.path for p in entry.file_patches) or "-"
        echo(f"  {entry.call_id:<7} {entry.status:<9} {entry.tool_name:<6} "
             f"{entry.idempotency:<14} replay={entry.replay_policy:<5} files: {files}")
    echo("checkpoints:")
    for row in guard.checkpoints():
        echo(f"  {row.checkpoint_id} {row.kind:<6} {row.step_id or '-':<7} "
             f"{row.snapshot_commit[:10]}")
    echo("status (who owns each change):")
    for dirty in guard.status().dirty:
        echo(f"  {dirty.change} {dirty.path:<14} {dirty.owner:<7} ({dirty.confidence})")
    echo("diff of call_2 (reversible with `git apply -R`):")
    for line in guard.diff("call_2").decode().splitlines():
        echo(f"  | {line}")
    refs = _git(repo, "for-each-ref", "--format=%(refname) -> %(objecttype)", "refs/gitguard")
    echo("hidden refs (not branches, never pushed):")
    for line in refs.splitlines():
        echo(f"  {line}")


CHAPTERS: list[Callable[[Echo, Path, Guard], None]] = [
    chapter_core, chapter_rollback, chapter_resume, chapter_storage, chapter_hooks,
    chapter_daemon,
]


def run(echo: Echo, keep: bool = False) -> None:
    root = Path(tempfile.mkdtemp(prefix="gitguard-demo-"))
    try:
        repo = make_repo(root)
        before = _user_state(repo)
        echo(f"throwaway repository: {repo}")
        echo(f"user's git state: {before}\n")
        guard = Guard.open(repo)
        for chapter in CHAPTERS:
            chapter(echo, repo, guard)
            echo("")
        after = _user_state(repo)
        echo(f"user's git state now: {after}")
        echo("HEAD, index, branches, tags: unchanged" if after == before
             else "WARNING: the user's git state changed")
        fsck = subprocess.run(["git", "fsck", "--no-progress"], cwd=repo, capture_output=True)
        echo(f"git fsck: {'clean' if fsck.returncode == 0 else 'PROBLEMS'}")
        if after != before or fsck.returncode != 0:
            raise SystemExit(1)
    finally:
        _stop_daemons(root)
        if keep:
            echo(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def _stop_daemons(root: Path) -> None:
    """A git hook in the demo's clone starts a daemon by itself (autostart): stop every
    daemon of the throwaway tree, or it would outlive the demo writing into a removed one."""
    from gitguard.ipc import control
    from gitguard.workspace import discover

    for repo in (p for p in root.iterdir() if (p / ".git").is_dir()):
        with contextlib.suppress(Exception):      # the demo's own result matters more
            control.stop(discover(repo))
