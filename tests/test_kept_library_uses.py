"""Where gitguard leans on more than a library's documented contract, and why it may
(issue 28, item 3). Each use kept has its measured reason in a comment where it is
made, and a test here that fails the day a release changes what it leans on, instead
of users silently paying the cost again or losing the feature:

| use | where | what it saves |
|---|---|---|
| `_socket`, not `socket` | ipc/client.py | 6.9 ms of imports on every hook call |
| glibc `malloc_trim` (ctypes) | daemon/daemon.py | 1-2 MiB of daemon RSS per 1,000 calls |
| glibc `renameat2` (ctypes) | storage/dir_compaction.py | an atomic directory swap |
| one stdout per thread (click's stream cache) | daemon/client_context.py | 1.2 MB per 1,000 calls |
| pygit2's import-time CA load | cli/startup.py | ~12 ms CPU per fresh process |

The last is tested in tests/cli/test_leanimport.py through pygit2's public settings.
"""

from __future__ import annotations

import ast
import gc
import io
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gitguard"
GLIBC = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
# module imported by its private name -> the one file allowed to, with its reason there
KEPT_PRIVATE_MODULES = {"_socket": "ipc/client.py"}


def _private(name: str) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in name.split("."))


def _private_uses(path: Path) -> list[str]:
    """A library's private names this file reaches: `__pydantic_*__`, a `_private`
    attribute of a module imported from outside gitguard, a `_private` module."""
    tree = ast.parse(path.read_text())
    outside: set[str] = set()
    found: list[str] = []
    rel = path.relative_to(PACKAGE).as_posix()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not alias.name.startswith("gitguard"):
                    outside.add(alias.asname or alias.name.split(".")[0])
                if _private(alias.name) and KEPT_PRIVATE_MODULES.get(alias.name) != rel:
                    found.append(f"{rel}:{node.lineno} import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("gitguard"):
                continue
            names = [node.module, *(a.name for a in node.names)]
            found += [f"{rel}:{node.lineno} from {node.module} import {n}"
                      for n in names[1:] if _private(n)]
            if _private(node.module):
                found.append(f"{rel}:{node.lineno} from {node.module}")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        if node.attr.startswith("__pydantic"):
            found.append(f"{rel}:{node.lineno} .{node.attr}")
        elif (node.attr.startswith("_") and not node.attr.startswith("__")
              and ast.unparse(node.value).split(".")[0] in outside):
            found.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
    return found


def test_the_package_reaches_no_private_name_of_a_library() -> None:
    found = [use for path in sorted(PACKAGE.rglob("*.py")) for use in _private_uses(path)]
    assert found == []
    assert not [p for p in PACKAGE.rglob("*.py") if "__pydantic" in p.read_text()]


def test_the_client_socket_module_is_the_one_socket_wraps() -> None:
    import _socket
    import socket

    assert issubclass(socket.socket, _socket.socket)
    for name in ("AF_UNIX", "SOCK_STREAM", "SOL_SOCKET", "SO_PEERCRED"):
        assert getattr(_socket, name) == getattr(socket, name), name
    probe = "import sys, gitguard.ipc.client; print('socket' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False", "the hook client imports `socket` after all"


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's")
def test_glibc_malloc_trim_is_found_and_runs() -> None:
    from gitguard.daemon import daemon

    trim = daemon._malloc_trim()
    assert trim is not None, "glibc no longer exports malloc_trim: daemon RSS grows again"
    assert trim(0) in (0, 1)


@pytest.mark.skipif(not GLIBC, reason="renameat2 is Linux's, through glibc")
def test_renameat2_exchanges_two_directories(tmp_path: Path) -> None:
    from gitguard.storage import dir_compaction

    assert dir_compaction._exchange_function() is not None, "glibc lost renameat2"
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "from_a").write_bytes(b"a")
    (b / "from_b").write_bytes(b"b")
    assert dir_compaction._exchange(a, b) is True, "this file system has no RENAME_EXCHANGE"
    assert os.listdir(a) == ["from_b"] and os.listdir(b) == ["from_a"]


def _live_streams() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, io.IOBase))


def test_click_output_through_many_requests_holds_no_stream_per_request(
        tmp_path: Path) -> None:
    """click caches a writer per `sys.stdout` object, held for as long as that object
    lives; the daemon's worker keeps one stdout per thread so the cache stays one entry.
    If a click release keys its cache otherwise, streams pile up per request here."""
    import click

    from gitguard.daemon.client_context import client_context

    def one(n: int) -> None:
        with client_context(str(tmp_path), None, b"") as (out, err):
            click.echo(f"out {n}")
            click.echo(f"err {n}", err=True)
        assert (out.getvalue(), err.getvalue()) == (f"out {n}\n".encode(), f"err {n}\n".encode())

    one(0)
    before = _live_streams()
    for n in range(1, 301):
        one(n)
    assert _live_streams() - before <= 2
