"""The real gitguard CLI under a real pseudo-terminal, as a person at a terminal runs it."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

# Set per call: a test's environment may hold them from the shell that started pytest.
_COLOUR_VARS = ("NO_COLOR", "FORCE_COLOR", "TERM", "COLUMNS", "LINES", "TTY_COMPATIBLE",
                "TTY_INTERACTIVE")
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def in_terminal(cwd: Path, *args: str, env: dict[str, str] | None = None,
                columns: int = 120, stdout_piped: bool = False
                ) -> tuple[int, bytes, bytes]:
    """Run `gitguard ARGS` with stdin, stderr (and stdout, unless `stdout_piped`) on a
    pseudo-terminal `columns` wide: (exit code, what the terminal received, what the
    pipe received)."""
    full = {k: v for k, v in os.environ.items() if k not in _COLOUR_VARS}
    # progress from the first moment: the tests' work is short (the default waits 0.5 s)
    full.update({"TERM": "xterm-256color", "GITGUARD_PROGRESS_DELAY": "0", **(env or {})})
    main, side = os.openpty()
    fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    try:
        proc = subprocess.Popen([sys.executable, "-m", "gitguard", *args], cwd=cwd, env=full,
                                stdin=side, stderr=side,
                                stdout=subprocess.PIPE if stdout_piped else side)
    finally:
        os.close(side)
    seen = bytearray()
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:         # EIO: every holder of the terminal's other side is gone
            break
        if not chunk:
            break
        seen += chunk
    os.close(main)
    piped = proc.stdout.read() if proc.stdout is not None else b""
    if proc.stdout is not None:
        proc.stdout.close()
    return proc.wait(), bytes(seen), piped


def plain(seen: bytes) -> str:
    """What the terminal received without its escape sequences and carriage returns."""
    return ANSI.sub(b"", seen).replace(b"\r", b"").decode(errors="replace")
