"""`gitguard hooks install|uninstall|status`: put the shims in place, never lose a user's hook.

Modelled on pre-commit: each shim carries an id line; a hook that was there before is
renamed (byte for byte, mode and symlinks included) to `<name>.gitguard-legacy` and the
shim still runs it first; uninstall renames it back over the shim. The suffix is not
pre-commit's `.legacy`, because pre-commit's own shim runs `<name>.legacy` itself: keeping
a pre-commit hook under that name would make it run itself.

`core.hooksPath` is respected: a directory inside this repository that git does not
track (husky's `.husky/_`) gets the shims with a notice; a tracked directory, or one
outside the repository (shared by other repositories), is refused with a hint.

Only these commands change the user's hooks (DESIGN.md invariant 1); none touches the
git config.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from gitguard import durable, nativeclient
from gitguard.errors import GitguardError
from gitguard.gitcmd import run_git
from gitguard.integrations.git_hooks import HOOKS
from gitguard.store import Store
from gitguard.workspace import Workspace

SHIM_ID = "gitguard-shim-7c1e9a2f5b04d3e8"
KEPT_SUFFIX = ".gitguard-legacy"
PRE_COMMIT_LEGACY = ".legacy"  # where pre-commit keeps the hook it replaced (maybe ours)
_PYTHON_LINE = re.compile(rb"^python=''(?=  #)", re.MULTILINE)
_RECORDED = re.compile(rb"^python=(.*?)  #", re.MULTILINE)
_LAUNCHER_LINE = re.compile(rb"^launcher=''(?=  #)", re.MULTILINE)
_NATIVE_LINE = re.compile(rb"^native=''(?=  #)", re.MULTILINE)


@dataclass(frozen=True)
class HooksDir:
    path: Path
    configured: str | None  # core.hooksPath as the user wrote it; None when unset
    notice: str | None = None


@dataclass(frozen=True)
class HookState:
    name: str
    state: str        # installed | installed-under-legacy | not-installed
    action: str = ""  # what install/uninstall just did
    kept: bool = False
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "state": self.state, "action": self.action,
                "kept": self.kept, "detail": self.detail}


@dataclass(frozen=True)
class Report:
    hooks_dir: HooksDir
    hooks: list[HookState] = field(default_factory=list)
    python: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"hooksDir": str(self.hooks_dir.path), "hooksPath": self.hooks_dir.configured,
                "notice": self.hooks_dir.notice, "python": self.python,
                "hooks": [h.to_json() for h in self.hooks]}


def template(name: str) -> bytes:
    return resources.files("gitguard").joinpath("hookshims", name).read_bytes()


def render(name: str, python: str, native: Path | None = None) -> bytes:
    """The shim for `name` with the interpreter that runs gitguard written into it."""
    quoted = shlex.quote(python).encode()
    shim, count = _PYTHON_LINE.subn(lambda _: b"python=" + quoted, template(name))
    if count != 1:
        raise GitguardError(f"the packaged {name} shim has no interpreter line",
                            "reinstall gitguard; the package is damaged")
    launcher = Path(__file__).resolve().parents[1] / "hookmain.py"
    if launcher.is_file():      # not inside a zip: the shim runs it without site-packages
        where = shlex.quote(str(launcher)).encode()
        shim = _LAUNCHER_LINE.sub(lambda _: b"launcher=" + where, shim, count=1)
    if native is not None:      # the native client: no interpreter start while a daemon answers
        where = shlex.quote(str(native)).encode()
        shim = _NATIVE_LINE.sub(lambda _: b"native=" + where, shim, count=1)
    return shim


def is_ours(path: Path) -> bool:
    if path.is_symlink() or not path.is_file():
        return False
    with path.open("rb") as fh:
        return SHIM_ID.encode() in fh.read(512)


def _git(ws: Workspace, *args: str) -> str:
    proc = run_git(list(args), git_dir=ws.git_dir, work_tree=ws.root, check=False)
    return proc.stdout.decode(errors="surrogateescape").strip() if proc.returncode == 0 else ""


def locate(ws: Workspace, for_install: bool = True) -> HooksDir:
    if not ws.is_git:
        raise GitguardError(f"{ws.root} is not a git repository: there are no git hooks",
                            "agent hooks still work: gitguard integrate claude-code")
    configured = _git(ws, "config", "--get", "core.hooksPath") or None
    path = Path(_git(ws, "rev-parse", "--path-format=absolute", "--git-path", "hooks"))
    common = Path(_git(ws, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    if configured is None or path == common / "hooks" or common in path.parents:
        return HooksDir(path, configured)
    if ws.root not in path.parents:
        if not for_install:
            return HooksDir(path, configured)
        raise GitguardError(
            f"core.hooksPath is {configured}, outside this repository: hooks there run for "
            "other repositories too, so gitguard will not install into it",
            "set core.hooksPath for this repository only, or unset it, then run "
            "`gitguard hooks install` again")
    rel = path.relative_to(ws.root).as_posix()
    if for_install and _git(ws, "ls-files", "--", rel):
        raise GitguardError(
            f"core.hooksPath is {configured}, a directory git tracks: gitguard will not write "
            "into your tracked files",
            f'call gitguard from your own hooks instead: add `gitguard hook git NAME "$@"` to '
            f"{rel}/NAME for NAME in {', '.join(HOOKS)} (pre-push and post-rewrite also need "
            "their stdin), or unset core.hooksPath")
    return HooksDir(path, configured, (
        f"core.hooksPath is {configured} (husky? lefthook?): gitguard installed its hooks "
        "there and still runs the ones it found. A tool that regenerates that directory "
        "(husky's `prepare`) removes them again: `gitguard hooks status` shows it, and "
        "`gitguard hooks install` puts them back."))


def _paths(where: HooksDir, name: str) -> tuple[Path, Path, Path]:
    hook = where.path / name
    return hook, hook.with_name(name + KEPT_SUFFIX), hook.with_name(name + PRE_COMMIT_LEGACY)


def _write_shim(path: Path, data: bytes) -> None:
    durable.atomic_write(path, data, mode=0o755)
    os.chmod(path, 0o755)  # atomic_write's mode passes through the umask


def install(ws: Workspace, python: str | None = None) -> Report:
    """Plan every hook first (refuse before touching anything), then put the shims in place."""
    where = locate(ws)
    python = python or sys.executable
    for name in HOOKS:
        hook, kept, legacy = _paths(where, name)
        if (os.path.lexists(hook) and not is_ours(hook) and not is_ours(legacy)
                and os.path.lexists(kept)):
            raise GitguardError(
                f"both {hook} and {kept} exist, and neither is gitguard's hook",
                f"gitguard keeps your hook as {kept.name}; move one of the two away, then run "
                "`gitguard hooks install` again")
    where.path.mkdir(parents=True, exist_ok=True)
    Store(ws).create()      # the native client is built into it
    native = nativeclient.build(ws.store_dir, python)
    states = []
    for name in HOOKS:
        hook, kept, legacy = _paths(where, name)
        shim = render(name, python, native)
        if is_ours(legacy) and not is_ours(hook):
            # Another tool (pre-commit) took the hook's place and runs ours as <name>.legacy.
            target, action = legacy, "updated under another tool's hook"
        elif is_ours(hook):
            target, action = hook, "updated"
        elif os.path.lexists(hook):
            os.rename(hook, kept)
            target, action = hook, "installed; your hook is kept and runs first"
        else:
            target, action = hook, "installed"
        if target.exists() and target.read_bytes() == shim:
            action = "unchanged"
        else:
            _write_shim(target, shim)
        states.append(HookState(name, _state_of(where, name), action,
                                os.path.lexists(kept)))
    return Report(where, states, python)


def uninstall(ws: Workspace) -> Report:
    """Put back each kept hook over gitguard's shim (byte for byte), or remove the shim."""
    where = locate(ws, for_install=False)
    states = []
    for name in HOOKS:
        hook, kept, legacy = _paths(where, name)
        ours = next((p for p in (hook, legacy) if is_ours(p)), None)
        if ours is not None and os.path.lexists(kept):
            os.replace(kept, ours)
            action = "your hook is back"
        elif ours is not None:
            ours.unlink()
            action = "removed"
        elif os.path.lexists(kept) and not os.path.lexists(hook):
            os.rename(kept, hook)  # an install interrupted between its two steps
            action = "your hook is back"
        else:
            action = "not installed"
        states.append(HookState(name, _state_of(where, name), action, False))
    return Report(where, states)


def _state_of(where: HooksDir, name: str) -> str:
    hook, _, legacy = _paths(where, name)
    if is_ours(hook):
        return "installed"
    if is_ours(legacy):
        return "installed-under-legacy"
    return "not-installed"


def status(ws: Workspace) -> Report:
    where = locate(ws, for_install=False)
    states = []
    recorded: str | None = None
    for name in HOOKS:
        hook, kept, legacy = _paths(where, name)
        state = _state_of(where, name)
        detail = ""
        shim = hook if state == "installed" else legacy
        if state != "not-installed":
            found = _RECORDED.search(shim.read_bytes())
            words = shlex.split(found.group(1).decode()) if found else []
            recorded = words[0] if words and words[0] else None
            if recorded and not os.access(recorded, os.X_OK):
                detail = f"its interpreter {recorded} is gone: it falls back to gitguard on PATH"
            if state == "installed-under-legacy":
                detail = f"another tool's hook runs it as {legacy.name}"
        elif os.path.lexists(kept):
            detail = (f"{name} was replaced by another tool; your earlier hook is still "
                      f"{kept.name}")
        states.append(HookState(name, state, "", os.path.lexists(kept), detail))
    return Report(where, states, recorded)
