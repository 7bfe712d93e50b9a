"""Where a hook's internal error goes: a hook must never break git or the agent, so it logs."""

from __future__ import annotations

import os
import traceback
from pathlib import Path

from gitguard import clock, durable

LOG_NAME = "hook-errors.log"


def log_failure(store_root: Path | None, what: str, exc: BaseException) -> str:
    """Append the traceback to the store's hook log (else the temp dir's); return its path."""
    text = f"--- {clock.stamp()} {what}\n" + "".join(traceback.format_exception(exc))
    candidates = [store_root / LOG_NAME] if store_root is not None and store_root.is_dir() else []
    candidates.append(Path(os.environ.get("TMPDIR", "/tmp")) / f"gitguard-{LOG_NAME}")
    for target in candidates:
        try:
            # 0600 like every store file: a traceback can quote the payload it choked on
            fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, durable.FILE_MODE)
            with os.fdopen(fd, "a", encoding="utf-8", errors="replace") as fh:
                fh.write(text)
            return str(target)
        except OSError:
            continue
    return "(nowhere: the log could not be written)"
