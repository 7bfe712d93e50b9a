"""The share of a real project's test and build writes that stay the shell call's
(issue 31, item 2; docs/rollback.md, "What a call owns").

A real package's source is copied into a new git repository under gitguard (optionally
with the daemon). `pip install -e .` and `pytest` run as ledgered shell calls the way the
agent hooks record them (`gitguard call begin` / `call end` around the real process),
while a simulated person works: before the first call they edit a file, and while each
command runs they save that file again and create a note in a directory the command
does not touch. Then `rollback-files --to <the first checkpoint> --dry-run --json` says,
for every path that changed inside each call's window, what a rollback would do:

- `call's`: restored or deleted (the call owns it, on window confidence);
- `ambiguous`: a conflict (a change to a file the person has open history on);
- `stray`: left as the person's (new, in a directory the command did not touch);
- `not the call's`: anything else (the call's patches leave it out).

The person's own writes are counted apart: none of them may stay the call's.

    python -m bench.shell_window_share --source /tmp/click-8.1.7 --venv /tmp/venv [--daemon]
        [--gitignore] [--skip-nothing]

`--gitignore` adds the usual Python ignores (`__pycache__/`, `*.egg-info/`,
`.pytest_cache/`) a checkout has and an sdist lacks. No timing is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from gitguard.api import Guard

IGNORES = "__pycache__/\n*.egg-info/\n.pytest_cache/\nbuild/\ndist/\n"
EDITED = "src/click/core.py"            # the file the person has open history on
WARNING = "ignore::pytest.PytestRemovedIn10Warning"


def gg(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "gitguard", *args], cwd=repo,
                          capture_output=True, text=True)
    if check and proc.returncode not in (0, 5):
        raise SystemExit(f"gitguard {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def person(repo: Path, label: str, done: threading.Event) -> list[str]:
    # one note per call, named by its first words
    """The person's writes while the command runs: a save of the file they edited before,
    and a new note in docs/ (which neither command touches)."""
    time.sleep(0.3)
    with open(repo / EDITED, "a") as handle:
        handle.write(f"# saved again by the person while {label} ran\n")
    note = f"docs/notes-{'-'.join(label.split()[:2]).strip('-=.')}-{len(label)}.md"
    (repo / note).write_text(f"the person's notes while {label} ran\n")
    done.set()
    return [EDITED, note]


def run_call(repo: Path, label: str, argv: list[str]) -> dict[str, Any]:
    begun = json.loads(gg(repo, "call", "begin", "--tool", "Bash", "--json", "--input",
                          json.dumps({"command": label})).stdout)
    done = threading.Event()
    writes: list[str] = []
    side = threading.Thread(target=lambda: writes.extend(person(repo, label, done)))
    # as on a developer's machine: Python writes its bytecode caches
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.Popen(argv, cwd=repo, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)
    side.start()
    status = proc.wait()
    side.join()
    if not done.is_set():
        raise SystemExit("the person's writes did not happen")
    gg(repo, "call", "end", begun["callId"], "--status",
       "succeeded" if status == 0 else "failed")
    return {"label": label, "callId": begun["callId"], "exit": status, "user": writes}


def window_paths(repo: Path, call_id: str) -> set[str]:
    """Every path that changed between the call's pre and post checkpoints."""
    guard = Guard.open(repo)
    try:
        entry = next(e for e in guard.ledger() if e.call_id == call_id)
        rows = {r.checkpoint_id: r for r in guard.checkpoints()}
        pre = guard.snap.tree_of(rows[entry.pre_checkpoint_id or ""].snapshot_commit)
        post = guard.snap.tree_of(rows[entry.post_checkpoint_id or ""].snapshot_commit)
        return {c.path for c in guard.snap.diff(pre, post)}
    finally:
        guard.close()


def measure(source: Path, venv: Path, daemon: bool, ignores: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gg-share-") as scratch:
        repo = Path(scratch) / "repo"
        shutil.copytree(source, repo)
        if ignores:
            (repo / ".gitignore").write_text(IGNORES)
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        git(repo, "-c", "user.name=m", "-c", "user.email=m@x", "commit", "-qm", "source")
        gg(repo, "init", "--no-hooks", "--no-daemon")
        if daemon:
            gg(repo, "daemon", "start")
        try:
            first = json.loads(gg(repo, "checkpoint", "--json").stdout)["checkpointId"]
            with open(repo / EDITED, "a") as handle:       # the person's open history
                handle.write("# the person's edit before the agent's commands\n")
            python = str(venv / "bin" / "python")
            # pytest 9 turns a warning click 8.1.7's own config makes an error into one
            calls = [run_call(repo, "pip install -e .",
                              [python, "-m", "pip", "install", "-q", "--no-deps", "-e", "."]),
                     run_call(repo, "pytest -q tests",
                              [python, "-m", "pytest", "-q", "-W", WARNING, "tests"]),
                     run_call(repo, "pytest -q --junitxml=report.xml tests/test_basic.py",
                              [python, "-m", "pytest", "-q", "-W", WARNING,
                               "--junitxml=report.xml", "tests/test_basic.py"])]
            plan = json.loads(gg(repo, "rollback-files", "--to", first, "--dry-run",
                                 "--json").stdout)
        finally:
            if daemon:
                gg(repo, "daemon", "stop", check=False)
        reverted = set(plan["restored"]) | set(plan["deleted"])
        conflicted = {c["path"] for c in plan["conflicts"]}
        left = {item["path"] for item in plan["left"]}
        rows = []
        for call in calls:
            paths = window_paths(repo, call["callId"])
            counts = {"call's": 0, "ambiguous": 0, "stray": 0, "not the call's": 0}
            person_kept = 0
            kinds: dict[str, str] = {}
            for path in sorted(paths):
                kind = ("call's" if path in reverted else "ambiguous" if path in conflicted
                        else "stray" if path in left else "not the call's")
                kinds[path] = kind
                if path in call["user"]:
                    person_kept += kind != "call's"
                    continue
                counts[kind] += 1
            command = sum(counts.values())
            rows.append({"command": call["label"], "exit": call["exit"],
                         "commandWrites": command, **counts,
                         "shareCalls": round(counts["call's"] / command, 4) if command else None,
                         "personWrites": len(call["user"]), "personKeptAsTheirs": person_kept,
                         "paths": kinds})
        return {"daemon": daemon, "gitignore": ignores,
                "skipDirs": os.environ.get("GITGUARD_SKIP_DIRS", "default"), "calls": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--venv", type=Path, required=True)
    parser.add_argument("--daemon", action="store_true")
    parser.add_argument("--gitignore", action="store_true")
    parser.add_argument("--skip-nothing", action="store_true",
                        help="snapshot __pycache__/ and .pytest_cache/ too (skip_dirs empty)")
    args = parser.parse_args()
    if args.skip_nothing:
        os.environ["GITGUARD_SKIP_DIRS"] = "no-such-directory-name"
    os.environ.setdefault("GIT_AUTHOR_NAME", "m")
    print(json.dumps(measure(args.source.resolve(), args.venv.resolve(), args.daemon,
                             args.gitignore), indent=2))


if __name__ == "__main__":
    main()
