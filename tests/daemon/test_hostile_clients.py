"""A daemon that cannot be silenced: a poisoned request, 1,000 idle connections, 100
slow clients and a hung daemon each leave calls working and attributed, and `daemon
status` tells running, not answering and not running apart."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from gitguard.calls import attribution_log
from gitguard.ipc import client, wire
from gitguard.ledger import journal
from gitguard.storage.store import Store
from gitguard.workspace import discover
from tests.helpers.commands import gg
from tests.helpers.daemons import running_daemon, store_of

_DEEP = b"d\x00\x00\x00\x02" + b"s\x00\x00\x00\x02op" + b"s\x00\x00\x00\x03cli" \
    + b"s\x00\x00\x00\x04args" + b"l\x00\x00\x00\x01" * 100_000 + b"N"
POISON = wire.MAGIC + len(_DEEP).to_bytes(4, "big") + _DEEP


def owners(repo: Path) -> dict[str, tuple[str, str]]:
    return {p: (r.owner, r.confidence)
            for p, r in attribution_log.latest(Store(discover(repo))).items()}


def raw_ask(path: Path, payload: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(30)     # a client's bound, not a speed target
        sock.connect(str(path))
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        return b"".join(iter(lambda: sock.recv(65536), b""))


def test_poison_idle_and_slow_clients_then_a_call_is_still_the_calls(repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    with running_daemon(repo) as pid:
        sock_path = store_of(repo) / "daemon.sock"
        refused = wire.decode(raw_ask(sock_path, POISON))
        assert refused["exit"] == 1 and "refused a request" in refused["stderr"]
        idle = [socket.socket(socket.AF_UNIX) for _ in range(1000)]
        slow = [socket.socket(socket.AF_UNIX) for _ in range(100)]
        try:
            for sock in idle + slow:
                sock.connect(str(sock_path))
            for sock in slow:
                sock.sendall(wire.encode({"op": "ping", "args": {}})[:12])   # then nothing
            # generous client bounds (the default is 5 s to take, then in-process)
            answer = client.request(str(store_of(repo)), "ping", timeout=30,
                                    take_timeout=30)
            assert answer["result"]["pid"] == pid
            begun = gg(repo, "call", "begin", "--tool", "Write", "--writes", "new.txt",
                       "--input", '{"file_path": "new.txt"}')
            call_id = begun.stdout.strip()
            (repo / "new.txt").write_text("written by the call\n")
            ended = gg(repo, "call", "end", call_id, "--status", "succeeded")
            assert ended.stdout.startswith(f"{call_id} succeeded: 1 file(s) changed")
            # the daemon's live attribution, not a fallback: it recorded the write exactly
            client.request(str(store_of(repo)), "flush", timeout=30, take_timeout=30)
            assert owners(repo)["new.txt"] == (call_id, "exact")
        finally:
            for sock in idle + slow:
                sock.close()
        assert gg(repo, "daemon", "status", "--json").returncode == 0
    log = (store_of(repo) / "daemon.log").read_text()
    assert "Traceback" not in log


@pytest.mark.serial
def test_a_hung_daemon_is_given_up_on_and_runs_nothing_twice(repo: Path) -> None:
    """SIGSTOP: the socket still accepts (the kernel's backlog) and nobody answers. The
    client gives up after TAKE_S and works in-process; once the daemon runs again it
    skips the request whose client has gone: one call, recorded once."""
    gg(repo, "init", "--no-hooks", "--no-daemon")
    with running_daemon(repo) as pid:
        os.kill(pid, signal.SIGSTOP)
        try:
            began = time.monotonic()
            status = gg(repo, "daemon", "status", check=False)
            assert status.returncode == 1, status
            assert status.stderr.startswith(f"Error: the daemon (pid {pid}) runs but does "
                                            "not answer"), status.stderr
            assert "\nHint: " in status.stderr
            begun = gg(repo, "call", "begin", "--tool", "Write", "--writes", "a.txt",
                       "--input", '{"file_path": "a.txt"}')
            assert time.monotonic() - began < 120, "gave up within the clients' bounds"
            call_id = begun.stdout.strip()
        finally:
            os.kill(pid, signal.SIGCONT)
        (repo / "a.txt").write_text("a\n")
        gg(repo, "call", "end", call_id, "--status", "succeeded")
        assert client.request(str(store_of(repo)), "ping", timeout=30,
                              take_timeout=30)["result"]["pid"] == pid
        state = journal.read(Store(discover(repo)))
        assert list(state.entries) == [call_id]
        assert state.entries[call_id].status == "succeeded"
    assert "gave up before its cli request ran" in (
        store_of(repo) / "daemon.log").read_text()


def test_daemon_status_exit_codes(repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    stopped = gg(repo, "daemon", "status", "--json", check=False)
    assert stopped.returncode == 6 and json.loads(stopped.stdout)["state"] == "not running"
    with running_daemon(repo):
        running = gg(repo, "daemon", "status", "--json", check=False)
        assert running.returncode == 0 and json.loads(running.stdout)["state"] == "running"


@pytest.mark.serial
def test_the_python_api_gives_up_on_a_hung_daemon_and_runs_in_process(repo: Path) -> None:
    from gitguard.api import Guard

    gg(repo, "init", "--no-hooks", "--no-daemon")
    with running_daemon(repo) as pid:
        os.kill(pid, signal.SIGSTOP)
        try:
            with Guard.open(repo) as guard:
                entry = guard.begin_call("Read", {"file_path": "README.md"})
                guard.end_call(entry.call_id, "succeeded")
        finally:
            os.kill(pid, signal.SIGCONT)
        assert client.request(str(store_of(repo)), "ping", timeout=30,
                              take_timeout=30)["result"]["pid"] == pid
    state = journal.read(Store(discover(repo)))
    assert list(state.entries) == [entry.call_id]
    assert state.entries[entry.call_id].status == "succeeded"
