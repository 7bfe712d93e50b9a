"""The daemon's worker runs each request as its client would: the client's directory,
environment and stdin, with stdout and stderr captured (`client_context`)."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from collections.abc import Iterator, Mapping


class _Sink(io.BufferedIOBase):
    """Where a request's stdout or stderr bytes go: the current request's buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.target = io.BytesIO()

    @property
    def name(self) -> str:
        return "<request output>"

    def writable(self) -> bool:
        return True

    def write(self, data: bytes, /) -> int:    # type: ignore[override]
        return self.target.write(data)


class _Outputs(threading.local):
    """One stdout and one stderr text stream per worker thread, pointed at each request's
    buffers in turn. A text stream made per request leaked: click caches a writer per
    `sys.stdout` object in a WeakKeyDictionary whose value is that same object, so none
    was ever freed (1.2 MB of the daemon's growth per 1,000 CLI calls). Nothing of click's
    is touched; tests/test_kept_library_uses.py counts the live streams over many
    requests and fails if a click release makes them grow again."""

    def __init__(self) -> None:
        self.sinks = (_Sink(), _Sink())
        self.streams = tuple(io.TextIOWrapper(sink, encoding="utf-8", errors="surrogateescape",
                                              write_through=True) for sink in self.sinks)


_OUTPUTS = _Outputs()


@contextlib.contextmanager
def client_context(cwd: str, env: Mapping[str, str] | None, stdin: bytes
                    ) -> Iterator[tuple[io.BytesIO, io.BytesIO]]:
    """Run as the client would: its directory, environment and stdin; output captured.
    Only the worker thread does this, one request at a time."""
    out, err = io.BytesIO(), io.BytesIO()
    outputs = _OUTPUTS
    outputs.sinks[0].target, outputs.sinks[1].target = out, err
    saved = (sys.stdin, sys.stdout, sys.stderr, os.getcwd(), _snapshot())
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8", errors="surrogateescape")
    sys.stdout, sys.stderr = outputs.streams
    try:
        os.chdir(cwd)
        if env is not None:
            set_environ(env)
        yield out, err
    finally:
        for stream in outputs.streams:
            with contextlib.suppress(ValueError):
                stream.flush()
        for sink in outputs.sinks:
            sink.target = io.BytesIO()          # the request's buffers are its caller's now
        with contextlib.suppress(ValueError):
            sys.stdin.detach()
        sys.stdin, sys.stdout, sys.stderr = saved[0], saved[1], saved[2]
        os.chdir(saved[3])
        if env is not None:
            _set_environb(saved[4])


def _snapshot() -> dict[bytes, bytes]:
    """os.environ as bytes: os.environb's values need no decoding."""
    return dict(os.environb)


def set_environ(env: Mapping[str, str]) -> None:
    """Make os.environ equal `env`, touching only the variables that differ: a hook's
    environment is mostly the daemon's own, and clearing and refilling every variable
    (a putenv or unsetenv each) cost ~2 ms per request, twice per request."""
    _set_environb({k.encode("utf-8", "surrogateescape"): v.encode("utf-8", "surrogateescape")
                   for k, v in env.items()})


def _set_environb(wanted: Mapping[bytes, bytes]) -> None:
    """set_environ on bytes, compared against os.environ's own mapping: a variable that
    did not change costs no decode."""
    current = _snapshot()
    for name in [n for n in current if n not in wanted]:
        del os.environb[name]
    for name, value in wanted.items():
        if current.get(name) != value:
            os.environb[name] = value
