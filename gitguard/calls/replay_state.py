"""The state a call acts on, where that state decides whether running it again repeats it.

The replay identity of a call (`ledger.run_key`) is its tool, its input and, where it
matters, the state the input acts on (DESIGN.md, Classification). `git push` names what
it pushes only through the repository: a second `git push` after new commits pushes
other commits, so it is another push, not a replay of the first; the same push of the
same commits is. Other tools declare theirs in `.gitguard.toml`:

    [tools.Bash]
    replayKey = ["file:package.json", "git:HEAD"]

each item the content of a workspace file (`file:PATH`) or the commit a revision
resolves to (`git:REV`). Without a declared key and outside `git push`, the input alone
is the identity: `npm publish` of an unchanged package is the same call as before.
A call that declares the paths it writes acts on their content (its base).

One function decides, `calls.begin` asks it for every call, and the replay check reads
the key it returns from the ledger's index (`LedgerState.runs_of`) or from a walk of
the ledger alike: both compare `run_key`.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence

import pygit2

from gitguard.calls.shell_parse import SimpleCommand, split_argv, split_commands
from gitguard.errors import GitguardError, UnsafePath
from gitguard.storage import durable
from gitguard.workspace import Workspace, safe_relpath

# git's options that come before the subcommand and take a value as the next word.
_GIT_VALUE_OPTIONS = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace",
                                "--exec-path", "--config-env"})
# `git push` options that take a value as the next word.
_PUSH_VALUE_OPTIONS = frozenset({"-o", "--push-option", "--repo", "--receive-pack", "--exec"})
# `git push` options that push more than the named refs: every branch or tag counts.
_PUSH_ALL = frozenset({"--all", "--mirror", "--tags", "--follow-tags", "--branches"})
_HINT = "replayKey items are `file:PATH` (a workspace file) or `git:REV` (a revision)"


def replay_key(ws: Workspace, repo: pygit2.Repository | None, input_hash: str,
               command: str | Sequence[str] | None,
               declared: Sequence[str] | None, writes: Sequence[str] = ()) -> str | None:
    """The call's replay identity when state is part of it, else None (the input hash is).

    `command`: the shell command the call runs, if it is one; `declared`: the tool's
    `replayKey` from the config; `writes`: the workspace paths the call declares it
    writes, whose content now is the base it writes on (the same Edit on another base is
    another write)."""
    state: dict[str, str | None] = {f"base:{path}": _content(ws, path) for path in writes}
    for item in declared or ():
        state[item] = _declared(ws, repo, item)
    if command is not None and repo is not None:
        state.update(_pushes(repo, command))
    if not state:
        return None
    text = durable.canonical_json({"input": input_hash, "state": state})
    return "sha256:" + hashlib.sha256(text).hexdigest()


def _declared(ws: Workspace, repo: pygit2.Repository | None, item: str) -> str | None:
    kind, _, name = item.partition(":")
    if kind == "git" and name:
        return _resolve(repo, name) if repo is not None else None
    if kind == "file" and name:
        try:
            rel = safe_relpath(ws, name)
        except UnsafePath as exc:
            raise GitguardError(f"replayKey item {item!r}: {exc.message}", _HINT) from None
        return _content(ws, rel)
    raise GitguardError(f"replayKey item {item!r} in the gitguard config is not understood",
                        _HINT)


def _content(ws: Workspace, rel: str) -> str | None:
    """The blob id of a workspace path's bytes (a symlink's target), None when absent or
    unreadable (a name too long, a symlink loop on the way, no permission): no file can
    be there for the call to act on, so the input alone decides."""
    full = os.path.join(ws.root, rel)
    try:
        info = os.lstat(full)
        if stat.S_ISLNK(info.st_mode):
            return str(pygit2.hash(os.readlink(os.fsencode(full))))
        if not stat.S_ISREG(info.st_mode):
            return None
        return str(pygit2.hashfile(full))
    except OSError:
        return None


def _resolve(repo: pygit2.Repository, rev: str) -> str | None:
    try:
        return str(repo.revparse_single(rev).peel(pygit2.Commit).id)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        return None


def _pushes(repo: pygit2.Repository, command: str | Sequence[str]) -> dict[str, str | None]:
    """For every `git push` in the command: the commits it would push, as the oids of HEAD
    and of each refspec's source (`--all`, `--tags`: of every branch and tag).

    Not the remote-tracking refs: the push itself moves them, and the same push again
    would then look new. A push of the same commits after someone else pushed to the
    remote is a replay too: the agent is asked (`--confirm`), never silently let through.
    """
    parsed = split_commands(command) if isinstance(command, str) else split_argv(command)
    state: dict[str, str | None] = {}
    for number, cmd in enumerate(parsed.commands):
        args = push_args(cmd)
        if args is None:
            continue
        options, operands = split_push(args)
        at = f"push{number}"
        state[f"{at}:HEAD"] = _resolve(repo, "HEAD")
        if options & _PUSH_ALL:
            state[f"{at}:refs"] = _all_refs(repo)
        for spec in operands[1:]:
            source = spec.lstrip("+").partition(":")[0]
            state[f"{at}:{spec}"] = _resolve(repo, source or "HEAD") if source else None
    return state


def push_args(cmd: SimpleCommand) -> list[str] | None:
    """The arguments after `push` of a `git ... push ...` command, else None."""
    if not cmd.argv or os.path.basename(cmd.argv[0]) != "git":
        return None
    words = iter(cmd.argv[1:])
    for word in words:
        if word in _GIT_VALUE_OPTIONS:
            next(words, None)
        elif not word.startswith("-"):
            return list(words) if word == "push" else None
    return None


def split_push(args: Sequence[str]) -> tuple[set[str], list[str]]:
    options: set[str] = set()
    operands: list[str] = []
    words = iter(args)
    for word in words:
        if word == "--":
            operands.extend(words)
        elif word.startswith("-"):
            options.add(word.split("=", 1)[0])
            if word in _PUSH_VALUE_OPTIONS:
                next(words, None)
        else:
            operands.append(word)
    return options, operands


def _all_refs(repo: pygit2.Repository) -> str:
    """Every branch and tag with the object it names, hashed (what --all/--tags push)."""
    listing = sorted(f"{ref.name} {ref.target}" for ref in repo.references.iterator()
                     if ref.name.startswith(("refs/heads/", "refs/tags/")))
    return hashlib.sha256("\n".join(listing).encode()).hexdigest()

