"""The wheel setup.py builds: tagged by what it holds (a program for the platform, never a
Python ABI), with the native client where a C compiler exists, and a build that says so
where none does. Each test builds a copy of the tracked source with pip, as a user's
`pip install` would, against this environment's setuptools (no isolation, no network)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers import native
from tests.helpers.commands import git
from tests.helpers.paths import ROOT

CLIENT = "gitguard/nativeclient"


def build_wheel(tmp: Path, env: dict[str, str] | None = None) -> tuple[Path, str]:
    """The wheel built from a copy of the tracked files, and pip's -v output."""
    source = tmp / "source"
    for name in git(ROOT, "ls-files", "-z").split("\0"):
        if name and (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    out = tmp / "dist"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps",
                           "--no-build-isolation", "--no-index", "-w", str(out), str(source)],
                          capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = out.glob("*.whl")
    return wheel, done.stdout + done.stderr


def tags_of(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/WHEEL")]
        return re.findall(r"^Tag: (\S+)$", zf.read(meta).decode(), re.M)


@pytest.fixture(scope="module")
def wheel_with_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if native.compiler() is None:
        pytest.skip(native.NO_COMPILER)
    return build_wheel(tmp_path_factory.mktemp("wheel"))[0]


def test_a_wheel_with_the_client_fits_every_python_on_its_platform(
        wheel_with_client: Path) -> None:
    platform = re.fullmatch(r"gitguard-[^-]+-py3-none-(\w+)\.whl", wheel_with_client.name)
    assert platform, wheel_with_client.name
    if sys.platform == "linux":
        assert re.fullmatch(r"manylinux_2_\d+_\w+", platform[1]), platform[1]
    assert tags_of(wheel_with_client) == [f"py3-none-{platform[1]}"]
    with zipfile.ZipFile(wheel_with_client) as zf:
        mode = zf.getinfo(CLIENT).external_attr >> 16
    assert mode & 0o111, oct(mode)


@pytest.mark.skipif(sys.platform != "linux" or shutil.which("objdump") is None,
                    reason="objdump (binutils) reads the client's dynamic section")
def test_the_manylinux_tag_covers_every_glibc_symbol_the_client_needs(
        wheel_with_client: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(wheel_with_client) as zf:
        program = Path(zf.extract(CLIENT, tmp_path))
    claimed = re.search(r"manylinux_(\d+)_(\d+)_", wheel_with_client.name)
    assert claimed
    symbols = subprocess.run(["objdump", "-T", str(program)], capture_output=True,
                             text=True, check=True).stdout
    needed = {(int(a), int(b)) for a, b in re.findall(r"\bGLIBC_(\d+)\.(\d+)", symbols)}
    assert needed and max(needed) <= (int(claimed[1]), int(claimed[2]))
    headers = subprocess.run(["objdump", "-p", str(program)], capture_output=True,
                             text=True, check=True).stdout
    assert re.findall(r"NEEDED\s+(\S+)", headers) == ["libc.so.6"]   # no libpython, no other


def test_without_a_compiler_the_wheel_is_pure_and_the_build_says_so(tmp_path: Path) -> None:
    env = {**os.environ, "CC": str(tmp_path / "no-such-cc")}
    wheel, output = build_wheel(tmp_path, env)
    assert re.fullmatch(r"gitguard-[^-]+-py3-none-any\.whl", wheel.name), wheel.name
    assert tags_of(wheel) == ["py3-none-any"]
    with zipfile.ZipFile(wheel) as zf:
        assert CLIENT not in zf.namelist()
        assert "gitguard/nativeclient.c" in zf.namelist()
        # the timeline page's skeleton, style and script, which it reads as package data
        assert {f"gitguard/review/timeline.{ext}" for ext in ("html", "css", "js")} <= set(
            zf.namelist())
    assert "gitguard's native hook client is not built" in output
