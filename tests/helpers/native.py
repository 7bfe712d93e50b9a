"""The package's native hook client, for the tests that run it.

setup.py builds it where a C compiler exists and installs the package without it where
none does (the hooks then start Python). A test that needs the client skips, saying why,
only on a machine without the compiler; with one, a missing client is a failure.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sysconfig
from pathlib import Path

import pytest

from gitguard import nativeclient

NO_COMPILER = ("no C compiler on this machine, so the package has no native client; the "
               "hooks start Python (the other tests cover that path)")


def compiler() -> str | None:
    """The C compiler setup.py would use, when this machine has one."""
    command = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shutil.which(shlex.split(command)[0])


def built() -> bool:
    """True when the client is built; False (the caller skips) when it cannot be here."""
    if os.access(nativeclient.PROGRAM, os.X_OK):
        return True
    assert compiler() is None, ("a C compiler is here but the native client is not built: "
                                "run `make .venv/.installed` (setup.py builds it)")
    return False


def program() -> Path:
    """The client's path; skips the test on a machine that cannot build it."""
    if not built():
        pytest.skip(NO_COMPILER)
    return nativeclient.PROGRAM
