"""The daemon's socket: accept, check the peer, hand the request to the worker, answer.

The accept thread and the per-connection threads never touch git or the store:
each request becomes a `Job` on the worker's queue, so requests from any number of
processes run one at a time, in arrival order, on the thread that owns pygit2.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitguard.client import SOCKET_NAME
from gitguard.engine import Item, Job

Handler = Callable[[dict[str, Any]], dict[str, Any]]
_MAX_REQUEST = 64 * 1024 * 1024


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
            return bool(self._conns)

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
            thread = threading.Thread(target=self._one, args=(conn,), name="gitguard-conn")
            with self._lock:
                self._conns.add(thread)
            thread.start()

    def _one(self, conn: socket.socket) -> None:
        try:
            with conn:
                conn.settimeout(30)
                uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                          struct.calcsize("3i")))[1]
                if uid != os.getuid():
                    self.log.warning("refused a connection from uid %d", uid)
                    return
                request = _read_request(conn)
                if request is None:
                    return
                if self._stopping.is_set():
                    answer: dict[str, Any] = {"fallback": True, "reason": "the daemon is stopping"}
                else:
                    job = Job(lambda: self.handler(request))
                    self.sink.put(job)
                    ok, value = job.done.get()
                    answer = value if ok else {
                        "exit": 3, "stdout": "",
                        "stderr": f"Error: internal error in the gitguard daemon: {value}\n"
                                  f"Hint: this is a bug in gitguard; see {self.store_dir}"
                                  "/daemon.log\n"}
                conn.settimeout(None)
                conn.sendall(json.dumps(answer, ensure_ascii=True).encode())
        except OSError as exc:
            self.log.warning("connection failed: %s", exc)
        finally:
            with self._lock:
                self._conns.discard(threading.current_thread())


def _read_request(conn: socket.socket) -> dict[str, Any] | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > _MAX_REQUEST:
            return None
    try:
        value = json.loads(b"".join(chunks))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
