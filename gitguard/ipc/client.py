"""Talking to the daemon with the standard library alone.

This is the per-tool-call path: an agent hook runs `gitguard call begin` for every
tool call, so it must not import pygit2, pydantic, click or watchdog (about 110 ms)
when a daemon can do the work. Protocol: one request per connection on the unix socket
`<store>/daemon.sock`, in gitguard.ipc.wire's framing; the client shuts its side for
writing; the daemon writes TAKEN (a space) when its worker starts on the request, then
the answer, and closes (an answer given at once, a refusal or a fallback, has no TAKEN):

    {"op": "cli", "args": {"argv": [...], "cwd": "...", "env": {...}, "stdin": b"..."}}
    -> {"exit": 0, "stdout": "...", "stderr": "..."}
    -> {"fallback": True, "reason": "..."}      the caller does the work itself

Byte-exact output travels as text with surrogate escapes.
"""

from __future__ import annotations

# Not `socket`: that module pulls in selectors and enum, 6.9 ms against 0.34 for `_socket`
# (-X importtime, median of 21, 2 busy cores; ~3 ms on an idle machine), on every hook call.
# `_socket` is the C module `socket` wraps; tests/test_kept_library_uses.py fails if it
# stops being that.
import _socket
import os
import struct

from gitguard.ipc import wire

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: `typing` costs milliseconds to import
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

SOCKET_NAME = "daemon.sock"
UNUSABLE_NAME = "daemon.unusable"   # why the last daemon could not serve (JSON)
UNUSABLE_RETRY_S = 600.0            # hooks start no daemon for this long after that
PID_NAME = "daemon.pid"
LOCK_NAME = "daemon.lock"
_MAX_SUN_PATH = 100     # sockaddr_un holds 108 bytes; longer paths go through /proc
TAKEN = b" "            # the daemon's worker starts on the request (before its answer)
TAKE_S = 5.0            # how long a client waits for that before doing the work itself


# The command lines `gitguard` hands to the daemon (gitguard.cli.entry), by their leading
# words, and the daemon's op for each (gitguard.daemon.daemon.OPS answers them).
FORWARDED = {("call", "begin"): "call.begin", ("call", "end"): "call.end", ("hook",): "hook",
             # run after an agent crash, when the daemon usually still runs with the
             # ledger read and the workspace tree current (gitguard.daemon.recovery_requests)
             ("resume",): "resume", ("explain",): "explain"}


class Unreachable(Exception):
    """No daemon took the request: the caller should do the work itself."""


class Foreign(Unreachable):
    """A daemon answered in another framing: one of another gitguard version, still running
    after an upgrade. It ran nothing; `control.start` replaces it."""


class Broken(Exception):
    """The daemon took the request but gave no answer (it died or hung)."""


def request(store: str, op: str, args: Mapping[str, Any] | None = None,
            timeout: float = 300.0, take_timeout: float = TAKE_S) -> dict[str, Any]:
    """Send one request; Unreachable when no daemon took it (the caller does the work
    itself), Broken when one took it and did not answer.

    The daemon's worker writes TAKEN before it runs a request. Waiting for that is
    bounded by `take_timeout`: a daemon that is deaf, hung or stuck behind a long request
    is given up on, and the worker skips a request whose client has gone, so it runs in
    one place only. `timeout` bounds the wait for the answer once taken."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    dir_fd = -1
    try:
        sock.settimeout(min(2.0, take_timeout))
        address = os.path.join(store, SOCKET_NAME)
        if len(os.fsencode(address)) > _MAX_SUN_PATH:
            try:
                dir_fd = os.open(store, os.O_PATH | os.O_DIRECTORY)
            except OSError as exc:      # no store yet (before `init`), or none to reach
                raise Unreachable(f"no daemon at {store}: {exc.strerror or exc}") from None
            address = f"/proc/self/fd/{dir_fd}/{SOCKET_NAME}"
        try:
            sock.connect(address)
        except OSError as exc:
            raise Unreachable(f"no daemon at {store}: {exc.strerror or exc}") from None
        peer_pid, peer_uid, _ = struct.unpack("3i", sock.getsockopt(
            _socket.SOL_SOCKET, _socket.SO_PEERCRED, struct.calcsize("3i")))
        if peer_uid != os.getuid():
            raise Unreachable("the daemon socket belongs to another user")
        if peer_pid == os.getpid():
            raise Unreachable("this process is the daemon")
        payload = wire.encode({"op": op, "args": dict(args or {})})
        try:
            sock.sendall(payload)
            sock.shutdown(_socket.SHUT_WR)
        except OSError as exc:
            raise Unreachable(f"the daemon did not take the request: {exc}") from None
        chunks = [_taken(sock, take_timeout)]
        sock.settimeout(timeout)
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except OSError as exc:
            raise Broken(f"the daemon did not answer: {exc}") from None
    finally:
        sock.close()
        if dir_fd >= 0:
            os.close(dir_fd)
    data = b"".join(chunks)
    taken = data.startswith(TAKEN)
    try:
        answer = wire.decode(data[len(TAKEN):] if taken else data)
    except ValueError:
        if not taken:   # not run (a daemon of another gitguard version says so its way)
            raise Foreign("the daemon's answer is not in gitguard's framing") from None
        raise Broken("the daemon closed the connection without an answer" if
                     len(data) == len(TAKEN) else "the daemon's answer is malformed") from None
    if not isinstance(answer, dict):
        raise Broken("the daemon's answer is not a dict")
    if answer.get("fallback"):
        raise Unreachable(str(answer.get("reason", "the daemon declined")))
    return answer


def _taken(sock: Any, take_timeout: float) -> bytes:
    """The first bytes the daemon sends (TAKEN, or a whole answer it gives at once);
    Unreachable when it sends nothing within `take_timeout`, or closes first: then it has
    not run the request and never will."""
    sock.settimeout(take_timeout)
    try:
        first = sock.recv(65536)
    except TimeoutError:
        # From here the worker's TAKEN fails (EPIPE) and it skips the request. What it
        # sent before is still queued here: then it runs, and its answer cannot arrive.
        try:
            sock.shutdown(_socket.SHUT_RD)
            late = sock.recv(65536)
        except OSError:
            late = b""
        if late:
            raise Broken("the daemon took the request just as this client gave up "
                         f"waiting ({take_timeout:g} s)") from None
        raise Unreachable(f"the daemon did not take the request within {take_timeout:g} s"
                          ) from None
    except OSError as exc:
        raise Unreachable(f"the daemon did not take the request: {exc}") from None
    if not first:
        raise Unreachable("the daemon closed the connection before taking the request")
    return bytes(first)


def cli_args(argv: list[str], cwd: str, stdin: bytes | None) -> dict[str, Any]:
    return {"argv": argv, "cwd": cwd, "env": dict(os.environ), "stdin": stdin}


def out_bytes(text: object) -> bytes:
    if isinstance(text, bytes):
        return text
    return str(text or "").encode("utf-8", "surrogateescape")


def alive(store: str) -> bool:
    """A daemon answers on this store's socket."""
    try:
        request(store, "ping", timeout=5.0, take_timeout=5.0)
    except (Unreachable, Broken):
        return False
    return True


def pid_of(store: str) -> int | None:
    try:
        with open(os.path.join(store, PID_NAME)) as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
