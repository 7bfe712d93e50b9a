"""The native hook client (`nativeclient.c`): where the package holds it, and the store's
copy that older gitguards built.

Every agent tool call runs a hook command twice (call begin, call end). With the Python
client each is an interpreter start (~19-26 ms here) before the daemon's answer; the
native client costs about a millisecond, and when the daemon does not run the command it
execs the Python entry with the same arguments and stdin, so what happens is the same.
setup.py builds it when the package is built or installed (`make .venv/.installed`
too); with no C compiler there it is simply absent, and the hook commands start Python
themselves. Nothing is built at run time and nothing executable is put in the store.

`GITGUARD_NATIVE=0` writes hook commands without it (the tests run both ways).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

SOURCE = Path(__file__).with_name("nativeclient.c")
PROGRAM = SOURCE.with_suffix("")        # setup.py builds SOURCE into this program
# Older gitguards built the client into the store at run time (`<store>/bin/gitguard`,
# with its build key beside it); hook commands and shims they wrote still name it.
OLD_BIN_DIR = "bin"
OLD_NAMES = ("gitguard", "gitguard.key")


def program() -> Path | None:
    """The installed client when the package has one (and GITGUARD_NATIVE is not "0")."""
    if os.environ.get("GITGUARD_NATIVE") == "0":
        return None
    return PROGRAM if os.access(PROGRAM, os.X_OK) else None


def old_program(store_dir: Path) -> Path:
    return store_dir / OLD_BIN_DIR / OLD_NAMES[0]


def remove_old(store_dir: Path) -> bool:
    """Remove the client an older gitguard built into the store: it speaks a framing
    the daemon no longer reads. The hook commands and shims that named it test that it is
    there, and start Python without it. Whether there was one."""
    old = store_dir / OLD_BIN_DIR
    if not old.is_dir() or old.is_symlink():
        return False
    for name in OLD_NAMES:
        with contextlib.suppress(FileNotFoundError):
            (old / name).unlink()
    for leftover in old.glob(".build-*"):    # an old build interrupted
        shutil.rmtree(leftover, ignore_errors=True)
    with contextlib.suppress(OSError):
        old.rmdir()
    return True
