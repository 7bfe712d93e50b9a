"""The accept thread reads each request and queues it (a slow client gets a thread of its
own); the daemon's worker sends each answer itself when the socket takes it at once, and
leaves the rest of a big one to a thread of its own (it never waits on a reader).
A real socket server and a worker thread running its jobs as the engine does: small,
big (more than the socket buffer holds) and failed answers all arrive whole."""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitguard.daemon import server
from gitguard.daemon.engine import Item, Job
from gitguard.ipc import client, wire

BIG = "x" * (8 * 1024 * 1024)
SMALL = wire.encode({"op": "small"})


def answer_of(data: bytes) -> Any:
    """The answer in a reply: TAKEN first when the worker ran the request."""
    return wire.decode(data.removeprefix(client.TAKEN))


def framed(body: bytes) -> bytes:
    return wire.MAGIC + len(body).to_bytes(4, "big") + body


def key(text: str) -> bytes:
    return b"s" + len(text).to_bytes(4, "big") + text.encode()


def handler(request: dict[str, Any]) -> dict[str, Any]:
    if request["op"] == "boom":
        raise ValueError("the handler failed")
    text = BIG if request["op"] == "big" else "small answer"
    return {"exit": 0, "stdout": text, "stderr": "e"}


def worker(jobs: queue.SimpleQueue[Item]) -> None:
    while True:
        job = jobs.get()
        assert isinstance(job, Job)
        with contextlib.suppress(Exception):    # as the daemon's worker: logged, goes on
            job.fn()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Path]:
    jobs: queue.SimpleQueue[Item] = queue.SimpleQueue()
    threading.Thread(target=worker, args=(jobs,), daemon=True).start()
    log = logging.getLogger("test-server")
    sock_server = server.SocketServer(tmp_path, jobs, handler, log)
    sock_server.start()
    yield tmp_path / "daemon.sock"
    sock_server.stop()


def ask(path: Path, payload: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(60)
        sock.connect(str(path))
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(1 << 16):
            chunks.append(chunk)
    return b"".join(chunks)


def test_small_big_and_failed_answers_arrive_whole(served: Path) -> None:
    for op in ("small", "big", "small"):
        reply = ask(served, wire.encode({"op": op}))
        assert reply == client.TAKEN + wire.encode(handler({"op": op}))
    failed = answer_of(ask(served, wire.encode({"op": "boom"})))
    assert failed["exit"] == 3 and "the handler failed" in failed["stderr"]


def test_a_slow_client_gets_its_own_thread_and_does_not_hold_up_the_others(
        served: Path) -> None:
    """The accept thread reads a request only for QUICK_READ_S; a client still sending
    after that is read on a thread of its own while other clients are answered."""
    with socket.socket(socket.AF_UNIX) as slow:
        slow.settimeout(60)
        slow.connect(str(served))
        slow.sendall(SMALL[:7])                         # half a request, then nothing
        answered = threading.Event()

        def other() -> None:
            assert answer_of(ask(served, SMALL))["stdout"] == "small answer"
            answered.set()

        thread = threading.Thread(target=other)
        thread.start()
        assert answered.wait(60), "a slow client held up another one"
        thread.join()
        slow.sendall(SMALL[7:])
        slow.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := slow.recv(1 << 16):
            chunks.append(chunk)
    assert answer_of(b"".join(chunks)) == handler({"op": "small"})


def test_many_clients_at_once_each_get_their_own_answer(served: Path) -> None:
    answers: dict[int, Any] = {}

    def one(n: int) -> None:
        op = "big" if n % 5 == 0 else "small"
        answers[n] = (op, answer_of(ask(served, wire.encode({"op": op}))))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 20
    assert all(answer == handler({"op": op}) for op, answer in answers.values())


def test_busy_until_a_queued_request_is_answered_and_refused_once_stopping(
        tmp_path: Path) -> None:
    jobs: queue.SimpleQueue[Item] = queue.SimpleQueue()
    sock_server = server.SocketServer(tmp_path, jobs, handler, logging.getLogger("test"))
    sock_server.start()
    try:
        got: list[bytes] = []
        client = threading.Thread(target=lambda: got.append(
            ask(tmp_path / "daemon.sock", SMALL)))
        client.start()
        job = jobs.get(timeout=60)          # queued: nobody has run it yet
        assert isinstance(job, Job) and sock_server.busy()
        sock_server.refuse_new()
        job.fn()                            # what the worker does while shutting down
        client.join(60)
        assert answer_of(got[0]) == handler({"op": "small"}) and not sock_server.busy()
        refused = answer_of(ask(tmp_path / "daemon.sock", SMALL))
        assert refused == {"fallback": True, "reason": "the daemon is stopping"}
    finally:
        sock_server.stop()


@pytest.mark.parametrize("poison", [
    framed(b"d\x00\x00\x00\x01" + key("op") + b"l\x00\x00\x00\x01" * 100_000 + b"N"),
    framed(b"d\x00\x00\x00\x02" + key("op") + key("small") + key("args")
           + (b"d\x00\x00\x00\x01" + key("a")) * 200 + b"N"),
    framed(b"l\xff\xff\xff\xff"),                    # a count beyond the bytes there are
    framed(b"d\x00\x00\x00\x01" + key("op") + b"s\xff\xff\xff\xf0op"),  # a length too
    framed(b"Q"), framed(b"N") + b"after",
    b"\xff\xfe not even text", b'{"op": "small"}', wire.encode([1, 2]),
    wire.MAGIC + b"\x00\x00\x00\x09op"])
def test_a_poisoned_request_is_answered_and_the_server_serves_on(served: Path,
                                                                 poison: bytes) -> None:
    """A deep request killed the accept thread: every later client waited 300 s."""
    answer = wire.decode(ask(served, poison))
    assert answer["exit"] == 1 and "refused a request" in answer["stderr"]
    assert answer_of(ask(served, SMALL)) == handler({"op": "small"})


def test_idle_and_dripping_clients_cost_no_thread(served: Path) -> None:
    before = threading.active_count()
    idle = [socket.socket(socket.AF_UNIX) for _ in range(300)]
    try:
        for sock in idle:
            sock.connect(str(served))
        for sock in idle[:50]:
            sock.sendall(SMALL[:10])
        assert answer_of(ask(served, SMALL)) == handler({"op": "small"})
        assert threading.active_count() == before
    finally:
        for sock in idle:
            sock.close()


class BuggyLoop(server.SocketServer):
    """A server whose loop meets a bug of its own (not one connection's trouble)."""

    def _accept(self, sel: Any) -> None:
        raise RuntimeError("a bug in the request loop")


def test_a_dead_loop_says_so_and_stops_counting_as_busy(tmp_path: Path) -> None:
    """Should the I/O loop die anyway, `on_death` runs (the daemon then exits, releasing
    its pid file and lock) instead of a process that holds both and hears nothing."""
    died = threading.Event()
    jobs: queue.SimpleQueue[Item] = queue.SimpleQueue()
    sock_server = BuggyLoop(tmp_path, jobs, handler, logging.getLogger("test"),
                            on_death=died.set)
    sock_server.start()
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(tmp_path / "daemon.sock"))
            assert died.wait(60)
        assert not sock_server.busy()
    finally:
        sock_server.stop()


def test_an_oversized_request_is_declined_not_buffered(served: Path) -> None:
    """More than MAX_REQUEST bytes: the client is told to do the work itself."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(60)
        sock.connect(str(served))

        def send() -> None:
            # the server answers and closes before it has read all: the rest fails
            with contextlib.suppress(OSError):
                sock.sendall(wire.MAGIC + (server.MAX_REQUEST + 1).to_bytes(4, "big")
                             + b"x" * (server.MAX_REQUEST + 1))

        sender = threading.Thread(target=send)
        sender.start()
        answer = b"".join(iter(lambda: sock.recv(65536), b""))
        sender.join(60)
    assert wire.decode(answer) == {"fallback": True,
                                  "reason": "the request is too large for the daemon now"}
    assert answer_of(ask(served, SMALL)) == handler({"op": "small"})
