"""`gitguard hooks install|uninstall|status`: put the shims in place, never lose a user's hook.

Modelled on pre-commit: each shim carries an id line; a hook that was there before is
renamed (byte for byte, mode and symlinks included) to `<name>.gitguard-legacy` and the
shim still runs it first; uninstall renames it back over the shim. The suffix is not
pre-commit's `.legacy`, because pre-commit's own shim runs `<name>.legacy` itself: keeping
a pre-commit hook under that name would make it run itself.

Another hook manager's hook stays where its owner looks for it, so that the owner's own
uninstall still takes effect:

* pre-commit's hook runs `<name>.legacy`: gitguard's shim goes there, beneath it (a hook
  pre-commit kept there moves to `<name>.gitguard-legacy` and runs under the shim).
  `pre-commit uninstall` then puts the shim back in `<name>` itself. Renaming pre-commit's
  hook away instead left it running after `pre-commit uninstall` (which only removes a
  hook of its own at `<name>`) and came back with `gitguard hooks uninstall`.
* lefthook removes every file carrying its mark, whatever the name, and keeps the hook it
  replaced as `<name>.old`, which it never runs: its hook is kept as `.gitguard-legacy`
  (its uninstall deletes it there too), and a shim of ours it moved to `.old` is removed
  when the shim takes `<name>` back, or gets back the hook the shim kept on uninstall.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitguard import nativeclient
from gitguard.errors import GitguardError
from gitguard.git.commands import run_git
from gitguard.integrations.git_hooks import HOOKS
from gitguard.storage import durable
from gitguard.storage.store import Store
from gitguard.workspace import Workspace

SHIM_ID = "gitguard-shim-7c1e9a2f5b04d3e8"
SHIM_SOURCE = "shim.sh"
KEPT_SUFFIX = ".gitguard-legacy"
PRE_COMMIT_LEGACY = ".legacy"  # where pre-commit keeps the hook it replaced (maybe ours)
LEFTHOOK_OLD = ".old"          # where lefthook keeps the hook it replaced; it never runs it
_DIRS_FILE = "hooks-dirs"      # in the store: the hooks directories install wrote into
# pre-commit's `is_our_script` marks (pre_commit/commands/install_uninstall.py, 4.x)
_PRE_COMMIT_IDS = (b"138fd403232d2ddd5efb44317e38bf03", b"4d9958c90bc262f47553e2c073f14cfe",
                   b"d8ee923c46731b42cd95cc869add4062", b"49fd668cb42069aa1b6048464be5d395",
                   b"79f09a650522a87b0da915d0d983b2de", b"e358c9dae00eac5d06b38dfdb1e33a8c")
_HOOK_LINE = re.compile(rb"^hook=''(?=  #)", re.MULTILINE)
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


def template() -> bytes:
    """The one shim source: top-level `hooks/shim.sh`, which the wheel holds as
    `gitguard/hooks/shim.sh` (setup.py maps it there) and a source checkout (an editable
    install) has beside the package."""
    package = Path(__file__).resolve().parents[1]
    for where in (package / "hooks", package.parent / "hooks"):
        try:
            return (where / SHIM_SOURCE).read_bytes()
        except FileNotFoundError:
            continue
    raise GitguardError(f"the hook shim ({SHIM_SOURCE}) is missing from {package}",
                        "reinstall gitguard; the package is damaged")


def render(name: str, python: str, native: Path | None = None) -> bytes:
    """The shim for hook `name`, with the interpreter that runs gitguard written into it,
    and the package's launcher and native client when they are files."""
    fills = ((_HOOK_LINE, "hook", name), (_PYTHON_LINE, "python", python),
             (_LAUNCHER_LINE, "launcher", _launcher()),
             (_NATIVE_LINE, "native", None if native is None else str(native)))
    shim = template()
    for line, key, value in fills:
        if value is None:
            continue    # stays empty: the shim goes on to the next way of running gitguard
        # a function, not a template: the value's backslashes are not escapes
        shim, count = line.subn(_filled(key, value), shim, count=1)
        if count != 1:
            raise GitguardError(f"the packaged hook shim has no {key}= line",
                                "reinstall gitguard; the package is damaged")
    return shim


def _filled(key: str, value: str) -> Callable[[re.Match[bytes]], bytes]:
    line = key.encode() + b"=" + shlex.quote(value).encode()
    return lambda _: line


def _launcher() -> str | None:
    launcher = Path(__file__).resolve().parents[1] / "hookmain.py"
    return str(launcher) if launcher.is_file() else None   # a zip: `python -m gitguard`


def is_ours(path: Path) -> bool:
    if path.is_symlink() or not path.is_file():
        return False
    with path.open("rb") as fh:
        return SHIM_ID.encode() in fh.read(512)


def runs_legacy(path: Path) -> bool:
    """Is this pre-commit's hook, which runs `<name>.legacy` before its own checks?"""
    if not path.is_file():
        return False
    with path.open("rb") as fh:
        head = fh.read(4096)
    return any(mark in head for mark in _PRE_COMMIT_IDS)


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


def _paths(where: HooksDir | Path, name: str) -> tuple[Path, Path, Path, Path]:
    """The hook, the hook gitguard keeps, pre-commit's `.legacy` and lefthook's `.old`."""
    hook = (where.path if isinstance(where, HooksDir) else where) / name
    return (hook, hook.with_name(name + KEPT_SUFFIX), hook.with_name(name + PRE_COMMIT_LEGACY),
            hook.with_name(name + LEFTHOOK_OLD))


def _plan(hook: Path, kept: Path, legacy: Path) -> tuple[Path, Path | None]:
    """Where the shim goes and which hook (if any) moves to `kept` to make room for it."""
    if is_ours(legacy) and os.path.lexists(hook) and not is_ours(hook):
        return legacy, None     # already beneath another tool's hook (pre-commit installed last)
    if is_ours(hook) or not os.path.lexists(hook):
        return hook, None
    if runs_legacy(hook):       # beneath pre-commit's hook, which runs `.legacy` itself
        return legacy, legacy if os.path.lexists(legacy) else None
    return hook, hook


def _write_shim(path: Path, data: bytes) -> None:
    durable.atomic_write(path, data, mode=0o755)
    os.chmod(path, 0o755)  # atomic_write's mode passes through the umask


def install(ws: Workspace, python: str | None = None) -> Report:
    """Plan every hook first (refuse before touching anything), then put the shims in place."""
    where = locate(ws)
    python = python or sys.executable
    for name in HOOKS:
        hook, kept, legacy, old = _paths(where, name)
        _, moved = _plan(hook, kept, legacy)
        if moved is not None and os.path.lexists(kept) and is_ours(old):
            raise GitguardError(
                f"another tool (lefthook?) replaced gitguard's {name} hook and keeps it as "
                f"{old.name}, and your earlier hook is still {kept.name}",
                f"run `gitguard hooks uninstall` (your hook goes back to {old.name}, where "
                "that tool keeps the hook it replaced), then `gitguard hooks install`")
        if moved is not None and os.path.lexists(kept):
            raise GitguardError(
                f"both {moved} and {kept} exist, and neither is gitguard's hook",
                f"gitguard keeps your hook as {kept.name}; move one of the two away, then run "
                "`gitguard hooks install` again")
    where.path.mkdir(parents=True, exist_ok=True)
    Store(ws).create()
    _record_dir(ws, where.path)
    nativeclient.remove_old(ws.store_dir)   # older shims named it; they run Python without
    native = nativeclient.program()
    states = []
    for name in HOOKS:
        hook, kept, legacy, old = _paths(where, name)
        shim = render(name, python, native)
        target, moved = _plan(hook, kept, legacy)
        if target == legacy and moved is None and is_ours(legacy):
            action = "updated under another tool's hook"
        elif target == legacy:
            action = "installed under pre-commit's hook, which runs it"
        elif is_ours(hook):
            action = "updated"
        elif moved is not None:
            action = "installed; your hook is kept and runs first"
        else:
            action = "installed"
        if moved is not None:
            os.rename(moved, kept)
        for stale in (legacy, old):
            if target == hook and is_ours(stale):
                stale.unlink()  # a shim another tool moved aside, its tool gone: this replaces it
        if target.exists() and target.read_bytes() == shim:
            action = "unchanged"
        else:
            _write_shim(target, shim)
        states.append(HookState(name, _state_of(where.path, name), action,
                                os.path.lexists(kept)))
    return Report(where, states, python)


def uninstall(ws: Workspace) -> Report:
    """Put back each kept hook where gitguard's shim is (byte for byte), or remove the shim.

    The shim may sit where another tool moved it (`.legacy`, `.old`): the kept hook goes
    there, so that tool's own uninstall brings it back. Shims left in `<git-dir>/hooks`
    while core.hooksPath sends git elsewhere (husky set it after gitguard installed) go too.
    """
    where = locate(ws, for_install=False)
    states = [HookState(name, _state_of(where.path, name), _uninstall_one(where.path, name))
              for name in HOOKS]
    for other in dict.fromkeys([_default_dir(ws), *_recorded_dirs(ws)]):
        if other != where.path and other.is_dir():
            for name in HOOKS:
                _uninstall_one(other, name)
    (ws.store_dir / _DIRS_FILE).unlink(missing_ok=True)
    return Report(where, states)


def _recorded_dirs(ws: Workspace) -> list[Path]:
    """Every hooks directory `install` wrote into: git may have stopped looking there
    (husky's core.hooksPath unset by its uninstall) and the shims must still go."""
    try:
        raw = (ws.store_dir / _DIRS_FILE).read_bytes()
    except FileNotFoundError:
        return []
    return [Path(os.fsdecode(line)) for line in raw.split(b"\0") if line]


def _record_dir(ws: Workspace, directory: Path) -> None:
    dirs = _recorded_dirs(ws)
    if directory not in dirs:
        durable.atomic_write(ws.store_dir / _DIRS_FILE,
                             b"".join(os.fsencode(d) + b"\0" for d in [*dirs, directory]))


def _uninstall_one(directory: Path, name: str) -> str:
    hook, kept, legacy, old = _paths(directory, name)
    ours = next((p for p in (hook, legacy, old) if is_ours(p)), None)
    if ours is not None and os.path.lexists(kept):
        os.replace(kept, ours)
        return "your hook is back"
    if ours is not None:
        ours.unlink()
        return "removed"
    if os.path.lexists(kept) and not os.path.lexists(hook):
        os.rename(kept, hook)  # an install interrupted between its two steps
        return "your hook is back"
    return "not installed"


def _default_dir(ws: Workspace) -> Path:
    return Path(_git(ws, "rev-parse", "--path-format=absolute", "--git-common-dir")) / "hooks"


def _state_of(directory: Path, name: str) -> str:
    hook, _, legacy, old = _paths(directory, name)
    if is_ours(hook):
        return "installed"
    if is_ours(legacy) and os.path.lexists(hook):
        return "installed-under-legacy"     # the pre-commit convention: its hook runs .legacy
    if is_ours(legacy) or is_ours(old):
        return "displaced"     # kept aside by another tool that does not run it
    return "not-installed"


def push_guarded(ws: Workspace) -> bool:
    """Does git, pushing from this repository, run gitguard's pre-push check?"""
    try:
        where = locate(ws, for_install=False)
    except GitguardError:
        return False
    return _state_of(where.path, "pre-push") in ("installed", "installed-under-legacy")


def push_guard_warning(ws: Workspace, has_hidden_refs: bool) -> str | None:
    """The warning `status` and `verify` print when refs/gitguard/* exist unguarded."""
    if not ws.is_git or not has_hidden_refs or push_guarded(ws):
        return None
    return ("refs/gitguard/* exist and no gitguard pre-push hook runs here, so `git push "
            "--mirror` would send them (your untracked files included); run `gitguard hooks "
            "install`")


def status(ws: Workspace) -> Report:
    where = locate(ws, for_install=False)
    default = _default_dir(ws)
    if default != where.path and any(is_ours(default / n) for n in HOOKS):
        where = HooksDir(where.path, where.configured, (
            f"gitguard's hooks are in {default}, where git does not look while core.hooksPath "
            f"is {where.configured}: `gitguard hooks install` puts them in {where.path}"))
    states = []
    recorded: str | None = None
    for name in HOOKS:
        hook, kept, legacy, old = _paths(where, name)
        state = _state_of(where.path, name)
        detail = ""
        shim = next(p for p in (hook, legacy, old) if is_ours(p)) \
            if state != "not-installed" else hook
        if state != "not-installed":
            found = _RECORDED.search(shim.read_bytes())
            words = shlex.split(found.group(1).decode()) if found else []
            recorded = words[0] if words and words[0] else None
            if recorded and not os.access(recorded, os.X_OK):
                detail = f"its interpreter {recorded} is gone: it falls back to gitguard on PATH"
            if state == "installed-under-legacy":
                detail = f"another tool's hook runs it as {legacy.name}"
            elif state == "displaced":
                detail = (f"another tool replaced it and keeps it as {shim.name}, which that "
                          "tool does not run: `gitguard hooks install` puts it back")
        elif os.path.lexists(kept):
            detail = (f"{name} was replaced by another tool; your earlier hook is still "
                      f"{kept.name}")
        states.append(HookState(name, state, "", os.path.lexists(kept), detail))
    return Report(where, states, recorded)
