"""What pyproject.toml cannot say: the native hook client compiled with the package, and
the hook shim's one source (top-level `hooks/`) shipped inside it as `gitguard/hooks/`.

`gitguard/nativeclient.c` becomes the program `gitguard/nativeclient` (see
gitguard/nativeclient.py) in the wheel, or beside its source in an editable install.
It is optional: with no C compiler (or a failing one) the build says so and goes on,
and gitguard's hook commands start Python themselves. The wheel is then still marked
for this platform, as any wheel that may hold a program.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sysconfig
from pathlib import Path

from setuptools import Command, find_packages, setup
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
        self.announce(f"warning: gitguard's native hook client is not built ({why}); the "
                      "hooks start Python instead", level=3)

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
        return True     # the wheel may hold a compiled program: not py3-none-any


setup(packages=[*find_packages(include=["gitguard*"]), "gitguard.hooks"],
      package_dir={"gitguard.hooks": "hooks"},
      package_data={"gitguard": ["py.typed", "nativeclient.c"], "gitguard.hooks": ["shim.sh"]},
      cmdclass={"build": build_with_native, "build_native": build_native},
      distclass=PlatformDistribution)
