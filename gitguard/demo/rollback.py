"""Demo chapter: the user edits one of the agent's files mid-session; rollback restores the
rest, reports the conflict, and a merge keeps the user's edit while removing the agent's."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from gitguard.api import Guard
from gitguard.recovery.restore import restore_session
from gitguard.rollback import conflicts
from gitguard.rollback.rollback_files import rollback_files

Echo = Callable[[str], None]

APP = """def greet(name):
    return 'Hello, ' + name


def shout(name):
    return greet(name).upper()


def whisper(name):
    return greet(name).lower()
"""


def _echo_file(echo: Echo, title: str, text: str) -> None:
    echo(title)
    for line in text.splitlines():
        echo(f"  | {line}")


def chapter_rollback(echo: Echo, repo: Path, guard: Guard) -> None:
    echo("== 2. Rollback that never destroys a user edit ==")
    with guard.tool_call("Write", {"file_path": "app.py"}, writes=["app.py"],
                         step_id="step_4"):
        (repo / "app.py").write_text(APP)
    start = guard.checkpoint("manual", "step_4", state={"plan": ["refactor"], "next": 5},
                             messages=[{"role": "user", "content": "refactor app.py"}])
    echo(f"checkpoint {start.checkpoint_id}: app.py has greet, shout and whisper")

    with guard.tool_call("Edit", {"file_path": "app.py"}, writes=["app.py"], step_id="step_5"):
        (repo / "app.py").write_text(APP.replace("'Hello, ' + name", "f'Greetings, {name}!'"))
    with guard.tool_call("Bash", {"command": "echo '...' > helpers.py && rm VERSION"},
                         step_id="step_6") as call:
        subprocess.run(["sh", "-c", "echo 'def helper(): pass' > helpers.py && rm VERSION"],
                       cwd=repo, check=True)
        call.result = ""
    echo("agent: call Edit app.py (greet), call Bash creates helpers.py and deletes VERSION")

    text = (repo / "app.py").read_text()
    (repo / "app.py").write_text(text.replace("greet(name).lower()",
                                              "greet(name).lower()  # the user's tweak"))
    echo("user: edits whisper() in app.py by hand, mid-session")
    with guard.tool_call("Write", {"file_path": "CHANGELOG.md"}, writes=["CHANGELOG.md"],
                         step_id="step_7"):
        (repo / "CHANGELOG.md").write_text("- greet says Greetings\n")
    echo("agent: call Write CHANGELOG.md")

    result = rollback_files(guard, start.checkpoint_id)
    echo(f"\nrollback-files --to {start.checkpoint_id}:")
    echo(f"  restored: {', '.join(result.restored)}")
    echo(f"  deleted:  {', '.join(result.deleted)}")
    for conflict in result.conflicts:
        echo(f"  conflict: {conflict.path} ({conflict.reason}); left as it is")
    safety = result.applied.safety.checkpoint_id if result.applied else "-"
    echo(f"  safety checkpoint {safety} holds the tree as it was, your edit included")

    view = conflicts.three_way(guard, conflicts.find(guard, "app.py"))
    _echo_file(echo, "\nconflicts show app.py (the agent's change, then yours, as diffs):",
               conflicts.render(view).decode(errors="replace"))
    done = conflicts.resolve(guard, "app.py", "manual_merge")
    _echo_file(echo, f"\nconflicts resolve app.py --merge -> {done.conflict.resolution}, "
                     f"{done.markers} overlap(s): the agent's hunk is gone, the user's stays",
               (repo / "app.py").read_text())

    undo = rollback_files(guard, safety, dry_run=True)
    echo(f"\nrollback-files --to {safety} --dry-run (undoing the rollback would restore "
         f"{', '.join(undo.restored)} and delete {', '.join(undo.deleted) or 'nothing'})")
    restored = restore_session(guard, start.checkpoint_id)
    echo(f"restore-session --to {start.checkpoint_id}: runState={restored['runState']}, "
         f"{len(restored['messages'])} message(s); calls after it: "
         f"{', '.join(c['callId'] for c in restored['callsAfter'])}")
