"""Where the workspace is: a git worktree, or a plain directory with a private object store."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pygit2

from gitguard.errors import NotAWorkspace, UnsafePath
from gitguard.store_discovery import NON_GIT_STORE as NON_GIT_STORE
from gitguard.store_discovery import STORE_IN_GIT, find_git_dir, find_runtime_root


@dataclass(frozen=True)
class Workspace:
    root: Path            # the working tree
    git_dir: Path         # the git dir whose objects and refs gitguard writes to
    store_dir: Path       # <git-dir>/gitguard or <root>/.agent-runtime
    is_git: bool          # False: a plain directory, objects live in .agent-runtime/objects.git
    worktree_git_dir: Path | None = None  # the per-worktree git dir (HEAD, index) when is_git

    @property
    def user_index(self) -> Path | None:
        return self.worktree_git_dir / "index" if self.worktree_git_dir else None


def discover(start: Path) -> Workspace:
    """The workspace `start` lies in, as git finds it: `GIT_DIR` (with `GIT_WORK_TREE` or
    `core.worktree`) first, then a repository up from `start`, else a plain directory.

    The git dir and the store come from gitguard.store_discovery, the rule the hooks'
    client (find_store) follows too; this opens the repository to learn its working tree."""
    start = start.resolve()
    if not start.is_dir():
        raise NotAWorkspace(f"{start} is not a directory", "run gitguard inside your project")
    env_dir = os.environ.get("GIT_DIR")
    found = find_git_dir(str(start))
    if found is not None:
        git_dir, tree = found
        if env_dir and not (os.path.exists(os.path.join(git_dir, "HEAD"))
                            or os.path.isfile(git_dir)):
            raise NotAWorkspace(f"GIT_DIR={env_dir} is not a git repository",
                                "unset GIT_DIR, or point it at your repository's git dir")
        repo = _open(git_dir)
        root = _work_tree(repo, tree)
        if root is None:
            raise NotAWorkspace(
                f"{Path(git_dir)} is a bare repository: there is no working tree to guard",
                "run gitguard in a clone or a worktree of it, or set GIT_WORK_TREE",
            )
        worktree_git_dir = Path(repo.path).resolve()
        return Workspace(
            root=root,
            git_dir=worktree_git_dir,
            store_dir=worktree_git_dir / STORE_IN_GIT,
            is_git=True,
            worktree_git_dir=worktree_git_dir,
        )
    runtime_root = find_runtime_root(str(start))
    root = Path(runtime_root) if runtime_root is not None else start
    store = root / NON_GIT_STORE
    return Workspace(root=root, git_dir=store / "objects.git", store_dir=store, is_git=False)


def _open(found: str) -> pygit2.Repository:
    try:
        return pygit2.Repository(found)
    except pygit2.GitError as exc:
        if "not owned by current user" not in str(exc):
            raise NotAWorkspace(f"{found} is not a git repository that gitguard can open: "
                                f"{exc}", "check GIT_DIR, or run `git status` there") from None
        top = Path(found.rstrip("/"))
        top = top.parent if top.name == ".git" else top
        raise NotAWorkspace(
            f"the repository at {top} belongs to another user (git calls this dubious "
            "ownership)",
            f"run gitguard as its owner, or trust it: git config --global --add "
            f"safe.directory {top}") from None


def _work_tree(repo: pygit2.Repository, tree: str | None) -> Path | None:
    """Where git would say the working tree is: GIT_WORK_TREE, core.worktree, else where
    the rule found the `.git` (`tree`; with GIT_DIR alone, the start); None when bare.

    Not `repo.workdir` there: opened by its git dir, a repository made with
    `--separate-git-dir` says the git dir's parent."""
    if os.environ.get("GIT_WORK_TREE") and tree is not None:
        return Path(tree).resolve()
    if "core.worktree" in repo.config and repo.workdir is not None:
        return Path(repo.workdir).resolve()
    if repo.is_bare or tree is None:
        return None
    return Path(tree).resolve()


def ensure_object_store(ws: Workspace) -> None:
    """A plain directory gets a private bare repository that ignores the store itself."""
    if ws.is_git or (ws.git_dir / "HEAD").exists():
        return
    pygit2.init_repository(str(ws.git_dir), bare=True)
    exclude = ws.git_dir / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    exclude.write_text(f"/{NON_GIT_STORE}/\n")


def safe_relpath(ws: Workspace, path: str | os.PathLike[str], links: bool = True) -> str:
    """Normalise a path to workspace-relative form; refuse anything that leaves the workspace.

    `links=False`: the string checks only, no look at symlinks on the way (rollback reads
    what is there itself, and a link an agent made must not refuse the whole rollback).

    On strings, not Path objects: every `call begin` runs it for each declared path, and
    the pathlib version cost ~0.2 ms a path (tests/test_safe_relpath.py compares the
    two over odd paths and symlinks)."""
    raw = os.fspath(path)
    if not raw:
        raise UnsafePath("an empty path is not a workspace file",
                         "name a file inside the workspace")
    root = str(ws.root)
    normal = os.path.normpath(raw if raw.startswith("/") else os.path.join(root, raw))
    prefix = root if root.endswith("/") else root + "/"
    if normal == root:
        raise UnsafePath(f"{raw} is the workspace itself, not a file in it",
                         "name a file inside the workspace")
    if not normal.startswith(prefix):
        raise UnsafePath(f"{raw} is outside the workspace {ws.root}",
                         "gitguard only reads and writes files inside the workspace")
    rel = normal[len(prefix):]
    parts = rel.split("/")
    if parts[0] in (".git", NON_GIT_STORE):
        raise UnsafePath(f"{raw} is inside gitguard's or git's own store",
                         "gitguard never writes there on an agent's behalf")
    if not links:
        return rel
    # A symlinked parent directory could lead out of the workspace.
    parent = root
    for part in parts[:-1]:
        parent = os.path.join(parent, part)
        if _is_symlink(parent):
            try:
                target = Path(parent).resolve()
            except (RuntimeError, OSError):     # RuntimeError: a symlink loop (3.11)
                raise UnsafePath(f"{raw} goes through {parent}, a symlink that leads nowhere "
                                 "(a loop, or a path the system cannot follow)",
                                 "fix or remove that symlink; gitguard never follows it"
                                 ) from None
            if target != ws.root and ws.root not in target.parents:
                raise UnsafePath(f"{raw} goes through the symlink {parent} out of the workspace",
                                 "gitguard never follows a link out of the workspace")
    return rel


def _is_symlink(path: str) -> bool:
    """Path.is_symlink on a string: False when there is nothing there, other errors raise."""
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            raise
        return False
    except ValueError:
        return False
