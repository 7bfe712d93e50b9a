"""The daemon's worker runs each request as its client would: the client's directory,
environment and stdin, with stdout and stderr captured (`client_context`)."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator, Mapping


@contextlib.contextmanager
def client_context(cwd: str, env: Mapping[str, str] | None, stdin: bytes
                    ) -> Iterator[tuple[io.BytesIO, io.BytesIO]]:
    """Run as the client would: its directory, environment and stdin; output captured.
    Only the worker thread does this, one request at a time."""
    out, err = io.BytesIO(), io.BytesIO()
    saved = (sys.stdin, sys.stdout, sys.stderr, os.getcwd(), dict(os.environ))
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8", errors="surrogateescape")
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", errors="surrogateescape",
                                  write_through=True)
    sys.stderr = io.TextIOWrapper(err, encoding="utf-8", errors="surrogateescape",
                                  write_through=True)
    try:
        os.chdir(cwd)
        if env is not None:
            set_environ(env)
        yield out, err
    finally:
        for stream in (sys.stdin, sys.stdout, sys.stderr):
            with contextlib.suppress(ValueError):
                stream.flush()
                stream.detach()     # keep the BytesIO open: the wrapper would close it
        sys.stdin, sys.stdout, sys.stderr = saved[0], saved[1], saved[2]
        os.chdir(saved[3])
        if env is not None:
            set_environ(saved[4])


def set_environ(env: Mapping[str, str]) -> None:
    """Make os.environ equal `env`, touching only the variables that differ: a hook's
    environment is mostly the daemon's own, and clearing and refilling every variable
    (a putenv or unsetenv each) cost ~2 ms per request, twice per request."""
    current = os.environ
    for name in [n for n in current if n not in env]:
        del current[name]
    for name, value in env.items():
        if current.get(name) != value:
            current[name] = value
