"""`gitguard run -- CMD`: one ledgered call; output, exit code and signals pass through."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers.commands import gg
from tests.helpers.gitstate import GitState
from tests.helpers.hooks import write_hook


def ledger(repo: Path) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads(gg(repo, "ledger", "--json").stdout)
    return entries


def test_output_and_exit_code_pass_through_and_are_stored(repo: Path, state_of: GitState) -> None:
    script = "echo out; echo err >&2; echo made > made.txt; exit 3"
    ran = gg(repo, "run", "--step", "step_7", "--", "sh", "-c", script, check=False)
    assert (ran.returncode, ran.stdout, ran.stderr) == (3, "out\n", "err\n")
    state_of.assert_unchanged(repo)
    entry = ledger(repo)[-1]
    assert (entry["status"], entry["toolName"], entry["stepId"]) == \
        ("failed", "run_command", "step_7")
    assert "err" in str(entry["errorSummary"]) and "exit code 3" in str(entry["errorSummary"])
    assert [p["path"] for p in entry["filePatches"]] == ["made.txt"]
    store = repo / ".git" / "gitguard" / "artifacts"
    assert (store / f"stdout_{entry['callId']}.txt").read_text() == "out\n"
    assert (store / f"stderr_{entry['callId']}.txt").read_text() == "err\n"
    ok = gg(repo, "run", "--", "true")
    assert ok.returncode == 0 and ledger(repo)[-1]["status"] == "succeeded"


def test_a_repeated_publish_is_refused(repo: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    count = tmp_path / "published"
    write_hook(bin_dir / "npm", f'#!/bin/sh\necho "+ pkg@1.0.0"\necho x >> "{count}"\n')
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    first = gg(repo, "run", "--", "npm", "publish", env=env)
    assert first.stdout == "+ pkg@1.0.0\n"
    entry = ledger(repo)[-1]
    assert (entry["idempotency"], entry["replayPolicy"]) == ("non_idempotent", "never")
    again = gg(repo, "run", "--", "npm", "publish", env=env, check=False)
    assert again.returncode == 4
    assert again.stderr.startswith(
        f"Error: run_command with this input already ran as {entry['callId']}")
    assert count.read_text() == "x\n"  # the second publish never started
    tests = gg(repo, "run", "--tool", "unit_tests", "--", "npm", "test", env=env)
    assert tests.returncode == 0 and ledger(repo)[-1]["idempotency"] == "conditional"


def test_signals_reach_the_command(repo: Path) -> None:
    child = ("import signal, sys\n"
             "def bye(signum, frame):\n"
             "    print('got', signal.Signals(signum).name, flush=True)\n"
             "    sys.exit(42)\n"
             "signal.signal(signal.SIGTERM, bye)\n"
             "print('ready', flush=True)\n"
             "signal.pause()\n")
    proc = subprocess.Popen([sys.executable, "-m", "gitguard", "run", "--", sys.executable, "-c",
                             child], cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"  # passed through while the command runs
    proc.send_signal(signal.SIGTERM)  # to gitguard, not to the command
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out) == (42, "got SIGTERM\n"), err
    entry = ledger(repo)[-1]
    assert entry["status"] == "failed" and "exit code 42" in str(entry["errorSummary"])


def test_an_unknown_command_is_an_error_before_anything_is_ledgered(repo: Path) -> None:
    missing = gg(repo, "run", "--", "no-such-program-here", check=False)
    assert missing.returncode == 1
    assert missing.stderr.splitlines() == [
        "Error: command not found: no-such-program-here",
        "Hint: check the spelling, or give the program's path"]
    assert not (repo / ".git" / "gitguard" / "ledger.jsonl").exists()


def test_a_command_printing_more_than_is_kept_keeps_head_and_tail_and_says_so(
        tmp_path: Path) -> None:
    """The terminal gets every byte; the stored copy keeps the first and last KEPT / 2
    bytes and a line saying how many were left out. (Peak RSS is a measurement, not an
    assertion here: 108-114 MB for this run alone, but 310 MB inside the clean-clone CI
    suite for reasons not yet found; see the closing note of 2026-12-02.)"""
    from gitguard.calls import run_command

    repo = tmp_path / "r"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    gg(repo, "init", "--no-hooks")
    total = 16 * run_command.KEPT
    script = ("import sys\nw = sys.stdout.buffer.write\nw(b'FIRST LINE\\n')\n"
              f"for i in range({total} // 64): w(b'%063d\\n' % i)\nw(b'LAST LINE\\n')\n")
    out = tmp_path / "terminal"
    with out.open("wb") as terminal:
        proc = subprocess.run([sys.executable, "-m", "gitguard", "run", "--", sys.executable,
                               "-c", script], cwd=repo, stdout=terminal,
                              stderr=subprocess.PIPE)
    assert proc.returncode == 0, proc.stderr
    assert out.stat().st_size > total                   # the terminal got it all
    stored = next((repo / ".git" / "gitguard" / "artifacts").rglob("stdout_*.txt")).read_bytes()
    assert stored.startswith(b"FIRST LINE\n") and stored.endswith(b"LAST LINE\n")
    assert b" bytes left out]\n" in stored and len(stored) <= run_command.KEPT + 100
