"""The daemon's socket: accept, check the peer, hand the request to the worker, answer.

The accept thread reads each request itself (a client sends it whole right after
connecting; only a slow one gets a thread of its own) and never touches git or the
store: each request becomes a `Job` on the worker's queue, so requests from any number
of processes run one at a time, in arrival order, on the thread that owns pygit2, and
the worker sends the answer.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import socket
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitguard.client import SOCKET_NAME, out_bytes
from gitguard.engine import Item, Job

Handler = Callable[[dict[str, Any]], dict[str, Any]]
_MAX_REQUEST = 64 * 1024 * 1024
QUICK_READ_S = 0.05     # how long the accept thread waits for a request (see _take)
MAGIC = b"GGB1"         # the native client's framing; a JSON request starts with "{"
_U32 = struct.Struct(">I")


class SocketServer:
    def __init__(self, store_dir: Path, sink: queue.SimpleQueue[Item], handler: Handler,
                 log: logging.Logger) -> None:
        self.store_dir = store_dir
        self.sink = sink
        self.handler = handler
        self.log = log
        self.path = store_dir / SOCKET_NAME
        self._sock: socket.socket | None = None
        self._accept: threading.Thread | None = None
        self._conns: set[threading.Thread] = set()
        self._pending = 0       # requests queued for the worker and not yet answered
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    def start(self) -> None:
        """Bind (mode 0600, replacing a stale socket: the caller holds the daemon lock)."""
        self.path.unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        dir_fd = os.open(self.store_dir, os.O_PATH | os.O_DIRECTORY)
        old_umask = os.umask(0o177)
        try:
            address = str(self.path)
            if len(os.fsencode(address)) > 100:
                address = f"/proc/self/fd/{dir_fd}/{SOCKET_NAME}"
            sock.bind(address)
        finally:
            os.umask(old_umask)
            os.close(dir_fd)
        os.chmod(self.path, 0o600)
        sock.listen(64)
        self._sock = sock
        self._accept = threading.Thread(target=self._serve, name="gitguard-accept")
        self._accept.start()

    def refuse_new(self) -> None:
        """New requests are answered `fallback` from now on; taken ones still run."""
        self._stopping.set()

    def busy(self) -> bool:
        with self._lock:
            return bool(self._conns) or self._pending > 0

    def stop(self) -> None:
        self._stopping.set()
        if self._sock is not None:
            # Wakes the blocking accept (no polling: an idle daemon should not wake up).
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
        if self._accept is not None:
            self._accept.join(timeout=10)
        with self._lock:
            conns = list(self._conns)
        for thread in conns:
            thread.join(timeout=10)
        if self._sock is not None:
            self._sock.close()
        self.path.unlink(missing_ok=True)

    def _serve(self) -> None:
        assert self._sock is not None
        while not self._stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                if self._stopping.is_set():
                    return
                raise
            try:
                slow = self._take(conn)
            except OSError as exc:
                self.log.warning("connection failed: %s", exc)
                conn.close()
                continue
            if slow is None:
                continue
            thread = threading.Thread(target=self._one, args=(conn, slow), name="gitguard-conn")
            with self._lock:
                self._conns.add(thread)
            thread.start()

    def _take(self, conn: socket.socket) -> bytes | None:
        """On the accept thread: check the peer and read its request; a client sends it
        whole right after connecting (and shuts its side), so this takes microseconds, and
        the worker answers it. A thread per connection was a thread start and one more
        thread switch on every request. Returns what was read of a request still coming
        after QUICK_READ_S (a slow client gets a thread of its own, as before), else None:
        the connection is queued or closed."""
        uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                  struct.calcsize("3i")))[1]
        if uid != os.getuid():
            self.log.warning("refused a connection from uid %d", uid)
            conn.close()
            return None
        chunks: list[bytes] = []
        size = 0
        deadline = time.monotonic() + QUICK_READ_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return b"".join(chunks)
            conn.settimeout(left)
            try:
                chunk = conn.recv(65536)
            except TimeoutError:
                return b"".join(chunks)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > _MAX_REQUEST:
                conn.close()
                return None
        self._dispatch(conn, b"".join(chunks))
        return None

    def _dispatch(self, conn: socket.socket, data: bytes) -> None:
        """Queue a whole request for the worker, which answers and closes the connection."""
        binary = data.startswith(MAGIC)
        request = decode_binary(data) if binary else _json_request(data)
        if request is None:
            conn.close()
            return
        with self._lock:
            refused = self._stopping.is_set()
            if not refused:
                self._pending += 1      # busy() until the worker is done with it
        if refused:
            with conn:
                conn.settimeout(30)
                conn.sendall(_encode({"fallback": True, "reason": "the daemon is stopping"},
                                     binary))
            return
        self.sink.put(Job(lambda: self._run(conn, request, binary)))

    def _run(self, conn: socket.socket, request: dict[str, Any], binary: bool) -> None:
        """On the worker: answer, and close the connection (or leave the rest of a long
        answer to a thread, which may wait on a slow reader; the worker never does)."""
        rest = b""
        try:
            try:
                answer = self.handler(request)
            except Exception as exc:  # noqa: BLE001 - one bad request must not end the daemon
                self.log.exception("request failed")
                answer = self._internal_error(f"{type(exc).__name__}: {exc}")
            rest = _answer(conn, answer, binary)
        finally:
            if rest:
                thread = threading.Thread(target=self._send_rest, args=(conn, rest),
                                          name="gitguard-send")
                with self._lock:
                    self._conns.add(thread)
                thread.start()
            else:
                conn.close()
            with self._lock:
                self._pending -= 1

    def _send_rest(self, conn: socket.socket, rest: bytes) -> None:
        try:
            with conn:
                conn.settimeout(None)
                conn.sendall(rest)
        except OSError as exc:
            self.log.warning("connection failed: %s", exc)
        finally:
            with self._lock:
                self._conns.discard(threading.current_thread())

    def _internal_error(self, value: object) -> dict[str, Any]:
        return {"exit": 3, "stdout": "",
                "stderr": f"Error: internal error in the gitguard daemon: {value}\n"
                          f"Hint: this is a bug in gitguard; see {self.store_dir}"
                          "/daemon.log\n"}

    def _one(self, conn: socket.socket, prefix: bytes) -> None:
        """A slow client's connection (see `_take`): read the rest here, then queue it."""
        try:
            conn.settimeout(30)
            data = _read_request(conn, prefix)
            if data is None:
                conn.close()
            else:
                self._dispatch(conn, data)
        except OSError as exc:
            self.log.warning("connection failed: %s", exc)
            conn.close()
        finally:
            with self._lock:
                self._conns.discard(threading.current_thread())


def _encode(answer: dict[str, Any], binary: bool) -> bytes:
    return encode_binary(answer) if binary else json.dumps(answer, ensure_ascii=True).encode()


def _answer(conn: socket.socket, answer: dict[str, Any], binary: bool) -> bytes:
    """On the worker: send what the socket takes without waiting, and end the answer
    (the client reads to the end) when that was all of it. Returns what is left for the
    connection's thread to send, which may wait on a slow reader; the worker never does."""
    data = _encode(answer, binary)
    try:
        conn.setblocking(False)
        sent = conn.send(data)
    except OSError:                 # full (BlockingIOError) or broken: the thread sends
        return data
    if sent < len(data):
        return data[sent:]
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_WR)
    return b""


def _read_request(conn: socket.socket, prefix: bytes = b"") -> bytes | None:
    chunks: list[bytes] = [prefix]
    size = len(prefix)
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > _MAX_REQUEST:
            return None
    return b"".join(chunks)


def _json_request(data: bytes | None) -> dict[str, Any] | None:
    if data is None:
        return None
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def decode_binary(data: bytes | None) -> dict[str, Any] | None:
    """The native client's request (gitguard/nativeclient.c), as the JSON one reads:
    MAGIC, then big-endian u32-prefixed fields: op, cwd, argc + args, envc + "K=V"
    entries, a stdin flag and stdin's bytes. Bytes become str as Python's own argv
    and environ do (file system encoding, surrogate escapes). None when malformed."""
    if data is None:
        return None
    fields = _Fields(data, len(MAGIC))
    try:
        op, cwd = fields.text(), fields.text()
        argv = [fields.text() for _ in range(fields.count())]
        env: dict[str, str] = {}
        for _ in range(fields.count()):
            key, sep, value = fields.text().partition("=")
            if sep and key not in env:
                env[key] = value
        has_stdin = fields.count()
        stdin = fields.raw()
        if fields.at != len(data):
            return None
    except ValueError:
        return None
    return {"op": op, "args": {"argv": argv, "cwd": cwd, "env": env,
                               "stdin": stdin if has_stdin else None}}


class _Fields:
    def __init__(self, data: bytes, at: int) -> None:
        self.data, self.at = data, at

    def count(self) -> int:
        if self.at + 4 > len(self.data):
            raise ValueError("truncated")
        value: int = _U32.unpack_from(self.data, self.at)[0]
        self.at += 4
        return value

    def raw(self) -> bytes:
        size = self.count()
        if self.at + size > len(self.data):
            raise ValueError("truncated")
        self.at += size
        return self.data[self.at - size:self.at]

    def text(self) -> str:
        return os.fsdecode(self.raw())


def encode_binary(answer: dict[str, Any]) -> bytes:
    """MAGIC, u8 "declined" (the client does the work itself), i32 exit code, then
    u32-prefixed stdout and stderr bytes (the reason, when declined)."""
    declined = bool(answer.get("fallback"))
    code = answer.get("exit", 3)
    out = b"" if declined else out_bytes(answer.get("stdout"))
    err = out_bytes(answer.get("reason") if declined else answer.get("stderr"))
    return b"".join((MAGIC, struct.pack(">Bi", declined, code if isinstance(code, int) else 3),
                     _U32.pack(len(out)), out, _U32.pack(len(err)), err))
