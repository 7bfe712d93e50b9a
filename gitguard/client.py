"""Talking to the daemon with the standard library alone.

This is the per-tool-call path: an agent hook runs `gitguard call begin` for every
tool call, so it must not import pygit2, pydantic, click or watchdog (about 110 ms)
when a daemon can do the work. Protocol: one JSON request per connection on the
unix socket `<store>/daemon.sock`; the client shuts its side for writing; the
daemon writes TAKEN (a space) when its worker starts on the request, then one JSON
object, and closes (an answer given at once, a refusal or a fallback, has no TAKEN):

    {"op": "call.begin", "args": {"argv": [...], "cwd": "...", "env": {...},
                                  "stdin": "<base64>"}}
    -> {"exit": 0, "stdout": "...", "stderr": "..."}
    -> {"fallback": true, "reason": "..."}      the caller does the work itself

Byte-exact output travels as text with surrogate escapes (JSON escapes them).

JSON goes through the C accelerator `_json` directly: the `json` package imports
`re`, `enum` and `collections` (12-15 ms per process start, more than the rest of
this path together); `dumps` and `loads` give what `json.dumps(ensure_ascii=True)`
and `json.loads` give (a test compares them).
"""

from __future__ import annotations

import _socket  # not `socket`: that module pulls in selectors and enum, ~3 ms per call
import os
import struct

try:
    import _json
except ImportError:     # an interpreter without the accelerator: the slow, same result
    _json = None  # type: ignore[assignment]

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: `typing` costs milliseconds to import
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

SOCKET_NAME = "daemon.sock"
PID_NAME = "daemon.pid"
LOCK_NAME = "daemon.lock"
_MAX_SUN_PATH = 100     # sockaddr_un holds 108 bytes; longer paths go through /proc
TAKEN = b" "            # the daemon's worker starts on the request (JSON whitespace)
TAKE_S = 5.0            # how long a client waits for that before doing the work itself


# The command lines `gitguard` hands to the daemon (gitguard.entry), by their leading
# words, and the daemon's op for each (gitguard.daemon.OPS answers them).
FORWARDED = {("call", "begin"): "call.begin", ("call", "end"): "call.end", ("hook",): "hook",
             # run after an agent crash, when the daemon usually still runs with the
             # ledger read and the workspace tree current (gitguard.recovery_daemon)
             ("resume",): "resume", ("explain",): "explain"}


class Unreachable(Exception):
    """No daemon took the request: the caller should do the work itself."""


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
        payload = dumps({"op": op, "args": dict(args or {})}).encode()
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
    text = b"".join(chunks).decode("utf-8", "replace")
    if not text.strip(_WHITESPACE):
        raise Broken("the daemon closed the connection without an answer")
    try:
        answer = loads(text)
    except ValueError:
        raise Broken("the daemon's answer is not JSON") from None
    if not isinstance(answer, dict):
        raise Broken("the daemon's answer is not an object")
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
    encoded = None
    if stdin is not None:
        import binascii  # not base64: it imports re

        encoded = binascii.b2a_base64(stdin, newline=False).decode()
    return {"argv": argv, "cwd": cwd, "env": dict(os.environ), "stdin": encoded}


def out_bytes(text: object) -> bytes:
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


def _no_default(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _constant(name: str) -> float:
    return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}[name]


class _Context:
    """What `_json.make_scanner` reads from a `json.JSONDecoder`: json.loads' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_constant)
    memo: dict[str, str] = {}


_WHITESPACE = " \t\n\r"
_encode = (None if _json is None else
           _json.make_encoder(None, _no_default, _json.encode_basestring_ascii, None, ": ",
                              ", ", False, False, True))
_scan = None if _json is None else _json.make_scanner(_Context())  # type: ignore[arg-type]


def dumps(value: object) -> str:
    """`json.dumps(value, ensure_ascii=True)`."""
    if _encode is None:
        import json

        return json.dumps(value, ensure_ascii=True)
    return "".join(_encode(value, 0))


def loads(text: str) -> Any:
    """`json.loads(text)` for a str; ValueError when it is not one JSON value."""
    if _scan is None:
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, end = _scan(text, start)
    except StopIteration:
        raise ValueError("not JSON") from None
    if text[end:].strip(_WHITESPACE):
        raise ValueError("extra data after the JSON value")
    return value
