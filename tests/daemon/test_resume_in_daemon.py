"""`gitguard resume` and `explain` answered by a running daemon: the same bytes and exit
codes as the CLI in its own process, no heavy import in the client, and resuming again
without the daemon gives the same answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.commands import gg
from tests.helpers.daemons import request, running_daemon
from tests.helpers.native import program as built_client

ENV = {"GITGUARD_NOW": "2026-03-04T05:06:07Z", "GITGUARD_SESSION": "s1"}
HEAVY = {"pygit2", "pydantic", "click", "watchdog"}
SCRIPT = [("explain", "--json"), ("resume", "--json"), ("resume",), ("explain",),
          ("resume", "--session", "nobody")]


def crashed_run(repo: Path) -> None:
    """A session that wrote a.txt, sent an email, and died inside a third call, while
    a.txt changed again."""
    gg(repo, "init", env=ENV)
    gg(repo, "call", "begin", "--tool", "Write", "--input", '{"file_path": "a.txt"}',
       "--writes", "a.txt", env=ENV)
    (repo / "a.txt").write_text("written by the agent\n")
    gg(repo, "call", "end", "call_1", "--status", "succeeded", env=ENV)
    gg(repo, "call", "begin", "--tool", "send_email", "--input", '{"to": "x@y.z"}',
       "--replay", "never", env=ENV)
    gg(repo, "call", "end", "call_2", "--status", "succeeded", "--result", "sent", env=ENV)
    gg(repo, "call", "begin", "--tool", "Bash", "--input", '{"command": "make deploy"}',
       env=ENV)
    (repo / "a.txt").write_text("the user's version\n")


def run(where: Path, args: tuple[str, ...]) -> tuple[tuple[int, str, str], set[str]]:
    """(exit, stdout, stderr) with the workspace path neutral, and the top-level modules
    this process imported."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "gitguard", *args],
                          cwd=where, capture_output=True, text=True, env={**os.environ, **ENV})
    timing = [line for line in proc.stderr.splitlines() if line.startswith("import time:")]
    stderr = "".join(line + "\n" for line in proc.stderr.splitlines()
                     if not line.startswith("import time:"))
    imported = {line.split("|")[-1].strip().split(".")[0] for line in timing}
    neutral = (proc.returncode, proc.stdout.replace(str(where), "<ws>"),
               stderr.replace(str(where), "<ws>"))
    return neutral, imported


def test_the_daemon_resumes_exactly_as_the_cli(repo: Path, tmp_path: Path) -> None:
    crashed_run(repo)
    twin = tmp_path / "twin"
    subprocess.run(["cp", "-a", str(repo), str(twin)], check=True)

    without = [run(twin, args)[0] for args in SCRIPT]
    with running_daemon(repo):
        assert "call_3" in request(repo, "status")["result"]["openWindows"]
        served = [run(repo, args) for args in SCRIPT]
        # resume marked call_3 uncertain: its window is closed at once, not at the next begin
        assert request(repo, "status")["result"]["openWindows"] == []
    with_daemon = [answer for answer, _ in served]
    assert [code for code, _, _ in with_daemon] == [0, 0, 0, 0, 1]
    assert with_daemon == without
    for args, (_, imported) in zip(SCRIPT, served, strict=True):
        assert "gitguard" in imported and not HEAVY & imported, f"{args} ran in the client"
    # Resuming again without the daemon gives the daemon's answer.
    assert run(repo, ("resume", "--json"))[0] == with_daemon[1]
    gg(repo, "verify")


def test_a_fault_injection_run_resumes_in_its_own_process(repo: Path) -> None:
    """GITGUARD_FAULT kills *this* process at a named point: the daemon must not take it."""
    gg(repo, "init", env=ENV)
    gg(repo, "call", "begin", "--tool", "Bash", "--input", '{"command": "make deploy"}',
       env=ENV)
    with running_daemon(repo):
        proc = subprocess.run([sys.executable, "-m", "gitguard", "resume", "--json"], cwd=repo,
                              capture_output=True, text=True,
                              env={**os.environ, **ENV, "GITGUARD_FAULT": "resume.before_done"})
        assert proc.returncode == -9
        # the daemon was not asked: call_1's window is still open
        assert "call_1" in request(repo, "status")["result"]["openWindows"]
        proc = subprocess.run([sys.executable, "-m", "gitguard", "resume", "--json"], cwd=repo,
                              capture_output=True, text=True, env={**os.environ, **ENV})
        assert proc.returncode == 0 and '"uncertain": [\n    "call_1"\n  ]' in proc.stdout


def test_the_native_client_resumes_as_the_python_client(repo: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITGUARD_NATIVE", "1")
    crashed_run(repo)
    native = built_client()
    with running_daemon(repo):
        for args in (("explain", "--json"), ("resume", "--json"), ("resume",),
                     ("resume", "--session", "nobody")):
            mine = subprocess.run([str(native), sys.executable, *args], cwd=repo,
                                  capture_output=True,
                                  env={**os.environ, **ENV, "PYTHONPROFILEIMPORTTIME": "1"})
            assert b"import time:" not in mine.stderr, f"{args}: a Python interpreter started"
            theirs = run(repo, args)
            assert (mine.returncode, mine.stdout.decode().replace(str(repo), "<ws>"),
                    mine.stderr.decode().replace(str(repo), "<ws>")) == theirs[0], args
        assert request(repo, "status")["result"]["openWindows"] == []
