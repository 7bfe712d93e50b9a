"""Packing gitguard's loose objects, so the user's git never auto-gcs because of us.

Every snapshot writes a few loose objects. git runs `gc --auto` from the user's
own commands once about 6,700 loose objects pile up; the daemon packs them well
before that. All loose objects are packed, reachable or not (a blob hashed for a
tree that was never committed is unreachable until gc prunes it): packing moves
objects, it deletes none, refs and the index are untouched.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from gitguard.gitcmd import run_git
from gitguard.workspace import Workspace

THRESHOLD = 1000     # loose objects; git's own gc.auto default is 6700
_HEX = frozenset("0123456789abcdef")


def objects_dir(ws: Workspace) -> Path:
    out = run_git(["rev-parse", "--git-path", "objects"], git_dir=ws.git_dir).stdout
    path = Path(os.fsdecode(out.strip()))
    return path if path.is_absolute() else (ws.git_dir / path).resolve()


def loose_objects(objects: Path) -> list[str]:
    found: list[str] = []
    try:
        fanout = [d for d in os.listdir(objects) if len(d) == 2 and set(d) <= _HEX]
    except OSError:
        return found
    for prefix in fanout:
        try:
            names = os.listdir(objects / prefix)
        except OSError:
            continue
        found.extend(prefix + n for n in names if len(n) == 38 and set(n) <= _HEX)
    return found


def maybe_pack(ws: Workspace, log: logging.Logger, threshold: int = THRESHOLD
               ) -> dict[str, Any]:
    objects = objects_dir(ws)
    loose = loose_objects(objects)
    if len(loose) < threshold:
        return {"packed": 0, "loose": len(loose)}
    run_git(["pack-objects", "-q", str(objects / "pack" / "pack")], git_dir=ws.git_dir,
            stdin=("\n".join(loose) + "\n").encode())
    run_git(["prune-packed", "-q"], git_dir=ws.git_dir)
    after = len(loose_objects(objects))
    log.info("packed %d loose objects (%d left loose)", len(loose), after)
    return {"packed": len(loose), "loose": after}
