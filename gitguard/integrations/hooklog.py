"""Where a hook's internal error goes: a hook must never break git or the agent, so it logs."""

from __future__ import annotations

import os
import traceback
from pathlib import Path

from gitguard import clock
from gitguard.storage import durable

LOG_NAME = "hook-errors.log"


def log_failure(store_root: Path | None, what: str, exc: BaseException) -> str:
    """Append the traceback to the store's hook log, else to one in the user's private
    state directory (never a shared temp directory, never through a symlink); its path."""
    from gitguard.error_boundary import private_dir, state_dir

    text = (f"--- {clock.stamp()} {what}\n" + "".join(traceback.format_exception(exc))
            ).encode("utf-8", "replace")
    candidates = [store_root] if store_root is not None and store_root.is_dir() else []
    state = state_dir()
    if state is not None:
        candidates.append(state)
    for directory in candidates:
        try:
            if directory == state:
                private_dir(directory)
            # 0600 like every store file: a traceback can quote the payload it choked on
            fd = os.open(directory / LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                         | os.O_NOFOLLOW | os.O_CLOEXEC, durable.FILE_MODE)
            try:
                os.write(fd, text)
            finally:
                os.close(fd)
            return str(directory / LOG_NAME)
        except OSError:
            continue
    return "(nowhere: the log could not be written)"
