#!/usr/bin/env python3
"""CI's legs: gitguard as users install it, beside make's runs from the lock.

    python3 .ci/legs.py newest floors artifacts

newest     `pip install` of the source in a fresh venv, no lock: the newest versions
           pyproject.toml's ranges admit, on python3.11, and on 3.12 and 3.13 where found
floors     the same with every floor pinned (the build backend's too), wheels only, on
           python3.11 and 3.13
artifacts  the wheel and sdist built with the lock's tools (make's .venv), each installed
           by pip into a fresh venv and by `uv tool install` on another Python, then
           `gitguard init` and `gitguard integrate claude-code` in a new repository

Each newest and floors leg prints what moved against requirements-lock.txt, then runs
the watcher tests (with the newest pytest and hypothesis added, the runtime left as
installed), a daemon smoke (init, one call through the daemon, status, daemon status,
stop: each step killed at 60 s and failed past 20 s) and `gitguard demo`. The legs run
one after another and all run; the exit code is 1 when any failed. Stdlib only: it runs
on the machine's python3.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements-lock.txt"
LOCKED_BIN = ROOT / ".venv" / "bin"       # make's venv: the lock's build and uv
WATCHER_TESTS = ["tests/daemon/test_watcher.py", "tests/daemon/test_watch_limits.py"]
STEP_KILL_S = 60
STEP_SLOW_S = 20


class LegFailed(Exception):
    pass


def main(argv: list[str]) -> int:
    legs: dict[str, Callable[[Path, Path], list[str]]] = {
        "newest": newest, "floors": floors, "artifacts": artifacts}
    if not argv or any(name not in legs for name in argv):
        print(__doc__, file=sys.stderr)
        return 2
    passed: list[str] = []
    failed: list[str] = []
    skipped: list[str] = []
    for name in argv:
        for version in PYTHONS[name]:
            label = f"{name} {version}".strip()
            banner(label)
            python, why = find_python(version) if version else (Path(sys.executable), "")
            if python is None and version != "3.11":    # 3.11, make's Python, must be here
                print(f"skipped: {label}: no usable python{version} ({why})", flush=True)
                skipped.append(f"{label}: no usable python{version} ({why})")
                continue
            try:
                if python is None:
                    raise LegFailed(f"no usable python{version} ({why})")
                with tempfile.TemporaryDirectory(prefix=f"gg-{name}-") as tmp:
                    skipped += legs[name](python, Path(tmp))
                passed.append(label)
            except LegFailed as exc:
                print(f"FAILED {label}: {exc}", flush=True)
                failed.append(label)
    print()
    for label in failed:
        print(f"FAILED leg: {label}")
    for reason in skipped:
        print(f"skipped: {reason}")
    print(f"legs: {len(passed)} passed, {len(failed)} failed", flush=True)
    return 1 if failed else 0


# -- the legs ------------------------------------------------------------------------------

PYTHONS = {"newest": ["3.11", "3.12", "3.13"], "floors": ["3.11", "3.13"], "artifacts": [""]}


def newest(python: Path, tmp: Path) -> list[str]:
    venv = make_venv(python, tmp / "venv")
    pip(venv, "install", "--quiet", str(source_copy(tmp)))
    return check_installed(venv, tmp)


def floors(python: Path, tmp: Path) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    runtime = [floor_of(req) for req in project["project"]["dependencies"]]
    build = [floor_of(req) for req in project["build-system"]["requires"]]
    print("floors: " + " ".join(runtime + build), flush=True)
    venv = make_venv(python, tmp / "venv")
    pip(venv, "install", "--quiet", "--only-binary=:all:", *runtime, *build)
    # Built with the floor of the build backend, and pip left to check the ranges hold.
    pip(venv, "install", "--quiet", "--no-build-isolation", str(source_copy(tmp)))
    installed = versions(venv)
    moved = []
    for pin in runtime + build:
        name, floor = pin.split("==")
        got = installed.get(norm(name), "none")
        if re.sub(r"(\.0)+$", "", got) != re.sub(r"(\.0)+$", "", floor):   # 1.16 is 1.16.0
            moved.append(f"{pin} (installed: {got})")
    if moved:
        raise LegFailed("not at the floor: " + ", ".join(moved))
    return check_installed(venv, tmp)


def artifacts(python: Path, tmp: Path) -> list[str]:
    run(["make", "-s", "-C", str(ROOT), ".venv/.installed"])
    dist = tmp / "dist"
    run([str(LOCKED_BIN / "python"), "-m", "build", "--no-isolation", "--outdir", str(dist),
         str(source_copy(tmp))], quiet=True)
    (wheel,) = dist.glob("*.whl")
    (sdist,) = dist.glob("*.tar.gz")
    print(f"built {wheel.name} and {sdist.name}", flush=True)
    has_client = shutil.which("cc") is not None
    expected = r"py3-none-manylinux_\d+_\d+_\w+" if has_client else r"py3-none-any"
    if not re.fullmatch(rf"gitguard-[^-]+-{expected}\.whl", wheel.name):
        raise LegFailed(f"{wheel.name}: expected a {expected} wheel")
    skipped: list[str] = []
    # uv tool installs on another Python than the one that built: the tag must allow it.
    other, why = next(((p, "") for p in (find_python(v)[0] for v in ("3.12", "3.13")) if p),
                      (python, "no python3.12 or 3.13: uv tool install on the build's Python"))
    if why:
        skipped.append(f"artifacts: {why}")
    for kind, artifact in (("wheel", wheel), ("sdist", sdist)):
        venv = make_venv(python, tmp / f"pip-{kind}")
        pip(venv, "install", "--quiet", str(artifact))
        first_use(venv / "bin" / "gitguard", tmp / f"pip-{kind}-use", has_client)
        tools = tmp / f"uv-{kind}"
        uv_env = {**os.environ, "UV_TOOL_DIR": str(tools / "tools"),
                  "UV_TOOL_BIN_DIR": str(tools / "bin"), "UV_PYTHON_DOWNLOADS": "never"}
        run([str(LOCKED_BIN / "uv"), "tool", "install", "--quiet", "--python", str(other),
             str(artifact)], env=uv_env)
        first_use(tools / "bin" / "gitguard", tmp / f"uv-{kind}-use", has_client)
    return skipped


# -- what each leg checks ------------------------------------------------------------------

def check_installed(venv: Path, tmp: Path) -> list[str]:
    pip(venv, "install", "--quiet", "pytest", "hypothesis")   # the runtime stays as it is
    against_lock(venv)
    suite = tmp / "suite"       # the tests beside no gitguard/: they import the installed one
    shutil.copytree(ROOT / "tests", suite / "tests",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", suite)
    env = user_env(tmp / "home")
    checks: list[Callable[[], object]] = [
        lambda: run([str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p",
                     "no:cacheprovider", *WATCHER_TESTS], cwd=suite, timeout=1200),
        lambda: smoke(venv / "bin" / "gitguard", tmp / "smoke", env),
        lambda: step(venv / "bin" / "gitguard", "demo", cwd=tmp, env=env, slow_s=120,
                     kill_s=300)]
    failures = []
    for check in checks:        # each runs even when one before it failed: all say what they see
        try:
            check()
        except LegFailed as exc:
            print(f"FAILED: {exc}", flush=True)
            failures.append(str(exc).splitlines()[0])
    if failures:
        raise LegFailed("; ".join(failures))
    return []


def smoke(gitguard: Path, work: Path, env: dict[str, str]) -> None:
    """init, one call through the daemon, status, daemon status, stop."""
    repo = new_repo(work, env)
    stopped = False
    try:
        step(gitguard, "init", cwd=repo, env=env)
        begun = json.loads(step(gitguard, "call", "begin", "--tool", "Write", "--writes",
                                "a.txt", "--json", cwd=repo, env=env))
        call_id = begun["callId"]
        (repo / "a.txt").write_text("written by the call\n")
        step(gitguard, "call", "end", call_id, "--status", "succeeded", cwd=repo, env=env)
        status = json.loads(step(gitguard, "status", "--json", cwd=repo, env=env))
        owner = {d["path"]: d["owner"] for d in status["dirty"]}.get("a.txt")
        if owner != call_id:
            raise LegFailed(f"status --json gives a.txt to {owner!r}, not {call_id}")
        daemon = json.loads(step(gitguard, "daemon", "status", "--json", cwd=repo, env=env))
        served = {r.get("op") for r in daemon.get("requests", {}).get("recent", [])}
        if not {"call.begin", "call.end"} <= served:
            raise LegFailed(f"the daemon did not serve the call (it served {sorted(served)})")
        step(gitguard, "daemon", "status", cwd=repo, env=env)
        step(gitguard, "daemon", "stop", cwd=repo, env=env)
        stopped = True
    finally:
        if not stopped:
            subprocess.run([str(gitguard), "daemon", "stop"], cwd=repo, env=env,
                           timeout=STEP_KILL_S * 2, check=False)


def first_use(gitguard: Path, work: Path, has_client: bool) -> None:
    """What a user does first with an installed gitguard: init, integrate claude-code."""
    env = user_env(work / "home")
    repo = new_repo(work, env)
    try:
        step(gitguard, "init", cwd=repo, env=env)
        step(gitguard, "integrate", "claude-code", cwd=repo, env=env)
        settings = (repo / ".claude" / "settings.local.json").read_text()
        if has_client and "nativeclient" not in settings:
            raise LegFailed("the hook commands do not use the installed native client:\n"
                            + settings)
    finally:
        subprocess.run([str(gitguard), "daemon", "stop"], cwd=repo, env=env,
                       timeout=STEP_KILL_S * 2, check=False, capture_output=True)


def against_lock(venv: Path) -> None:
    """gitguard's own dependencies as installed, then each installed package whose version
    is not the lock's or that the lock does not hold."""
    locked = {norm(name): version for name, version
              in re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", LOCK.read_text(), re.M)}
    installed = versions(venv)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    ours = [norm(re.split(r"[^A-Za-z0-9_.-]", req, maxsplit=1)[0])
            for req in project["dependencies"]]
    python = run([str(venv / "bin" / "python"), "-c",
                  "import platform; print(platform.python_version())"], quiet=True).strip()
    print(f"installed on Python {python}: "
          + ", ".join(f"{name} {installed.get(name, 'none')}" for name in ours), flush=True)
    moved = []
    for name, version in sorted(installed.items()):
        if name in ("pip", "gitguard"):     # pip: each venv's own, newest
            continue
        if name not in locked:
            moved.append(f"  {name} {version} (not in the lock)")
        elif locked[name] != version:
            moved.append(f"  {name} {locked[name]} -> {version}")
    print(f"against {LOCK.relative_to(ROOT)}: "
          + (f"{len(moved)} moved\n" + "\n".join(moved) if moved else "nothing moved"),
          flush=True)


# -- helpers -------------------------------------------------------------------------------

def find_python(version: str) -> tuple[Path | None, str]:
    """A python{version} that runs and makes venvs, wherever this machine keeps one."""
    candidates = [shutil.which(f"python{version}"),
                  *sorted(glob.glob(os.path.expanduser(
                      f"~/.pyenv/versions/{version}.*/bin/python{version}"))),
                  f"/usr/local/bin/python{version}", f"/usr/bin/python{version}"]
    tried = []
    for candidate in dict.fromkeys(c for c in candidates if c and os.access(c, os.X_OK)):
        probe = subprocess.run(
            [candidate, "-c", "import sys, ensurepip, venv; "
             "print('%d.%d' % sys.version_info[:2], sys.executable)"],
            capture_output=True, text=True, timeout=60, check=False)
        got = probe.stdout.split()
        if probe.returncode == 0 and got[:1] == [version]:
            return Path(got[1]), ""
        tried.append(f"{candidate}: {(probe.stderr.strip().splitlines() or got or ['?'])[-1]}")
    return None, "; ".join(tried) or ("none on PATH, in ~/.pyenv/versions or "
                                      "/usr(/local)/bin")


def make_venv(python: Path, where: Path) -> Path:
    run([str(python), "-m", "venv", str(where)])
    pip(where, "install", "--quiet", "--upgrade", "pip")
    return where


def pip(venv: Path, *args: str) -> None:
    run([str(venv / "bin" / "python"), "-m", "pip", *args])


def versions(venv: Path) -> dict[str, str]:
    listed = run([str(venv / "bin" / "python"), "-m", "pip", "list", "--format=json"],
                 quiet=True)
    return {norm(p["name"]): p["version"] for p in json.loads(listed)}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def floor_of(requirement: str) -> str:
    match = re.match(r"([A-Za-z0-9_.-]+)[^;]*?>=\s*([\w.]+)", requirement)
    if not match:
        raise LegFailed(f"{requirement!r} has no floor (>=): every dependency needs one")
    return f"{match[1]}=={match[2]}"


def source_copy(tmp: Path) -> Path:
    """The tracked files, as a clean clone has them: the build writes there, not in ROOT."""
    source = tmp / "source"
    names = run(["git", "-C", str(ROOT), "ls-files", "-z"], quiet=True).split("\0")
    for name in filter(None, names):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    return source


def user_env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text("[user]\n\tname = CI\n\temail = ci@example.com\n"
                                     "[init]\n\tdefaultBranch = main\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITGUARD_", "GIT_"))}
    return {**env, "HOME": str(home), "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
            "GIT_CONFIG_NOSYSTEM": "1"}


def new_repo(work: Path, env: dict[str, str]) -> Path:
    repo = work / "repo"
    repo.mkdir(parents=True)
    (repo / "README.md").write_text("# project\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "initial"]):
        run(["git", *args], cwd=repo, env=env, quiet=True)
    return repo


def step(gitguard: Path, *args: str, cwd: Path, env: dict[str, str],
         slow_s: float = STEP_SLOW_S, kill_s: float = STEP_KILL_S) -> str:
    """One gitguard command as a user runs it: failed when it fails or is slow."""
    line = f"gitguard {' '.join(args)}"
    started = time.monotonic()
    try:
        done = subprocess.run([str(gitguard), *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=kill_s, check=False)
    except subprocess.TimeoutExpired as exc:
        said = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        raise LegFailed(f"{line}: killed after {kill_s:.0f} s\n{said[-2000:]}") from exc
    took = time.monotonic() - started
    print(f"  {took:6.2f} s  {line}  (exit {done.returncode})", flush=True)
    if done.returncode != 0:
        raise LegFailed(f"{line} exited {done.returncode}:\n{done.stdout[-2000:]}"
                        f"{done.stderr[-2000:]}")
    if took > slow_s:
        raise LegFailed(f"{line} took {took:.1f} s (more than {slow_s:.0f} s)")
    return done.stdout


def run(command: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 900, quiet: bool = False) -> str:
    if not quiet:
        print("$ " + " ".join(command), flush=True)
    try:
        done = subprocess.run(command, cwd=cwd, env=env, timeout=timeout, check=False,
                              stdout=subprocess.PIPE if quiet else None, text=True)
    except subprocess.TimeoutExpired as exc:
        raise LegFailed(f"{command[0]}: killed after {timeout:.0f} s") from exc
    if done.returncode != 0:
        raise LegFailed(f"{' '.join(command)} exited {done.returncode}")
    return done.stdout or ""


def banner(label: str) -> None:
    print(f"\n===== {label} " + "=" * max(0, 70 - len(label)), flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
