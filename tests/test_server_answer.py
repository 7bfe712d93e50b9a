"""The daemon's worker sends each answer itself when the socket takes it at once, and
leaves the rest of a big one to the connection's thread (it never waits on a reader).
A real socket server and a worker thread running its jobs as the engine does: small,
big (more than the socket buffer holds) and failed answers all arrive whole."""

from __future__ import annotations

import json
import logging
import queue
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitguard import server
from gitguard.engine import Item, Job

BIG = "x" * (8 * 1024 * 1024)


def handler(request: dict[str, Any]) -> dict[str, Any]:
    if request["op"] == "boom":
        raise ValueError("the handler failed")
    text = BIG if request["op"] == "big" else "small answer"
    return {"exit": 0, "stdout": text, "stderr": "e"}


def worker(jobs: queue.SimpleQueue[Item]) -> None:
    while True:
        job = jobs.get()
        assert isinstance(job, Job)
        try:
            job.done.put((True, job.fn()))
        except Exception as exc:  # noqa: BLE001 - as the engine's worker hands it back
            job.done.put((False, exc))


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
        answer = json.loads(ask(served, json.dumps({"op": op}).encode()))
        assert answer == handler({"op": op})
    failed = json.loads(ask(served, json.dumps({"op": "boom"}).encode()))
    assert failed["exit"] == 3 and "the handler failed" in failed["stderr"]
    native = server.MAGIC + b"".join(len(f).to_bytes(4, "big") + f for f in (b"big", b"/w")) \
        + bytes(4) + bytes(4) + bytes(4) + bytes(4)
    assert ask(served, native) == server.encode_binary(handler({"op": "big"}))
