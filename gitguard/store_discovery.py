"""Where a directory's store is: the one rule, for `workspace.discover` and `find_store`.

Whenever there is a git dir the store is in it (`<git dir>/gitguard`), never in the
working tree, where `git add -A` would commit it; a plain directory has its store in
`.agent-runtime/` beside its files. The git dir is found as git finds it: `GIT_DIR`
first, else up from the directory.

`find_store` answers from a few stats, without opening the repository: a hook's fresh
process asks it before anything beyond the standard library is imported, to reach the
daemon. `workspace.discover` takes the same git dir and opens it with pygit2 to learn the
working tree (`core.worktree`, a bare repository). Standard library only.
"""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False   # not typing's: `typing` costs milliseconds to import
if TYPE_CHECKING:
    from collections.abc import Iterator

STORE_IN_GIT = "gitguard"
NON_GIT_STORE = ".agent-runtime"


def find_git_dir(start: str) -> tuple[str, str | None] | None:
    """(git dir, working tree) for the absolute directory `start`, or None: no repository.

    `GIT_DIR` wins (relative to `start`; a `.git` file it names is followed). Otherwise up
    from `start` as git searches: at each directory a `.git` that is a git dir, or a
    `.git` file naming one, or the directory itself a git dir (bare, unless it is a
    `.git`); never into a directory of GIT_CEILING_DIRECTORIES, nor onto another file
    system (git's and libgit2's default). A `.git` file that names nothing readable is
    returned as the git dir itself: opening it says what is wrong.

    The working tree is GIT_WORK_TREE (relative to `start`) when set; else with GIT_DIR
    `start`, else the directory the `.git` was found in, None for a bare repository.
    core.worktree is the opener's to read (workspace.discover)."""
    env_dir = os.environ.get("GIT_DIR")
    found: tuple[str, str | None] | None = None
    if env_dir:
        named = os.path.normpath(os.path.join(start, env_dir))
        found = (_gitfile_target(named) or named) if os.path.isfile(named) else named, start
    else:
        for here in _upwards(start, stay_on_device=True):
            dot_git = os.path.join(here, ".git")
            try:
                mode = os.stat(dot_git).st_mode
            except OSError:
                mode = 0
            if stat.S_ISREG(mode):
                found = _gitfile_target(dot_git) or dot_git, here
            elif stat.S_ISDIR(mode) and os.path.isfile(os.path.join(dot_git, "HEAD")):
                found = dot_git, here
            elif _is_git_dir(here):
                found = here, os.path.dirname(here) if os.path.basename(here) == ".git" else None
            if found is not None:
                break
    env_tree = os.environ.get("GIT_WORK_TREE")
    if found is not None and env_tree:
        return found[0], os.path.normpath(os.path.join(start, env_tree))
    return found


def find_runtime_root(start: str) -> str | None:
    """The nearest directory up from `start` holding a `.agent-runtime` store, as git finds
    `.git`: never climbing into a directory of GIT_CEILING_DIRECTORIES (so a stray store
    in /tmp is not every temporary directory's)."""
    for here in _upwards(start, stay_on_device=False):
        if os.path.isdir(os.path.join(here, NON_GIT_STORE)):
            return here
    return None


def find_store(start: str) -> tuple[str, str] | None:
    """(workspace root, store dir) of an existing or future store for `start`, or None
    when there is no repository and no `.agent-runtime` up from it. The root is what the
    rule alone says (see find_git_dir): with core.worktree the daemon, which opens the
    repository, knows better."""
    here = os.path.abspath(start)
    found = find_git_dir(here)
    if found is not None:
        git_dir, tree = found
        return None if tree is None else (tree, os.path.join(git_dir, STORE_IN_GIT))
    root = find_runtime_root(here)
    return None if root is None else (root, os.path.join(root, NON_GIT_STORE))


def _upwards(start: str, stay_on_device: bool) -> Iterator[str]:
    """`start` and its parents, up to (not into) a ceiling directory, and with
    `stay_on_device` not onto another file system. (Lazily: most walks end at `start`.)"""
    yield start
    ceilings = {os.path.realpath(p) for p in
                os.environ.get("GIT_CEILING_DIRECTORIES", "").split(os.pathsep)
                if os.path.isabs(p)}
    device = _device(start) if stay_on_device else None
    here = start
    while True:
        parent = os.path.dirname(here)
        if parent == here or parent in ceilings:
            return
        if device is not None and _device(parent) != device:
            return
        yield parent
        here = parent


def _device(path: str) -> int | None:
    try:
        return os.stat(path).st_dev
    except OSError:
        return None


def _is_git_dir(path: str) -> bool:
    """What git takes for a bare repository: HEAD, and objects and refs (or, for a linked
    worktree's own git dir, a `commondir` naming them). A `.git` directory needs only
    HEAD: one stat, on the path every hook takes."""
    return os.path.isfile(os.path.join(path, "HEAD")) and (
        (os.path.isdir(os.path.join(path, "objects"))
         and os.path.isdir(os.path.join(path, "refs")))
        or os.path.isfile(os.path.join(path, "commondir")))


def _gitfile_target(path: str) -> str | None:
    """The git dir a `.git` file names ("gitdir: PATH", relative to the file)."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as fh:
            text = fh.read().strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    target = text[len("gitdir:"):].strip()
    return os.path.normpath(os.path.join(os.path.dirname(path), target))
