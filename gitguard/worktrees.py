"""Every worktree of a repository: where one agent session may have worked.

A session moves between worktrees (`cd ../wt`, `claude --worktree NAME`, a subagent's
`isolation: "worktree"` in `.claude/worktrees/agent-...`), and each worktree has its own
store, so its calls are ledgered where they acted. `gitguard ledger --session S` and
`status --session S` read the store of every worktree git knows for the repository (the
main one and each linked one, nested ones included: `git worktree list`, through
pygit2), and show the session as one.
"""

from __future__ import annotations

from pathlib import Path

import pygit2

from gitguard.workspace import Workspace


def of_repository(ws: Workspace) -> list[Path]:
    """The working trees of `ws`'s repository: the main one first (unless the repository
    is bare), then the linked ones by path; `ws.root` is always there. A linked worktree
    whose directory is gone (git would prune it) is left out. A plain directory has one."""
    if not ws.is_git or ws.worktree_git_dir is None:
        return [ws.root]
    found: list[Path] = []
    try:
        repo = pygit2.Repository(str(ws.worktree_git_dir))
        main = _main_tree(ws.worktree_git_dir)
        if main is not None:
            found.append(main)
        linked = [ws.root] if ws.root != main else []
        for name in repo.list_worktrees():
            try:
                worktree = repo.lookup_worktree(name)
            except (pygit2.GitError, KeyError, ValueError):
                continue
            path = Path(worktree.path)
            if path.is_dir() and not worktree.is_prunable:
                linked.append(path.resolve())
        found += sorted(set(linked))
    except pygit2.GitError:
        found = [ws.root]
    return list(dict.fromkeys(found))


def _main_tree(git_dir: Path) -> Path | None:
    """The main working tree: the one whose git dir is the common dir (a linked worktree's
    git dir names it in `commondir`)."""
    common = git_dir
    named = git_dir / "commondir"
    if named.is_file():
        common = (git_dir / named.read_text(encoding="utf-8").strip()).resolve()
    try:
        workdir = pygit2.Repository(str(common)).workdir
    except pygit2.GitError:
        return None
    return Path(workdir).resolve() if workdir else None
