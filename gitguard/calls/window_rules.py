"""What a command whose writes cannot be read from its words owns in its window (issue 31,
item 2). Pure functions; docs/rollback.md states the rules, each with a test.

Such a command (a build, an installer, a test runner, a script) keeps its window: what
changed while it ran is its own, on `window` confidence. Two rules narrow that, because
inotify does not say which process wrote and a person works beside the command:

- **Strays.** A file created during the window that the command did not name, in a
  directory that existed before and that the command did not touch, is not the call's.
  A directory the command touched is the one it runs in (and any it `cd`s into: a
  lock file, a report lands there), one in which a file that was there before the
  window changed or went, or one that did not exist before the window (a build's
  `build/`, `*.egg-info/`, `__pycache__/`). So a note the user saves in `docs/` while
  `pytest` runs at the top stays the user's; a file the command creates elsewhere, next
  to nothing else it changed, is left alone by a rollback too (the safe direction: it
  is listed as yours).
- **Open history.** Its change to a file you changed earlier since the checkpoint a
  rollback goes back to (a change outside every call window, in the checkpoint chain or
  the daemon's records alike) is `ambiguous`: it may be your own save while the command
  ran. A rollback makes it a conflict and never reverts it; `--merge` keeps it as yours
  (`timeline.history`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import pygit2

from gitguard.calls.attribution import declares


def parent(path: str) -> str:
    return path.rpartition("/")[0]


def strays(changes: Iterable[tuple[str, str | None]], named: frozenset[str],
           existed: Callable[[str], bool], worked_in: Iterable[str] = ("",)) -> set[str]:
    """The new files among `changes` ((path, oid before or None)) that no word named, in a
    directory that `existed` before the window, that the command did not work in
    (`worked_in`, workspace-relative: "" is the top) and where nothing that was there
    before changed: not the command's."""
    changes = list(changes)
    touched = {parent(path) for path, before in changes if before is not None}
    touched |= set(worked_in)
    found: set[str] = set()
    for path, before in changes:
        if before is not None or declares(named, path) or path in touched:
            continue                    # (a path that was a directory it changed: its)
        where = parent(path)
        if where in touched:
            continue
        if where and not existed(where):
            touched.add(where)          # the command made the directory: its files are its
            continue
        found.add(path)
    return found


def dirs_of(repo: pygit2.Repository, tree: str) -> Callable[[str], bool]:
    """Whether a directory is in the tree (what `strays` asks of the tree before)."""
    root = repo.get(tree)

    def existed(path: str) -> bool:
        if not isinstance(root, pygit2.Tree):
            return False
        try:
            return root[path].type_str == "tree"
        except KeyError:
            return False

    return existed


def worked_in(command: str | list[str], cwd: str) -> frozenset[str]:
    """The directories a command line runs in, workspace-relative: `cwd` ("" for the top)
    and every directory it `cd`s into (one outside the workspace is left out)."""
    import os

    from gitguard.calls.shell_parse import split_argv, split_commands

    parsed = split_commands(command) if isinstance(command, str) else split_argv(command)
    found = {cwd}
    here = cwd
    for cmd in parsed.commands:
        if cmd.argv and os.path.basename(cmd.argv[0]) == "cd" and len(cmd.argv) > 1:
            if os.path.isabs(cmd.argv[1]):
                continue
            here = os.path.normpath(os.path.join(here or ".", cmd.argv[1]))
            here = "" if here == "." else here
            if here == ".." or here.startswith("../"):
                continue
            found.add(here)
    return frozenset(found)


def command_dirs(command: str | list[str] | None, tool_input: Mapping[str, object],
                 root: str) -> frozenset[str] | None:
    """`worked_in` for a call's command, from its input (`cwd`, else the top); None when
    it ran no command whose writes cannot be read from its words (the rules do not apply)."""
    import os

    from gitguard.calls.shell_targets import written_paths

    if command is None or written_paths(command, "/") is not None:
        return None
    where = tool_input.get("cwd")
    base = os.path.normpath(os.path.join(root, where) if isinstance(where, str) else root)
    rel = os.path.relpath(base, root)
    start = "" if rel == "." or rel == ".." or rel.startswith("../") else rel
    return worked_in(command, start)
