"""The one error boundary: domain code raises these, only the CLI turns them into exit codes."""

from __future__ import annotations

EXIT_OK = 0
EXIT_USER = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_REFUSED = 4
EXIT_CONFLICTS = 5


class GitguardError(Exception):
    """An error the user can fix: a short message and a hint saying how."""

    exit_code = EXIT_USER

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class NotAWorkspace(GitguardError):
    """The path is unusable as a workspace (bare repository, missing directory)."""


class StoreError(GitguardError):
    """The store is missing, unreadable, locked or corrupt."""


class CorruptRecord(StoreError):
    """A checksummed record does not match: never silently skipped."""


class IllegalTransition(GitguardError):
    """A ledger status change the state machine forbids."""


class UnknownId(GitguardError):
    """A call, checkpoint or session id that does not exist."""


class ReplayRefused(GitguardError):
    """The replay policy refuses to run a call again."""

    exit_code = EXIT_REFUSED


class UnsafePath(GitguardError):
    """A path that would leave the workspace."""
