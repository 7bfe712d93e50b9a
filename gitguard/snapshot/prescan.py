"""`resume` with no daemon: start its workspace scan's `git status` before the heavy imports.

A fresh `gitguard resume` spends about half a second importing pydantic, pygit2, click
and the models before its scan runs one `git status` of the whole workspace (449 ms at
100k files). The two are independent: git works in its own process on the other core
while Python imports. `gitguard.cli.entry` starts the status here (standard library only),
and `Snapshotter.scan` takes its output instead of running the same command again.

The early status runs before the store lock is taken, so it is read-only
(`GIT_OPTIONAL_LOCKS=0`: it never takes `stat.index.lock`, which a gitguard process that
holds the lock may need for its `update-index`). Its output is used only when it is still
the answer the scan would get: the same git dir, work tree and stat index, and a stat
index that no one replaced since (git replaces an index by rename, so the inode changes).
Otherwise it is dropped and the scan runs as always. An edit to the workspace between the
early status and the lock is a race with the user either way: an edit a moment after the
scan's own status is missed just the same.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False   # not typing.TYPE_CHECKING: entry.py stays free of `typing` imports
if TYPE_CHECKING:
    import subprocess

# `Snapshotter._status("--untracked-files=normal")` through `git.commands.run_git`, flag for flag
# (tests/snapshot/test_prescan.py compares the two outputs, and checks with GIT_TRACE that a CLI
# resume runs this status once).
_CONFIG = ("-c", "core.quotepath=off", "-c", "gc.auto=0", "-c", "maintenance.auto=false",
           "-c", "core.untrackedCache=true")
STATUS = ("status", "--porcelain=v2", "-z", "--no-renames", "--ignore-submodules=all",
          "--untracked-files=normal")
STAT_INDEX = "stat.index"


class _Early:
    def __init__(self, key: tuple[str, str, str], seen: tuple[int, int, int, int],
                 proc: subprocess.Popen[bytes]) -> None:
        self.key = key
        self.seen = seen
        self.proc = proc

    def drop(self) -> None:
        self.proc.kill()
        self.proc.communicate()


_PENDING: _Early | None = None


def _stat_of(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def git_dir_of(store: str) -> str:
    """The git dir `workspace.discover` pairs with a store `store_discovery.find_store` found."""
    if os.path.basename(store) == "gitguard":      # <git dir>/gitguard
        return os.path.dirname(store)
    return os.path.join(store, "objects.git")       # .agent-runtime/objects.git


def start(root: str, store: str) -> None:
    """Start the scan's first `git status` for the workspace at `root`. Nothing when there
    is no stat index yet: the scan seeds it first, so it could not use this answer."""
    global _PENDING
    index = os.path.join(store, STAT_INDEX)
    seen = _stat_of(index)
    if seen is None or _PENDING is not None:
        return
    import subprocess

    from gitguard.git.commands import git_env

    git_dir = git_dir_of(store)
    cmd = ["git", f"--git-dir={git_dir}", f"--work-tree={root}", *_CONFIG, *STATUS]
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, cwd=root,
                                env=git_env({"GIT_INDEX_FILE": index}))
    except OSError:
        return
    _PENDING = _Early((git_dir, root, index), seen, proc)


def take(git_dir: os.PathLike[str] | str, work_tree: os.PathLike[str] | str,
         stat_index: os.PathLike[str] | str) -> bytes | None:
    """The early status's output when it answers for exactly this scan now; None (and the
    early process ended) otherwise. Called under the store lock, once per process."""
    global _PENDING
    early, _PENDING = _PENDING, None
    if early is None:
        return None
    key = (os.fspath(git_dir), os.fspath(work_tree), os.fspath(stat_index))
    if key != early.key or _stat_of(key[2]) != early.seen:
        early.drop()
        return None
    out, _ = early.proc.communicate()
    if early.proc.returncode != 0:
        return None         # the scan's own status reports the failure
    # git wrote no index (no optional locks): the stat index is still the one it read.
    if _stat_of(key[2]) != early.seen:
        return None
    return out


def pending() -> bool:
    return _PENDING is not None


def drop() -> None:
    """End an early status nobody took (tests; a resume refused before its scan)."""
    global _PENDING
    early, _PENDING = _PENDING, None
    if early is not None:
        early.drop()
