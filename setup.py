"""What pyproject.toml cannot say: the native hook client compiled with the package, and
the hook shim's one source (top-level `hooks/`) shipped inside it as `gitguard/hooks/`.

`gitguard/nativeclient.c` becomes the program `gitguard/nativeclient` (see
gitguard/nativeclient.py) in the wheel, or beside its source in an editable install.
It is optional: with no C compiler (or a failing one) the build warns and goes on,
and gitguard's hook commands start Python themselves.

The wheel's tag: the client is a plain program that links no libpython, so a wheel that
holds it fits every Python 3 on its platform, `py3-none-<platform>`, and one without it
is `py3-none-any`. On Linux the platform is manylinux_X_Y (PEP 600) with X.Y the newest
glibc symbol version the built client needs. The C source uses only libc and the program
links nothing else; tests/test_packaging.py reads its symbols and libraries with objdump.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sysconfig
import warnings
from pathlib import Path

from setuptools import Command, find_packages, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build import build
from setuptools.dist import Distribution

SOURCE = Path("gitguard", "nativeclient.c")
PROGRAM = SOURCE.with_suffix("")


class build_native(Command):  # noqa: N801 - setuptools names commands this way
    description = "compile gitguard's native hook client (skipped without a C compiler)"
    user_options: list[tuple[str, str | None, str]] = []

    def initialize_options(self) -> None:
        self.build_lib: str | None = None
        self.editable_mode = False
        self.built: list[str] = []

    def finalize_options(self) -> None:
        self.set_undefined_options("build_py", ("build_lib", "build_lib"))

    def run(self) -> None:
        target = PROGRAM if self.editable_mode else Path(self.build_lib or "build", PROGRAM)
        target.parent.mkdir(parents=True, exist_ok=True)
        compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
        command = [*compiler, "-O2", "-o", str(target), str(SOURCE)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False,
                                  timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self._skip(f"{compiler[0]}: {exc}", target)
            return
        if done.returncode != 0 or not target.is_file():
            self._skip(f"{' '.join(command)} failed: {done.stderr.strip()[-500:]}", target)
            return
        os.chmod(target, 0o755)
        self.built = [str(target)]

    def _skip(self, why: str, target: Path) -> None:
        target.unlink(missing_ok=True)      # never an old program beside a newer source
        # A Python warning, not setuptools' log: pip hides a successful build's output
        # unless -v, but it passes a build backend's warnings on (pip 26.3 even with -q;
        # pip 25.3 only with -v); build and uv build print them on stderr.
        warnings.warn(f"gitguard's native hook client is not built ({why}); the hooks "
                      "will start Python instead (about 20 ms more per hook)", stacklevel=1)

    def get_source_files(self) -> list[str]:
        return [str(SOURCE)]

    def get_outputs(self) -> list[str]:
        return self.built

    def get_output_mapping(self) -> dict[str, str]:
        return {}


class build_with_native(build):  # noqa: N801
    sub_commands = [*build.sub_commands, ("build_native", None)]


class PlatformDistribution(Distribution):
    def has_ext_modules(self) -> bool:
        return True     # the build may hold a compiled program: platlib, and a platform tag


class bdist_wheel_program(bdist_wheel):  # noqa: N801
    """Tags the wheel by what it holds: a program for the platform, never a Python ABI
    (whether the client is in it is known only after the build, when the tag is asked)."""

    def get_tag(self) -> tuple[str, str, str]:
        program = Path(self.bdist_dir, PROGRAM)
        if not program.is_file():
            return "py3", "none", "any"
        return "py3", "none", glibc_platform(super().get_tag()[2], program)


def glibc_platform(platform: str, program: Path) -> str:
    """linux_<arch> becomes manylinux_X_Y_<arch>, X.Y the newest glibc version the program
    needs (never below 2.17, manylinux2014: older tags are not defined on every architecture).
    Every version a dynamic program needs is named in its string table as GLIBC_X.Y, so
    the largest such string in the file bounds them; any other is harmless, it only
    narrows the claim. A program that names no glibc version (musl) keeps linux_<arch>."""
    if not platform.startswith("linux_"):
        return platform
    needed = [(int(major), int(minor)) for major, minor
              in re.findall(rb"GLIBC_(\d+)\.(\d+)", program.read_bytes())]
    if not needed:
        return platform
    major, minor = max([*needed, (2, 17)])
    return f"manylinux_{major}_{minor}_{platform.removeprefix('linux_')}"


setup(packages=[*find_packages(include=["gitguard*"]), "gitguard.hooks"],
      package_dir={"gitguard.hooks": "hooks"},
      package_data={"gitguard": ["py.typed", "nativeclient.c"], "gitguard.hooks": ["shim.sh"],
                    "gitguard.review": ["timeline.html", "timeline.css", "timeline.js"]},
      cmdclass={"build": build_with_native, "build_native": build_native,
                "bdist_wheel": bdist_wheel_program},
      distclass=PlatformDistribution)
