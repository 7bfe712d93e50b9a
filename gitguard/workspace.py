"""Where the workspace is: a git worktree, or a plain directory with a private object store."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pygit2

from gitguard.errors import NotAWorkspace, UnsafePath

NON_GIT_STORE = ".agent-runtime"


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
    start = start.resolve()
    if not start.is_dir():
        raise NotAWorkspace(f"{start} is not a directory", "run gitguard inside your project")
    ceilings = os.environ.get("GIT_CEILING_DIRECTORIES", "")
    found = (pygit2.discover_repository(str(start), False, ceilings) if ceilings
             else pygit2.discover_repository(str(start)))
    if found is not None:
        repo = pygit2.Repository(found)
        if repo.is_bare or repo.workdir is None:
            raise NotAWorkspace(
                f"{Path(found)} is a bare repository: there is no working tree to guard",
                "run gitguard in a clone or a worktree of it",
            )
        worktree_git_dir = Path(repo.path).resolve()
        return Workspace(
            root=Path(repo.workdir).resolve(),
            git_dir=worktree_git_dir,
            store_dir=worktree_git_dir / "gitguard",
            is_git=True,
            worktree_git_dir=worktree_git_dir,
        )
    root = _find_runtime_root(start)
    store = root / NON_GIT_STORE
    return Workspace(root=root, git_dir=store / "objects.git", store_dir=store, is_git=False)


def _find_runtime_root(start: Path) -> Path:
    """The nearest directory up from `start` holding a store, as git finds `.git`: it never
    climbs into a directory of GIT_CEILING_DIRECTORIES (so a stray store in /tmp is not
    every temporary directory's)."""
    ceilings = {Path(p).resolve() for p in os.environ.get("GIT_CEILING_DIRECTORIES", "")
                .split(os.pathsep) if os.path.isabs(p)}
    for candidate in (start, *start.parents):
        if (candidate / NON_GIT_STORE).is_dir():
            return candidate
        if candidate.parent in ceilings:
            break
    return start


def ensure_object_store(ws: Workspace) -> None:
    """A plain directory gets a private bare repository that ignores the store itself."""
    if ws.is_git or (ws.git_dir / "HEAD").exists():
        return
    pygit2.init_repository(str(ws.git_dir), bare=True)
    exclude = ws.git_dir / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    exclude.write_text(f"/{NON_GIT_STORE}/\n")


def safe_relpath(ws: Workspace, path: str | os.PathLike[str]) -> str:
    """Normalise a path to workspace-relative form; refuse anything that leaves the workspace."""
    raw = os.fspath(path)
    if not raw:
        raise UnsafePath("an empty path is not a workspace file",
                         "name a file inside the workspace")
    candidate = Path(raw)
    absolute = candidate if candidate.is_absolute() else ws.root / candidate
    normal = Path(os.path.normpath(absolute))
    try:
        rel = normal.relative_to(ws.root)
    except ValueError:
        raise UnsafePath(f"{raw} is outside the workspace {ws.root}",
                         "gitguard only reads and writes files inside the workspace") from None
    if not rel.parts:
        raise UnsafePath(f"{raw} is the workspace itself, not a file in it",
                         "name a file inside the workspace")
    if rel.parts[0] in (".git", NON_GIT_STORE):
        raise UnsafePath(f"{raw} is inside gitguard's or git's own store",
                         "gitguard never writes there on an agent's behalf")
    # A symlinked parent directory could lead out of the workspace.
    parent = ws.root
    for part in rel.parts[:-1]:
        parent = parent / part
        if parent.is_symlink():
            target = parent.resolve()
            if target != ws.root and ws.root not in target.parents:
                raise UnsafePath(f"{raw} goes through the symlink {parent} out of the workspace",
                                 "gitguard never follows a link out of the workspace")
    return rel.as_posix()
