"""The daemon's socket: accept, check the peer, read, hand the request to the worker, answer.

One I/O thread serves every connection with a selector: it accepts, checks the peer's
uid, reads each request whole (non-blocking, so a silent or slow client costs a few
hundred bytes and nothing else), decodes it and queues it as a `Job` for the worker, the
one thread that owns pygit2 and the store; the worker runs requests one at a time in
arrival order and sends each answer, and leaves to the I/O thread the rest of an answer a
slow reader does not take at once. No thread per connection: 1,000 idle connections or
100 clients dripping their request byte by byte are 1,000 or 100 entries in a selector.

Bounded: a request must arrive whole within READ_TIMEOUT_S, an answer be taken within
WRITE_TIMEOUT_S; at most MAX_WAITING connections may be sending (the oldest is dropped
for a new one), holding at most MAX_BUFFERED bytes together; a request is at most
MAX_REQUEST bytes (else the client does the work itself: known from its length prefix,
before it is read) and nests at most jsontext.MAX_DEPTH + a few levels. Anything
malformed, too big or too deep gets an answer saying so. Requests and answers are in
gitguard.ipc.wire's framing. Every event is handled under a catch-all that drops that one
connection; should the loop itself die anyway, `on_death` stops the daemon, which then
exits and releases its pid file and lock, so the next hook starts a fresh one instead of
talking to a deaf one.

Taken: the worker writes TAKEN (one space, before the answer's framing) before it runs a
request. A client that sees nothing for a few seconds gives up and does the work itself
(client.request); the worker skips a request whose client has gone, so no request runs
twice.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import queue
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitguard import error_boundary, jsontext
from gitguard.daemon.engine import Item, Job
from gitguard.errors import GitguardError
from gitguard.ipc import wire
from gitguard.ipc.client import SOCKET_NAME, TAKEN

Handler = Callable[[dict[str, Any]], dict[str, Any]]
MAX_REQUEST = 64 * 1024 * 1024
MAX_REQUEST_DEPTH = jsontext.MAX_DEPTH + 8     # the user's input sits a few levels down
READ_TIMEOUT_S = 10.0   # a client sends its request whole right after connecting
WRITE_TIMEOUT_S = 60.0  # ... and reads its answer as it comes
MAX_WAITING = 512       # connections still sending; the oldest is dropped beyond this
MAX_BUFFERED = 256 * 1024 * 1024    # all their bytes together (512 x 64 MiB would be 32 GiB)
# accept(2) errors that pass: out of descriptors or memory, or a client already gone
_SHORT_OF = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM,
                       errno.ECONNABORTED, errno.EINTR, errno.EPROTO, errno.EPERM))


class _Conn:
    """One client connection, owned by the I/O thread except while the worker runs it."""

    __slots__ = ("sock", "deadline", "data", "out", "declined", "left")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.deadline = deadline
        self.data = bytearray()
        self.out = memoryview(b"")
        self.declined = ""      # why its request is read to the end and thrown away
        self.left = 0           # ... and how many of its bytes are still to come

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class SocketServer:
    def __init__(self, store_dir: Path, sink: queue.SimpleQueue[Item], handler: Handler,
                 log: logging.Logger, on_death: Callable[[], None] | None = None) -> None:
        self.store_dir = store_dir
        self.sink = sink
        self.handler = handler
        self.log = log
        self.on_death = on_death
        self.path = store_dir / SOCKET_NAME
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        # The I/O thread's own: connections sending their request, and those taking their
        # answer, each in order of their deadlines (a deadline is set once, from now).
        self._reading: dict[_Conn, None] = {}
        self._writing: dict[_Conn, None] = {}
        self._buffered = 0      # bytes of requests still arriving, all connections
        self._outbox: queue.SimpleQueue[tuple[_Conn, bytes]] = queue.SimpleQueue()
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._pending = 0       # requests queued or answered and not yet sent whole
        self._lock = threading.Lock()
        self._stopping = threading.Event()      # refuse new requests
        self._closing = threading.Event()       # end the loop
        self._dead = False

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
        sock.listen(socket.SOMAXCONN)     # a burst of clients waits here, not EAGAIN
        sock.setblocking(False)
        self._sock = sock
        self._thread = threading.Thread(target=self._serve, name="gitguard-io")
        self._thread.start()

    def refuse_new(self) -> None:
        """New requests are answered `fallback` from now on; taken ones still run."""
        self._stopping.set()

    def busy(self) -> bool:
        with self._lock:
            return self._pending > 0 and not self._dead

    def stop(self) -> None:
        self._stopping.set()
        self._closing.set()
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._sock is not None:
            self._sock.close()
        with self._lock:
            fds, self._wake_w = (self._wake_r, self._wake_w), -1
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.path.unlink(missing_ok=True)

    def _wake(self) -> None:
        with self._lock, contextlib.suppress(OSError):     # full: it is awake already
            if self._wake_w >= 0:
                os.write(self._wake_w, b"w")

    # --- the I/O thread -----------------------------------------------------------------
    def _serve(self) -> None:
        try:
            self._loop()
        except BaseException:  # noqa: BLE001 - whatever it was, a deaf daemon must not stay
            self.log.critical("the request loop died; the daemon stops so that the next "
                              "hook starts a fresh one", exc_info=True)
            with self._lock:
                self._dead = True
            if self.on_death is not None:
                self.on_death()

    def _loop(self) -> None:
        assert self._sock is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self._sock, selectors.EVENT_READ, "accept")
            sel.register(self._wake_r, selectors.EVENT_READ, "wake")
            try:
                while not self._closing.is_set():
                    for key, _ in sel.select(self._timeout()):
                        self._event(sel, key.data)
                    self._expire(sel)
            finally:
                for conn in (*self._reading, *self._writing):
                    conn.close()

    def _timeout(self) -> float | None:
        """Until the next deadline; no deadline, no wake-up (an idle daemon sleeps)."""
        firsts = [next(iter(d)).deadline for d in (self._reading, self._writing) if d]
        return max(0.0, min(firsts) - time.monotonic()) if firsts else None

    def _event(self, sel: selectors.BaseSelector, what: Any) -> None:
        if what == "accept":
            self._accept(sel)
        elif what == "wake":
            with contextlib.suppress(OSError):
                os.read(self._wake_r, 4096)
            self._take_outbox(sel)
        else:
            try:
                self._ready(sel, what)
            except Exception:  # noqa: BLE001 - one connection's trouble drops that one
                self.log.exception("dropped a connection")
                self._drop(sel, what)

    def _accept(self, sel: selectors.BaseSelector) -> None:
        assert self._sock is not None
        for _ in range(64):     # then the others get their turn
            try:
                sock, _addr = self._sock.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno not in _SHORT_OF:
                    raise       # the listening socket itself is broken: _serve ends it all
                self.log.warning("accept failed: %s", exc)
                if not self._reading:
                    time.sleep(0.05)    # nothing to free: do not spin on the ready socket
                    return
                self._drop(sel, next(iter(self._reading)))      # the longest-silent one
            try:
                self._admit(sel, sock)
            except OSError as exc:
                self.log.warning("connection failed: %s", exc)
                sock.close()

    def _admit(self, sel: selectors.BaseSelector, sock: socket.socket) -> None:
        uid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                  struct.calcsize("3i")))[1]
        if uid != os.getuid():
            self.log.warning("refused a connection from uid %d", uid)
            sock.close()
            return
        if len(self._reading) >= MAX_WAITING:
            self._drop(sel, next(iter(self._reading)))
        sock.setblocking(False)
        conn = _Conn(sock, time.monotonic() + READ_TIMEOUT_S)
        self._reading[conn] = None
        sel.register(sock, selectors.EVENT_READ, conn)

    def _ready(self, sel: selectors.BaseSelector, conn: _Conn) -> None:
        if conn in self._writing:
            self._send_some(sel, conn)
            return
        try:
            chunk = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(sel, conn)
            return
        if not chunk:   # the client sent all, or less than its length prefix said
            if conn.declined:
                self._reply(sel, conn, {"fallback": True, "reason": conn.declined})
            else:
                self._complete(sel, conn)
            return
        if conn.declined:
            conn.left -= len(chunk)
            if conn.left <= 0:
                self._reply(sel, conn, {"fallback": True, "reason": conn.declined})
            return
        conn.data += chunk
        self._buffered += len(chunk)
        try:
            length = wire.body_length(conn.data)
        except ValueError:
            self._reply(sel, conn, _bad_request("it is not in gitguard's framing"))
            return
        if (length is not None and length > MAX_REQUEST) or self._buffered > MAX_BUFFERED:
            # The client does the work itself; the daemon's memory stays bounded. The rest
            # is read and dropped before the answer: closing on unread bytes resets the
            # connection, and the client would never read why.
            conn.left = wire.HEADER + length - len(conn.data) if length is not None else 1
            self._forget_data(conn)
            conn.declined = "the request is too large for the daemon now"
        elif length is not None and len(conn.data) >= wire.HEADER + length:
            self._complete(sel, conn)

    def _complete(self, sel: selectors.BaseSelector, conn: _Conn) -> None:
        """A whole request: queue it for the worker, or answer at once why not."""
        del self._reading[conn]
        sel.unregister(conn.sock)
        data = bytes(conn.data)
        self._forget_data(conn)
        request, why = _request(data)
        if request is None:
            self._reply(sel, conn, _bad_request(why))
            return
        with self._lock:
            refused = self._stopping.is_set()
            if not refused:
                self._pending += 1      # busy() until its answer is sent
        if refused:
            self._reply(sel, conn, {"fallback": True, "reason": "the daemon is stopping"})
            return
        self.sink.put(Job(lambda: self._run(conn, request)))

    def _forget_data(self, conn: _Conn) -> None:
        self._buffered -= len(conn.data)
        conn.data = bytearray()

    def _reply(self, sel: selectors.BaseSelector, conn: _Conn, answer: dict[str, Any]) -> None:
        """Answer from the I/O thread (nothing was taken: no TAKEN first)."""
        self._forget_data(conn)
        self._reading.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            sel.unregister(conn.sock)
        with self._lock:
            self._pending += 1
        self._write_later(sel, conn, wire.encode(answer))

    def _take_outbox(self, sel: selectors.BaseSelector) -> None:
        while True:
            try:
                conn, rest = self._outbox.get_nowait()
            except queue.Empty:
                return
            self._write_later(sel, conn, rest)

    def _write_later(self, sel: selectors.BaseSelector, conn: _Conn, data: bytes) -> None:
        conn.out = memoryview(data)
        conn.deadline = time.monotonic() + WRITE_TIMEOUT_S
        self._writing[conn] = None
        sel.register(conn.sock, selectors.EVENT_WRITE, conn)
        self._send_some(sel, conn)

    def _send_some(self, sel: selectors.BaseSelector, conn: _Conn) -> None:
        try:
            sent = conn.sock.send(conn.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(sel, conn)
            return
        conn.out = conn.out[sent:]
        if not conn.out:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_WR)
            self._drop(sel, conn)

    def _expire(self, sel: selectors.BaseSelector) -> None:
        now = time.monotonic()
        expired = 0
        for table in (self._reading, self._writing):
            while table:
                conn = next(iter(table))
                if conn.deadline > now:
                    break
                self._drop(sel, conn)
                expired += 1
        if expired:
            self.log.info("closed %d connection(s) that sent or read nothing in time",
                          expired)

    def _drop(self, sel: selectors.BaseSelector, conn: _Conn) -> None:
        """Forget a connection in any state (the I/O thread owns it again by now)."""
        self._forget_data(conn)
        self._reading.pop(conn, None)
        if conn in self._writing:
            del self._writing[conn]
            with self._lock:
                self._pending -= 1      # its answer is sent, or will never be
        with contextlib.suppress(KeyError, ValueError):
            sel.unregister(conn.sock)
        conn.close()

    # --- the worker ---------------------------------------------------------------------
    def _run(self, conn: _Conn, request: dict[str, Any]) -> None:
        """On the worker: say it is taken, answer, send what the socket takes at once and
        leave the rest to the I/O thread (the worker never waits on a reader)."""
        handed = False
        try:
            try:
                conn.sock.send(TAKEN)
            except OSError:     # the client gave up waiting and does the work itself
                self.log.info("a client gave up before its %s request ran",
                              request.get("op"))
                return
            data = self._answer_bytes(request)
            try:
                sent = conn.sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                return
            if sent < len(data):
                self._outbox.put((conn, data[sent:]))
                handed = True
                self._wake()
            else:
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(socket.SHUT_WR)
        finally:
            if not handed:
                conn.close()
                with self._lock:
                    self._pending -= 1

    def _answer_bytes(self, request: dict[str, Any]) -> bytes:
        try:
            return wire.encode(self.handler(request))
        except Exception as exc:  # noqa: BLE001 - one bad request must not end the daemon
            if not isinstance(exc, GitguardError):
                self.log.exception("request failed")
            return wire.encode(error_boundary.to_wire(exc, self.store_dir))


def _bad_request(why: str) -> dict[str, Any]:
    return error_boundary.to_wire(GitguardError(
        f"the gitguard daemon refused a request: {why}",
        "gitguard's clients send well-formed requests; another program wrote to daemon.sock"))


def _request(data: bytes) -> tuple[dict[str, Any] | None, str]:
    """(the request, "") or (None, why not): never an exception, whatever the bytes."""
    try:
        value = wire.decode(data, MAX_REQUEST_DEPTH)
    except MemoryError:
        return None, "it is too large"
    except ValueError as exc:
        return None, f"it is malformed ({exc})"
    if not isinstance(value, dict) or not isinstance(value.get("op"), str):
        return None, "it is not a dict with an op"
    return value, ""
