"""Building the native hook client (`nativeclient.c`) into the store: `<store>/bin/gitguard`.

Every agent tool call runs a hook command twice (call begin, call end). With the
Python client each is an interpreter start (~19-26 ms here) before the daemon's
answer; the native client costs about a millisecond, and when no daemon answers it
execs the Python entry with the same arguments and stdin, so what happens is the
same. It is built with the system `cc` when hooks are installed, when
`integrate` writes an agent's hook command and when the daemon starts, and kept
while its key (source, interpreter, launcher, compiler) is unchanged. No compiler,
or a failed build: None, and the callers keep the Python command.

The binary lives in the store (nothing is written outside the workspace) under a
fixed name ending in `gitguard`, so a hook command that runs it still reads
`.../gitguard hook ...` and is found again as gitguard's own.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from gitguard import client, durable

SOURCE = Path(__file__).with_name("nativeclient.c")
LAUNCHER = Path(__file__).with_name("hookmain.py")
BIN_DIR = "bin"
NAME = "gitguard"
KEY_NAME = "gitguard.key"
BUILD_TIMEOUT_S = 60.0


def path(store_dir: Path) -> Path:
    return store_dir / BIN_DIR / NAME


def compiler() -> str | None:
    """`GITGUARD_CC` (empty: none) or the system `cc` on PATH."""
    if "GITGUARD_CC" in os.environ:
        return os.environ["GITGUARD_CC"] or None
    return shutil.which("cc")


def built(store_dir: Path, python: str | None = None) -> Path | None:
    """The client if it is built for this interpreter and this source, else None."""
    cc = compiler()
    try:
        source = SOURCE.read_bytes()
    except OSError:
        return None
    target = path(store_dir)
    if cc is None or not os.access(target, os.X_OK):
        return None
    try:
        stamp = (store_dir / BIN_DIR / KEY_NAME).read_text().strip()
    except OSError:
        return None
    return target if stamp == _key(source, python or sys.executable, cc) else None


def build(store_dir: Path, python: str | None = None) -> Path | None:
    """The client, built now unless already built with the same key; None when it
    cannot be (no compiler, no source in this install, a compiler error)."""
    python = python or sys.executable
    found = built(store_dir, python)
    if found is not None:
        return found
    cc = compiler()
    try:
        source = SOURCE.read_bytes()
    except OSError:
        return None
    if cc is None or not store_dir.is_dir():
        return None
    bin_dir = store_dir / BIN_DIR
    durable.ensure_dir(bin_dir)
    key = _key(source, python, cc)
    with tempfile.TemporaryDirectory(prefix=".build-", dir=bin_dir) as tmp:
        program = Path(tmp) / "client.c"
        program.write_bytes(_config(python) + source)
        output = Path(tmp) / NAME
        try:
            # cc finds `as` and `ld` through PATH: an environment without one (the bench
            # clears it) gets the default search path, as a shell would use.
            env = {**os.environ, "PATH": os.environ.get("PATH") or os.defpath}
            done = subprocess.run([cc, "-O2", "-o", str(output), str(program)],
                                  stdin=subprocess.DEVNULL, capture_output=True, env=env,
                                  timeout=BUILD_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if done.returncode != 0 or not output.is_file():
            return None
        os.chmod(output, durable.EXEC_MODE)   # the hooks run it as the store's owner
        with contextlib.suppress(OSError):
            _fsync(output)
        os.replace(output, path(store_dir))
    durable.atomic_write(bin_dir / KEY_NAME, (key + "\n").encode())
    return path(store_dir)


def _key(source: bytes, python: str, cc: str) -> str:
    digest = hashlib.sha256(source)
    for part in (python, str(LAUNCHER), cc, repr((client.TAKEN, client.TAKE_S))):
        digest.update(b"\0" + os.fsencode(part))
    return digest.hexdigest()


def _config(python: str) -> bytes:
    launcher = str(LAUNCHER) if LAUNCHER.is_file() else ""
    return (b"#define GG_HAVE_CONFIG 1\n"
            b"static const char GG_PYTHON[] = " + _c_string(python) + b";\n"
            b"static const char GG_LAUNCHER[] = " + _c_string(launcher) + b";\n"
            # client.request's rule: wait this long for the worker to take the request
            b"#define GG_TAKEN %d\n#define GG_TAKE_S %d\n" % (client.TAKEN[0],
                                                              max(1, round(client.TAKE_S))))


def _c_string(text: str) -> bytes:
    """A C string literal of the path's bytes: octal escapes for all but plain ASCII."""
    out = bytearray(b'"')
    for byte in os.fsencode(text):
        if 0x20 <= byte < 0x7F and byte not in b'"\\?':
            out.append(byte)
        else:
            out += b"\\%03o" % byte
    return bytes(out + b'"')


def _fsync(file: Path) -> None:
    fd = os.open(file, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
