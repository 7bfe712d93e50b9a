"""`gitguard verify` on a fresh store after every installer, its hints, and the privacy of
what `gitguard run` and the hooks write (issue 20, item 11)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from gitguard import nativeclient
from gitguard.api import Guard
from gitguard.integrations import hooklog
from gitguard.ipc import client
from tests.helpers.commands import gg, git
from tests.helpers.daemons import alive, wait_for
from tests.helpers.gitstate import GitState
from tests.helpers.native import program as built_client

ANTHROPIC = "sk-ant-api03-" + "Abc123xyz" * 5
GITHUB = "ghp_FAKEabcdefghijklmnopqrstuvwxyz012345"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _store(repo: Path) -> Path:
    return repo / ".git" / "gitguard"


def _programs(store: Path) -> list[Path]:
    return [p for p in store.rglob("*") if p.is_file() and os.access(p, os.X_OK)]


@pytest.mark.parametrize("daemon", [False, True], ids=["no daemon", "daemon"])
@pytest.mark.parametrize("native", ["0", "1"], ids=["python", "native client"])
def test_a_fresh_store_verifies_after_every_installer(repo: Path, state_of: GitState,
                                                      daemon: bool, native: str) -> None:
    """init, integrate claude-code, integrate codex, hooks install: verify exits 0, the
    store holds no program (the native client is the package's), and the hooks run."""
    if native == "1":
        built_client()
    env = {"GITGUARD_NATIVE": native, "GITGUARD_NO_DAEMON": "0" if daemon else "1"}
    try:
        gg(repo, "init", env=env)
        gg(repo, "integrate", "claude-code", env=env)
        gg(repo, "integrate", "codex", env=env)
        gg(repo, "hooks", "install", env=env)
        checked = gg(repo, "verify", "--json", env=env, check=False)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert json.loads(checked.stdout)["problems"] == []
        assert _programs(_store(repo)) == []
        shim = (repo / ".git" / "hooks" / "post-checkout").read_text()
        assert (f"\nnative={nativeclient.PROGRAM}  #" in shim) == (native == "1")
        assert (client.pid_of(str(_store(repo))) is not None) == daemon
        # The hooks run (through the client where there is one) and leave the store valid.
        git(repo, "checkout", "-q", "-b", "topic")
        git(repo, "checkout", "-q", "main")
        assert not (_store(repo) / hooklog.LOG_NAME).exists()
        gg(repo, "verify", env=env)
    finally:
        pid = client.pid_of(str(_store(repo)))
        if pid is not None:
            gg(repo, "daemon", "stop")
            wait_for("the daemon to end", lambda: not alive(pid), timeout=30)


def test_the_client_an_older_gitguard_compiled_into_the_store_goes(repo: Path) -> None:
    """Older versions compiled the client into <store>/bin and wrote hook commands and
    shims naming it: verify says so, `integrate` and `hooks install` remove it, and what
    the old commands run is then the Python entry."""
    gg(repo, "init", "--no-hooks", "--no-daemon")
    old = nativeclient.old_program(_store(repo))
    old.parent.mkdir(mode=0o700)
    old.write_bytes(b"#!/bin/sh\nexit 99\n")
    old.chmod(0o700)
    (old.parent / "gitguard.key").write_text("old\n")
    (old.parent / "gitguard.key").chmod(0o600)
    found = json.loads(gg(repo, "verify", "--json", check=False).stdout)["problems"]
    assert [p for p in found if "older gitguards built" in p] and len(found) == 1
    old_command = (f'c="$CLAUDE_PROJECT_DIR"/.git/gitguard/bin/gitguard; if [ -x "$c" ]; '
                   f'then exec "$c" hook claude-code; fi; exec {sys.executable} -m gitguard '
                   "hook claude-code")
    gg(repo, "integrate", "claude-code")
    assert not old.parent.exists() and _programs(_store(repo)) == []
    event = json.dumps({"session_id": "s", "cwd": str(repo), "hook_event_name": "PreToolUse",
                        "tool_name": "Read", "tool_input": {}, "tool_use_id": "toolu_old"})
    import subprocess

    ran = subprocess.run(["sh", "-c", old_command], cwd=repo, input=event, text=True,
                         capture_output=True, env={**os.environ, "CLAUDE_PROJECT_DIR": str(repo)})
    assert ran.returncode == 0 and json.loads(ran.stdout) == {}, ran.stderr
    old.parent.mkdir(mode=0o700)
    old.write_bytes(b"#!/bin/sh\nexit 99\n")
    old.chmod(0o700)
    gg(repo, "hooks", "install")
    assert not old.parent.exists()
    assert gg(repo, "verify").returncode == 0


def test_run_output_is_redacted_and_private(repo: Path, state_of: GitState) -> None:
    """What the command printed passes through unchanged; what is stored has no secret and
    is 0600 like every store file (it was the raw stream, 0644)."""
    script = f"echo key {ANTHROPIC}; echo token {GITHUB} >&2"
    ran = gg(repo, "run", "--", "sh", "-c", script)
    assert ran.stdout == f"key {ANTHROPIC}\n" and ran.stderr == f"token {GITHUB}\n"
    entry = json.loads(gg(repo, "ledger", "--json").stdout)[-1]
    artifacts = _store(repo) / "artifacts"
    stdout = artifacts / f"stdout_{entry['callId']}.txt"
    stderr = artifacts / f"stderr_{entry['callId']}.txt"
    assert stdout.read_bytes().startswith(b"key ") and stderr.read_bytes().startswith(b"token ")
    for stored in artifacts.iterdir():
        data = stored.read_bytes()
        assert ANTHROPIC.encode() not in data and GITHUB.encode() not in data, stored
        assert _mode(stored) == 0o600, f"{stored} is {_mode(stored):o}"
    gg(repo, "verify")
    state_of.assert_unchanged(repo)


def test_the_hook_error_log_is_private(tmp_path: Path) -> None:
    """A hook's traceback can quote the payload it failed on: the log is 0600 whatever
    the umask lets a plain open() make (it was 0644)."""
    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    old = os.umask(0o022)
    try:
        where = hooklog.log_failure(store, "claude-code PostToolUse", ValueError("payload"))
    finally:
        os.umask(old)
    assert where == str(store / hooklog.LOG_NAME)
    assert _mode(store / hooklog.LOG_NAME) == 0o600
    assert "ValueError: payload" in (store / hooklog.LOG_NAME).read_text()


def test_each_problem_has_its_own_hint(repo: Path) -> None:
    """A permission problem is not told to resume; a damaged checkpoint is; with two kinds
    each line carries its own hint (the one hint was about corrupt checkpoints)."""
    gg(repo, "init", "--no-daemon")
    gg(repo, "checkpoint")
    store = _store(repo)
    (store / "store.json").chmod(0o644)
    alone = gg(repo, "verify", check=False)
    assert alone.returncode == 1
    assert "store.json is 0644, should be 0600" in alone.stdout
    hint = alone.stderr.splitlines()[-1]
    assert hint.startswith("Hint: run the chmod shown") and "resume" not in hint

    ckpt = sorted((store / "checkpoints").glob("ckpt_*.json"))[0]
    ckpt.write_bytes(ckpt.read_bytes().replace(b'"manual"', b'"post"'))
    both = json.loads(gg(repo, "verify", "--json", check=False).stdout)
    hints = dict(zip(both["problems"], both["hints"], strict=True))
    assert len(hints) == 2
    for problem, its_hint in hints.items():
        if "store.json" in problem:
            assert its_hint.startswith("run the chmod shown")
        else:
            assert "sha256 mismatch" in problem and "gitguard resume" in its_hint
    human = gg(repo, "verify", check=False)
    assert human.stdout.count("  hint: ") == 2
    assert human.stderr.splitlines()[-1] == "Hint: each problem above has its own hint"



def test_the_result_tail_holds_no_piece_of_a_redacted_token(repo: Path) -> None:
    """The result keeps the output's last 4 KiB. Cut from the raw stream, the cut could
    fall inside a token, past the prefix the redactor knows it by, and leave the rest of
    the secret in the ledger's result; cut from the redacted stream it cannot."""
    token = "sk-ant-api03-" + "Qw7Rt2Zx9Lp4" * 5
    after = 4096 - (len(token) + 1 - 23)      # the raw tail starts 23 bytes into the token
    program = f"import sys; sys.stdout.write({token!r} + '\\n' + 'y' * {after})"
    gg(repo, "run", "--", sys.executable, "-c", program)
    entry = json.loads(gg(repo, "ledger", "--json").stdout)[-1]
    result = Guard.open(repo).store.read_artifact(entry["resultRef"])
    assert b"y" * 100 in result
    assert token[23:].encode() not in result and token[30:].encode() not in result
