"""The errors domain code raises; `gitguard.error_boundary` turns them into exit codes."""

from __future__ import annotations

import os

EXIT_OK = 0
EXIT_USER = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_REFUSED = 4
EXIT_CONFLICTS = 5
EXIT_NOT_RUNNING = 6        # `daemon status` only: no daemon runs for this worktree


class GitguardError(Exception):
    """An error the user can fix: a short message and a hint saying how.

    `code` names the class on the daemon's wire (`error_boundary.to_wire`): the client
    rebuilds the same class from it, whatever the classes are called in either version."""

    exit_code = EXIT_USER
    code = "error"

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__ and BY_CODE.setdefault(cls.code, cls) is not cls:
            raise TypeError(f"{cls.__name__}: error code {cls.code!r} is taken")


BY_CODE: dict[str, type[GitguardError]] = {GitguardError.code: GitguardError}


class NotAWorkspace(GitguardError):
    """The path is unusable as a workspace (bare repository, missing directory)."""

    code = "not_a_workspace"


class StoreError(GitguardError):
    """The store is missing, unreadable, locked or corrupt."""

    code = "store"


class CorruptRecord(StoreError):
    """A checksummed record does not match: never silently skipped."""

    code = "corrupt_record"


class IllegalTransition(GitguardError):
    """A ledger status change the state machine forbids."""

    code = "illegal_transition"


class UnknownId(GitguardError):
    """A call, checkpoint or session id that does not exist."""

    code = "unknown_id"


class ReplayRefused(GitguardError):
    """The replay policy refuses to run a call again."""

    exit_code = EXIT_REFUSED
    code = "replay_refused"


class MergeRefused(GitguardError):
    """`conflicts resolve --merge` could not prove its result keeps every user line: it
    wrote nothing and the conflict stays pending (exit 5, like a merge with markers)."""

    exit_code = EXIT_CONFLICTS
    code = "merge_refused"


class UnsafePath(GitguardError):
    """A path that would leave the workspace."""

    code = "unsafe_path"


class KeyProblem(GitguardError):
    """The store's encryption key is missing, malformed or not this store's key."""

    code = "key_problem"


class DaemonStopped(GitguardError):
    """The daemon took a request and gave no answer (it died or hung): whether the request
    ran is unknown."""

    exit_code = EXIT_INTERNAL
    code = "daemon_stopped"


class InternalError(GitguardError):
    """A bug, as the user is told about it: the hint names the crash log."""

    exit_code = EXIT_INTERNAL
    code = "internal"


# errno values that say the machine, not gitguard, is short of something the user can give
_FULL = {28: "no space left", 122: "disk quota exceeded"}      # ENOSPC, EDQUOT
_READ_ONLY = 30                                                # EROFS
_DENIED = (1, 13)                                              # EPERM, EACCES
# ... and the words git, libgit2 and Python use for them in a message
_MESSAGES = (("No space left on device", 28), ("Out of diskspace", 28),
             ("Disk quota exceeded", 122), ("Read-only file system", 30))
NEARLY_FULL_KIB = 1024      # below this a failed write is taken for a full disk


def translate(exc: BaseException) -> GitguardError | None:
    """An exception that is about what the user sent or what the machine lacks (a full
    disk, a read-only store, too little memory, a value nested too deeply to process), as
    the error the user can fix; None for anything else (a bug: exit 3 and a crash log).

    Every error boundary asks this before treating an exception as a bug: a full disk
    printed a 60-line traceback from whichever write met it first."""
    if isinstance(exc, GitguardError):
        return exc
    if isinstance(exc, RecursionError):
        return GitguardError("a value given to gitguard nests too deeply to process",
                             "pass a flatter value (a tool's input is usually a few levels "
                             "deep)")
    if isinstance(exc, MemoryError):
        return GitguardError("gitguard ran out of memory",
                             "free some memory, or pass a smaller input")
    code, path = _errno_of(exc)
    if code is not None:
        return _for_errno(code, path)
    store = _store_here()
    if store is not None and _from_storage(exc) and nearly_full(store):
        # On a nearly full disk libgit2 and git fail with words of their own (at 48 KB free:
        # "the global/xdg file 'ignore' doesn't exist"): the disk is the cause to report.
        full = _for_errno(28, store)
        assert full is not None
        return GitguardError(f"{full.message}; what failed: {type(exc).__name__}: {exc}",
                             full.hint)
    return None


def translate_text(text: str, near: str | None) -> GitguardError | None:
    """The same for a message (git's stderr): `near` is where it was writing."""
    for phrase, code in _MESSAGES:
        if phrase in text:
            return _for_errno(code, _quoted_path(text) or near)
    return None


def nearly_full(path: str) -> bool:
    free = _free_kib(path)
    return free is not None and free < NEARLY_FULL_KIB


def _for_errno(code: int, path: str | None) -> GitguardError | None:
    path = path or _store_here()
    if code in _FULL:
        where = f" on the file system holding {path}" if path else ""
        free = _free_kib(path)
        return GitguardError(
            f"{_FULL[code]}{where}" + (f" ({free} KiB free)" if free is not None else ""),
            f"free at least {NEARLY_FULL_KIB} KiB there and run the command again (gitguard's "
            "next records and snapshot need room); nothing was half-written")
    if code == _READ_ONLY:
        return GitguardError(f"{path or 'the gitguard store'} is on a read-only file system",
                             "remount it read-write, or run gitguard where it can write its "
                             "store")
    if code in _DENIED and path:
        return GitguardError(f"permission denied: {path}",
                             "check the owner and mode of that path (the store is private "
                             "to the user who created it)")
    return None


def _from_storage(exc: BaseException) -> bool:
    """An error of the kind a failed read or write gives: an OSError, or libgit2's."""
    return isinstance(exc, OSError) or type(exc).__module__.lstrip("_").startswith("pygit2")


def _errno_of(exc: BaseException) -> tuple[int | None, str | None]:
    """(errno, path) of an OSError, or of a git error whose message names one."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:     # the cause chain
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno is not None:
            name = current.filename
            return current.errno, (str(name) if name is not None else None)
        text = str(current)
        for phrase, code in _MESSAGES:
            if phrase in text:
                return code, _quoted_path(text)
        current = current.__cause__ or current.__context__
    return None, None


def _quoted_path(text: str) -> str | None:
    """libgit2 and git name the file in their message ("failed to write '/x/y': ...")."""
    for quote in ("'", '"'):
        start = text.find(quote + "/")
        if start >= 0:
            end = text.find(quote, start + 1)
            if end > start:
                return text[start + 1:end]
    return None


def _store_here() -> str | None:
    """The store of the current directory (an OSError without a file name)."""
    from gitguard.store_discovery import find_store

    try:
        found = find_store(os.getcwd())
    except OSError:
        return None
    return found[1] if found else None


def _free_kib(path: str | None) -> int | None:
    here = path
    while here:
        try:
            info = os.statvfs(here)
        except OSError:
            parent = os.path.dirname(here)
            here = None if parent == here else parent
            continue
        return info.f_bavail * info.f_frsize // 1024
    return None


class WatcherUnusable(GitguardError):
    """The daemon cannot hear the workspace (its watcher is deaf, or the inotify watch
    limit leaves no room for the tree): it does not serve, and the hooks work in-process."""

    code = "watcher_unusable"
