"""Without a daemon, `call begin` and the hooks that take a snapshot start their scan's
`git status` before their imports (gitguard.cli.entry.early_scan): the scan takes it (git runs
that status once) and the snapshot equals the in-process one. `hook git pre-push` is
answered before anything heavy is imported, with the same answer as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gitguard.api import Guard
from gitguard.cli import entry
from tests.helpers.commands import gg, git
from tests.helpers.hooks import run_git, with_branch_and_remote

LAUNCHER = Path(__file__).resolve().parents[2] / "gitguard" / "hookmain.py"
HEAVY = {"pygit2", "pydantic", "click", "watchdog"}


def _traced(tmp_path: Path) -> tuple[dict[str, str], Path]:
    traced = tmp_path / "git-trace.txt"
    env = {**os.environ, "GIT_TRACE": str(traced)}
    env.pop("GITGUARD_FAULT", None)     # a fault run skips the daemon path: not this test
    return env, traced


def _scans(traced: Path) -> int:
    return sum(1 for line in traced.read_text(errors="replace").splitlines()
               if "built-in: git status" in line and "--untracked-files=normal" in line)


def _sessions(repo: Path) -> dict[str, str]:
    lines = git(repo, "for-each-ref", "--format=%(refname) %(objectname)",
                "refs/gitguard/sessions/").splitlines()
    return dict(line.split() for line in lines)


def _new_tree(repo: Path, before: dict[str, str]) -> str:
    """The tree of the one snapshot the command added to a session's chain."""
    moved = [ref for ref, oid in _sessions(repo).items() if before.get(ref) != oid]
    assert len(moved) == 1, moved
    return git(repo, "rev-parse", f"{moved[0]}^{{tree}}").strip()


def _in_process_tree(repo: Path) -> str:
    guard = Guard.open(repo)
    try:
        return guard.snap.write_tree().tree
    finally:
        guard.close()


def _ready(repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    gg(repo, "checkpoint")          # the first snapshot reads the user's index read-only,
    gg(repo, "checkpoint")          # the second makes the stat index the early status needs
    (repo / "src" / "app.py").write_text("def main():\n    return 2\n")
    (repo / "notes.txt").write_text("new\n")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "mod.py").write_text("x = 1\n")


def test_pre_tool_use_hook_takes_the_early_status(repo: Path, tmp_path: Path) -> None:
    _ready(repo)
    env, traced = _traced(tmp_path)
    before = _sessions(repo)
    event = {"session_id": "s1", "cwd": str(repo), "hook_event_name": "PreToolUse",
             "tool_name": "Bash", "tool_input": {"command": "make"}, "tool_use_id": "toolu_1"}
    proc = subprocess.run([sys.executable, "-S", "-P", str(LAUNCHER), "hook", "claude-code"],
                          cwd=repo, input=json.dumps(event).encode(), env=env,
                          capture_output=True, check=True)
    assert json.loads(proc.stdout) == {}, proc.stderr
    assert _scans(traced) == 1
    tree = _new_tree(repo, before)
    assert tree == _in_process_tree(repo)
    listed = git(repo, "ls-tree", "-r", "--name-only", tree).split()
    assert {"notes.txt", "pkg/mod.py", "src/app.py"} <= set(listed)


def test_call_begin_takes_the_early_status(repo: Path, tmp_path: Path) -> None:
    _ready(repo)
    env, traced = _traced(tmp_path)
    before = _sessions(repo)
    proc = subprocess.run([sys.executable, "-m", "gitguard", "call", "begin", "--tool", "Bash",
                           "--input", '{"command": "make"}', "--json"],
                          cwd=repo, env=env, capture_output=True, check=True)
    assert json.loads(proc.stdout)["status"] == "started"
    assert _scans(traced) == 1
    assert _new_tree(repo, before) == _in_process_tree(repo)


def test_post_checkout_hook_takes_the_early_status(repo: Path, tmp_path: Path) -> None:
    with_branch_and_remote(repo)
    gg(repo, "hooks", "install")
    gg(repo, "checkpoint")
    env, traced = _traced(tmp_path)
    before = _sessions(repo)
    moved = run_git(repo, "checkout", "-q", "other", env=env)
    assert moved.returncode == 0 and "Error" not in moved.stderr, moved.stderr
    assert _scans(traced) == 1
    assert _new_tree(repo, before) == _in_process_tree(repo)


def test_an_early_status_nobody_takes_ends_with_the_process(repo: Path,
                                                            tmp_path: Path) -> None:
    """A begin refused before its scan (the call id is taken): the early status ran, was
    not used, and the command says what it always said."""
    _ready(repo)
    gg(repo, "call", "begin", "--tool", "Bash", "--input", "{}", "--call-id", "c1")
    env, traced = _traced(tmp_path)
    again = subprocess.run([sys.executable, "-m", "gitguard", "call", "begin", "--tool", "Bash",
                            "--input", "{}", "--call-id", "c1"], cwd=repo, env=env,
                           capture_output=True, text=True)
    assert again.returncode == 1 and again.stderr.startswith("Error: call c1 already exists")
    assert _scans(traced) <= 1


def test_which_commands_get_an_early_status() -> None:
    def event(name: str, tool: str = "Bash") -> bytes:
        return json.dumps({"hook_event_name": name, "tool_name": tool}).encode()

    assert entry.scans(["call", "begin", "--tool", "x"], None) == ""
    assert entry.scans(["resume"], None) == ""
    assert entry.scans(["hook", "git", "post-checkout", "a", "b", "1"], None) == ""
    assert entry.scans(["hook", "claude-code"], event("PreToolUse")) == ""
    assert entry.scans(["hook", "claude-code"], event("PostToolUse")) == ""
    # an Edit's end is declared-only: no scan, so no early status to drop
    assert entry.scans(["hook", "claude-code"], event("PostToolUse", "Edit")) is None
    assert entry.scans(["hook", "claude-code"], event("SessionStart")) is None
    assert entry.scans(["hook", "claude-code"], b"not json") is None
    assert entry.scans(["call", "end", "call_1"], None) is None
    assert entry.scans(["call", "begin", "--help"], None) is None
    assert entry.scans(["hook", "git", "post-commit"], None) is None
    assert entry.scans(["ledger"], None) is None


def _pre_push(repo: Path, lines: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    return subprocess.run([sys.executable, "-S", "-P", str(LAUNCHER), "hook", "git",
                           "pre-push", "origin", "/nowhere.git"], cwd=repo, input=lines,
                          env=env, capture_output=True, text=True)


def test_pre_push_is_answered_without_heavy_imports(repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    head = git(repo, "rev-parse", "HEAD").strip()
    imported = lambda err: {ln.split("|")[-1].strip().split(".")[0]  # noqa: E731
                            for ln in err.splitlines() if ln.startswith("import time:")}
    let = _pre_push(repo, f"refs/heads/main {head} refs/heads/main {'0' * 40}\n")
    assert let.returncode == 0 and not HEAVY & imported(let.stderr)
    assert "gitguard:" not in let.stderr
    refused = _pre_push(repo, f"refs/gitguard/sessions/s1 {head} refs/gitguard/sessions/s1 "
                              f"{'0' * 40}\n")
    assert refused.returncode == 4 and not HEAVY & imported(refused.stderr)
    said = [ln for ln in refused.stderr.splitlines() if not ln.startswith("import time:")]
    assert said == ["gitguard: refusing to push refs/gitguard/sessions/s1 to origin: "
                    "refs/gitguard/* hold gitguard's private snapshots of your workspace, and "
                    "`git push --mirror` sends every ref. Nothing was pushed. Push branches "
                    "and tags instead: git push origin --all && git push origin --tags"]


def test_early_scan_starts_the_status_the_scan_then_takes(repo: Path) -> None:
    """In-process: each scanning command line starts an early status for its workspace,
    and a scan that takes it equals a scan without it."""
    from gitguard.snapshot import prescan

    _ready(repo)
    guard = Guard.open(repo)
    event = json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash",
                        "cwd": str(repo)}).encode()
    try:
        for argv, stdin in ((["-C", str(repo), "call", "begin", "--tool", "Bash"], None),
                            (["-C", str(repo), "hook", "git", "post-merge", "0"], None),
                            (["-C", "/", "hook", "claude-code"], event)):
            entry._stdin_read = stdin
            entry.early_scan(argv)
            assert prescan.pending(), argv
            fast = guard.snap.scan()
            assert not prescan.pending()            # the scan took it
            assert fast == guard.snap.scan()        # the same as the scan's own status
            assert b"pkg/" in fast[0] or b"pkg/mod.py" in fast[0]
    finally:
        entry._stdin_read = None
        prescan.drop()
        guard.close()


def _through_click(repo: Path, argv: list[str], stdin: bytes) -> tuple[int, str, str]:
    """The click command (what the daemon runs), in a process that goes straight to it."""
    code = ("import sys\nfrom gitguard.cli.main import run\n"
            f"sys.exit(run({argv!r}))\n")
    env = {**os.environ}
    env.pop("GITGUARD_FAULT", None)
    proc = subprocess.run([sys.executable, "-c", code], cwd=repo, input=stdin, env=env,
                          capture_output=True)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def _direct(repo: Path, argv: list[str], stdin: bytes) -> tuple[int, str, str]:
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    env.pop("GITGUARD_FAULT", None)
    proc = subprocess.run([sys.executable, "-m", "gitguard", *argv], cwd=repo, input=stdin,
                          env=env, capture_output=True)
    err = proc.stderr.decode()
    assert not {"click", "gitguard.cli.main"} & {ln.split("|")[-1].strip() for ln in
                                           err.splitlines() if ln.startswith("import time:")}
    said = "".join(ln + "\n" for ln in err.splitlines() if not ln.startswith("import time:"))
    return proc.returncode, proc.stdout.decode(), said


def test_hooks_without_click_answer_as_the_click_commands(repo: Path) -> None:
    _ready(repo)
    answers = []
    for i, runner in enumerate((_through_click, _direct)):
        sent = {"hook_event_name": "PreToolUse", "tool_name": "Bash", "session_id": "s1",
                "tool_input": {"command": "make"}, "cwd": str(repo), "tool_use_id": f"t{i}"}
        answers.append(runner(repo, ["hook", "claude-code"], json.dumps(sent).encode()))
    assert answers[0] == answers[1] == (0, "{}\n", "")
    broken = [runner(repo, ["hook", "claude-code"], b"[1, 2]")
              for runner in (_through_click, _direct)]
    assert broken[0][0] == broken[1][0] == 0
    assert [json.loads(b[1])["systemMessage"] for b in broken][0] == \
        [json.loads(b[1])["systemMessage"] for b in broken][1]
    head = git(repo, "rev-parse", "HEAD").strip()
    argv = ["hook", "git", "post-checkout", head, head, "1"]
    assert _through_click(repo, argv, b"") == _direct(repo, argv, b"") == (0, "", "")
