"""A daemon of another gitguard version, still running after the package was upgraded under
it: it stops by itself once it sees its package's files replaced; one that answers in a
framing this version does not read runs nothing (every hook works in-process meanwhile),
and the next `daemon start`, which a hook's autostart runs, stops it and starts this
version's."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gitguard.ipc import client
from tests.helpers.commands import gg, git
from tests.helpers.daemons import alive, store_of, wait_for

# What a daemon of an older version does, as far as this version can see: it holds the
# daemon lock, names its pid, and answers every request in its own framing.
OLD_DAEMON = textwrap.dedent("""
    import fcntl, os, signal, socket, sys
    store = sys.argv[1]
    lock = os.open(os.path.join(store, "daemon.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    with open(os.path.join(store, "daemon.pid"), "w") as fh:
        fh.write(f"{os.getpid()}\\n")
    path = os.path.join(store, "daemon.sock")
    if os.path.exists(path):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(8)
    signal.signal(signal.SIGTERM, lambda *_: (os.unlink(path), sys.exit(0)))
    while True:
        conn, _ = server.accept()
        conn.recv(65536)
        conn.sendall(b"GGB1\\x00\\x00\\x00\\x0b{\\"exit\\": 0}")
        conn.close()
""")


@contextmanager
def old_daemon(repo: Path) -> Iterator[subprocess.Popen[bytes]]:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    store = store_of(repo)
    proc = subprocess.Popen([sys.executable, "-c", OLD_DAEMON, str(store)])
    try:
        wait_for("the old daemon's socket", lambda: (store / client.SOCKET_NAME).exists())
        yield proc
    finally:
        proc.kill()
        proc.wait()
        gg(repo, "daemon", "stop", check=False)


def test_it_runs_nothing_and_daemon_start_replaces_it(repo: Path) -> None:
    with old_daemon(repo) as old:
        with pytest.raises(client.Foreign):
            client.request(str(store_of(repo)), "ping")
        begun = gg(repo, "call", "begin", "--tool", "Read", "--input", "{}")
        assert begun.stdout.strip() == "call_1", "run in-process, not by the old daemon"
        started = gg(repo, "daemon", "start").stdout
        assert old.wait(timeout=60) == 0, "stopped with SIGTERM"
        pid = client.pid_of(str(store_of(repo)))
        assert pid is not None and pid != old.pid and alive(pid), started
        assert client.request(str(store_of(repo)), "ping")["result"]["pid"] == pid


def test_a_hook_starts_the_replacement_by_itself(repo: Path) -> None:
    """The autostart a hook does when no daemon takes its request (the shim, as git runs it)."""
    with old_daemon(repo) as old:
        gg(repo, "hooks", "install")
        env = {k: v for k, v in os.environ.items() if k != "GITGUARD_NO_DAEMON"}
        head = git(repo, "rev-parse", "HEAD").strip()
        ran = subprocess.run([str(repo / ".git" / "hooks" / "post-checkout"), head, head, "1"],
                             cwd=repo, env=env, capture_output=True)
        assert ran.returncode == 0, ran.stderr
        wait_for("the old daemon to stop", lambda: old.poll() is not None)
        wait_for("this version's daemon", lambda: client.alive(str(store_of(repo))))
        assert client.pid_of(str(store_of(repo))) != old.pid


@pytest.mark.serial     # every daemon of this checkout sees the package change: run alone
def test_a_daemon_whose_package_was_reinstalled_stops_by_itself(repo: Path) -> None:
    """pip replaces the package's files under a running daemon, which would go on running
    the old code. At its next idle moment it stops as `daemon stop` does, and says why;
    the next hook starts the new version."""
    import gitguard

    gg(repo, "init", "--no-hooks", "--no-daemon")
    gg(repo, "daemon", "start")
    pid = client.pid_of(str(store_of(repo)))
    assert pid is not None and alive(pid)
    package = Path(gitguard.__file__)
    was = package.stat()
    try:
        os.utime(package, ns=(was.st_atime_ns, was.st_mtime_ns + 1_000_000_000))
        wait_for("the daemon to stop", lambda: not alive(pid), timeout=30)
    finally:
        os.utime(package, ns=(was.st_atime_ns, was.st_mtime_ns))
        gg(repo, "daemon", "stop", check=False)
    assert not (store_of(repo) / client.PID_NAME).exists()
    log = (store_of(repo) / "daemon.log").read_text()
    assert "gitguard was upgraded or reinstalled" in log, log[-2000:]
