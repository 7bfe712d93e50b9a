"""The native hook client (`gitguard/nativeclient.c`): compiled with the package, it answers
as the Python client does while a daemon runs, and runs the Python entry (same arguments,
same stdin) whenever the daemon does not run the command; nothing is compiled at run time
and nothing executable is put in the store."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gitguard import nativeclient
from gitguard.integrations import claude_settings
from gitguard.ipc import client, wire
from gitguard.ledger import git_moves
from gitguard.storage.store import Store
from gitguard.workspace import discover
from tests.helpers import native
from tests.helpers.commands import gg, git
from tests.helpers.daemons import running_daemon, store_of
from tests.helpers.hooks import payload, run_git, with_branch_and_remote

NATIVE = nativeclient.PROGRAM


if not native.built():
    pytest.skip(native.NO_COMPILER, allow_module_level=True)


@pytest.fixture(autouse=True)
def with_native(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITGUARD_NATIVE", "1")


def _built(repo: Path) -> list[str]:
    """The client's command line: the program and the interpreter it falls back to."""
    gg(repo, "init", "--no-hooks", "--no-daemon")
    return [str(NATIVE), sys.executable]


def _run(argv: list[str], repo: Path, stdin: bytes | None = None,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, cwd=repo, input=stdin, capture_output=True,
                          env={**os.environ, **(env or {})})


def _python(repo: Path, *args: str, stdin: bytes | None = None
            ) -> subprocess.CompletedProcess[bytes]:
    return _run([sys.executable, "-m", "gitguard", *args], repo, stdin)


def test_the_hook_command_is_one_with_or_without_the_client(
        repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the client (GITGUARD_NATIVE=0, or a package built with no compiler) the
    command starts Python; with it, the same command runs the client, which answers
    through the daemon without starting the interpreter it names."""
    gg(repo, "init", "--no-hooks", "--no-daemon")
    ws = discover(repo)
    monkeypatch.setenv("GITGUARD_NATIVE", "0")
    claude_settings.integrate(ws)
    path = repo / ".claude" / "settings.local.json"
    command = json.loads(path.read_text())["hooks"]["PreToolUse"][-1]["hooks"][-1]["command"]
    assert str(NATIVE) not in command
    event = payload("claude_code/pre_tool_use_edit.json", repo)
    env = {"CLAUDE_PROJECT_DIR": str(repo)}
    ran = _run(["sh", "-c", command], repo, json.dumps(event).encode(), env)
    assert (ran.returncode, json.loads(ran.stdout)) == (0, {}), ran.stderr
    monkeypatch.setenv("GITGUARD_NATIVE", "1")
    assert claude_settings.integrate(ws).changed
    command = json.loads(path.read_text())["hooks"]["PreToolUse"][-1]["hooks"][-1]["command"]
    assert command == claude_settings.command(sys.executable, NATIVE)
    broken = claude_settings.command("/nonexistent/python3", NATIVE)
    with running_daemon(repo):
        event = {**event, "tool_use_id": "toolu_native"}
        ran = _run(["sh", "-c", broken], repo, json.dumps(event).encode(), env)
        assert (ran.returncode, json.loads(ran.stdout)) == (0, {}), ran.stderr
    ledger = {e["callId"] for e in json.loads(gg(repo, "ledger", "--json").stdout)}
    assert {"toolu_01EditAppPy9fQ2", "toolu_native"} <= ledger
    assert not [p for p in store_of(repo).rglob("*") if p.is_file() and os.access(p, os.X_OK)]


def test_the_client_and_the_python_client_agree_on_taking_a_request() -> None:
    source = nativeclient.SOURCE.read_text()
    assert f"#define GG_TAKEN {client.TAKEN.decode()!r}" in source
    assert f"#define GG_TAKE_S {client.TAKE_S:g}\n" in source
    assert f'#define MAGIC "{wire.MAGIC.decode()}"' in source
    assert f"#define MAX_DEPTH {wire.MAX_DEPTH} " in source


def test_with_a_daemon_it_answers_what_the_python_client_answers(repo: Path) -> None:
    native = _built(repo)
    with running_daemon(repo):
        begun = _run([*native, "call", "begin", "--tool", "Edit", "--input",
                      '{"file_path": "src/app.py"}', "--writes", "src/app.py", "--json"], repo)
        assert begun.returncode == 0 and begun.stderr == b"", begun.stderr
        entry = json.loads(begun.stdout)
        (repo / "src" / "app.py").write_text("def main():\n    return 2\n")
        ended = _run([*native, "call", "end", entry["callId"], "--status", "succeeded",
                      "--result-file", "-"], repo, stdin=b"tests passed\n")
        assert ended.returncode == 0, ended.stderr
        assert ended.stdout == f"{entry['callId']} succeeded: 1 file(s) changed\n".encode()
        for bad in (["call", "end", entry["callId"], "--status", "succeeded"],   # finished
                    ["call", "end", "call_404"],                                # unknown
                    ["call", "begin", "--input", "{}"]):                        # usage
            mine, theirs = _run([*native, *bad], repo), _python(repo, *bad)
            assert (mine.returncode, mine.stdout, mine.stderr) == \
                (theirs.returncode, theirs.stdout, theirs.stderr), bad
            assert mine.returncode in (1, 2) and mine.stderr.startswith((b"Error:", b"Usage:"))
        event = json.dumps(payload("claude_code/pre_tool_use_edit.json", repo)).encode()
        hooked = _run([*native, "hook", "claude-code"], repo, stdin=event)
        assert (hooked.returncode, json.loads(hooked.stdout)) == (0, {}), hooked.stderr
        served = json.loads(gg(repo, "daemon", "status", "--json").stdout)
    assert served["incremental"] >= 2, "the daemon served the calls"
    ledger = {e["callId"]: e for e in json.loads(gg(repo, "ledger", "--json").stdout)}
    assert ledger[entry["callId"]]["status"] == "succeeded"
    assert ledger[entry["callId"]]["filePatches"][0]["path"] == "src/app.py"
    assert ledger["toolu_01EditAppPy9fQ2"]["status"] == "started"


def test_without_a_daemon_it_runs_the_python_entry_with_the_same_stdin(repo: Path) -> None:
    native = _built(repo)
    assert not (store_of(repo) / "daemon.sock").exists()
    tool_input = b'{"file_path": "src/app.py", "content": "' + b"x" * 200_000 + b'"}'
    begun = _run([*native, "call", "begin", "--tool", "Write", "--input-file", "-",
                  "--json", "--writes", "src/app.py"], repo, stdin=tool_input,
                 env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert begun.returncode == 0, begun.stderr
    assert b"import time:" in begun.stderr, "the Python entry ran"
    entry = json.loads(begun.stdout)
    stored = Store(discover(repo)).read_artifact(entry["inputRef"])     # the call's journal
    assert json.loads(stored) == json.loads(tool_input), "stdin reached the fallback whole"
    other = _run([*native, "-C", str(repo), "ledger", "--json"], repo)
    assert other.returncode == 0 and json.loads(other.stdout)[0]["callId"] == entry["callId"]
    bad = ["call", "end", entry["callId"], "--status", "bogus"]
    mine, theirs = _run([*native, *bad], repo), _python(repo, *bad)
    assert (mine.returncode, mine.stderr) == (theirs.returncode, theirs.stderr) == \
        (2, theirs.stderr) and theirs.stderr.startswith(b"Usage:")


def _listener(sock_path: Path, answer: str, as_user: int | None = None
              ) -> subprocess.Popen[str]:
    """A socket at the daemon's place that is no gitguard daemon: it answers every
    connection with `answer` ("garbage" after taking the request, "decline") or, as
    another user, never."""
    code = f"""
import json, os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind({str(sock_path)!r})
if {as_user!r} is not None:
    os.setuid({as_user!r})
s.listen(8)
print("ready", flush=True)
got = []
while True:
    if {as_user!r} is not None:
        sys.stdin.readline()
        s.setblocking(False)
        try:
            while True:
                c, _ = s.accept()
                c.settimeout(5)
                got.append(len(c.recv(1 << 20)))
        except BlockingIOError:
            print(json.dumps(got), flush=True)
            break
    c, _ = s.accept()
    data = b""
    while chunk := c.recv(65536):
        data += chunk
    if {answer!r} == "garbage":
        c.sendall(b" GGW1 taken, then not an answer")
    else:
        c.sendall({wire.encode({"fallback": True, "reason": "nope"})!r})
    c.close()
"""
    proc = subprocess.Popen([sys.executable, "-I", "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_a_broken_answer_is_an_error_and_a_declining_daemon_a_fallback(repo: Path) -> None:
    native = _built(repo)
    sock = store_of(repo) / "daemon.sock"
    broken = _listener(sock, "garbage")
    try:
        said = _run([*native, "call", "begin", "--tool", "Read", "--json"], repo)
        theirs = _python(repo, "call", "begin", "--tool", "Read", "--json")
    finally:
        broken.kill()
        broken.wait()
    assert said.returncode == theirs.returncode == 3
    assert said.stderr.startswith(b"Error: the gitguard daemon stopped while handling this:")
    assert b"Hint: check `gitguard ledger`" in said.stderr
    sock.unlink()
    declining = _listener(sock, "decline")
    try:
        done = _run([*native, "call", "begin", "--tool", "Read", "--json"], repo)
    finally:
        declining.kill()
        declining.wait()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "started", "done in-process by the fallback"


def test_a_socket_of_another_user_gets_no_request(repo: Path) -> None:
    native = _built(repo)
    assert os.stat(store_of(repo)).st_mode & 0o777 == 0o700
    if os.getuid() == 0:        # as root the test can be another user for a moment
        listener = _listener(store_of(repo) / "daemon.sock", "garbage", as_user=65534)
        try:
            done = _run([*native, "call", "begin", "--tool", "Read", "--json"], repo)
            assert listener.stdin is not None and listener.stdout is not None
            listener.stdin.write("report\n")
            listener.stdin.flush()
            received = json.loads(listener.stdout.readline())
        finally:
            listener.kill()
            listener.wait()
        assert done.returncode == 0, done.stderr
        assert received and not any(received), "connected, checked the peer, sent nothing"
    else:   # another user's socket cannot be made: the store's mode keeps others out
        done = _run([*native, "call", "begin", "--tool", "Read", "--json"], repo)
        assert done.returncode == 0, done.stderr


def test_the_git_shims_run_it_and_no_interpreter_starts_while_the_daemon_answers(
        repo: Path) -> None:
    with_branch_and_remote(repo)
    gg(repo, "hooks", "install")
    shim = (repo / ".git" / "hooks" / "post-checkout").read_text()
    assert f"\nnative={NATIVE}  #" in shim
    gg(repo, "checkpoint")
    other = git(repo, "rev-parse", "other").strip()
    with running_daemon(repo):
        moved = run_git(repo, "checkout", "-q", "other", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert moved.returncode == 0 and "import time:" not in moved.stderr, moved.stderr
    moves = git_moves.summary(Store(discover(repo)))["moves"]
    assert ("post-checkout", other) in [(m["hook"], m["newHead"]) for m in moves]
    back = run_git(repo, "checkout", "-q", "main", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert back.returncode == 0 and "import time:" in back.stderr, "no daemon: Python records"


def test_a_malformed_request_is_refused_and_the_daemon_serves_on(
        repo: Path) -> None:
    native = _built(repo)
    with running_daemon(repo):
        client_side = socket.socket(socket.AF_UNIX)
        client_side.connect(str(store_of(repo) / "daemon.sock"))
        client_side.sendall(wire.MAGIC + b"\x00\x00\x00\x09d")    # truncated request
        client_side.shutdown(socket.SHUT_WR)
        answer = wire.decode(b"".join(iter(lambda: client_side.recv(4096), b"")))
        assert answer["exit"] == 1
        assert answer["stderr"].startswith("Error: the gitguard daemon refused a request")
        client_side.close()
        ok = _run([*native, "call", "begin", "--tool", "Read"], repo)
        assert ok.returncode == 0 and ok.stdout.startswith(b"call_"), ok.stderr


@pytest.mark.serial
def test_a_hung_daemon_is_given_up_on_and_the_call_runs_in_python(repo: Path) -> None:
    """SIGSTOP: the native client waited 300 s for an answer. It now waits GG_TAKE_S for
    the worker to take the request, then runs the Python entry, and the daemon, once it
    runs again, skips the request: one call, recorded once."""
    import signal

    from gitguard.ledger import journal as ledger

    native = _built(repo)
    with running_daemon(repo) as pid:
        os.kill(pid, signal.SIGSTOP)
        try:
            begun = _run([*native, "call", "begin", "--tool", "Write", "--writes",
                          "a.txt", "--input", '{"file_path": "a.txt"}'], repo)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert begun.returncode == 0, begun.stderr
        call_id = begun.stdout.decode().strip()
        ended = _run([*native, "call", "end", call_id, "--status", "succeeded"], repo)
        assert ended.returncode == 0, ended.stderr
    assert list(ledger.read(Store(discover(repo))).entries) == [call_id]
    assert "gave up before its cli request ran" in (
        store_of(repo) / "daemon.log").read_text()
