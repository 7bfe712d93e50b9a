"""Following the agent's own undo: Claude Code's `/rewind` (issue 30 item 2; docs/recovery.md,
"Rewinds").

`detect` reads a session's transcript (rewind_transcript.py) and marks each ledgered call
of a rewound turn with `rewoundAt`, `rewoundBy` and `rewoundFiles` (a `mark` event: its
status stays what it was). `rewoundFiles` says whether "restore code" put back what the
call wrote: `restored` when every file it changed holds again what it held when the
rewound prompt was sent (file-history's backup, else the call's recorded before-state),
`kept` when one does not (a conversation-only rewind, or edits since), None when it
changed no file.

What that changes, in one place each:
- replay.rewound_local: a rewound call with no external effect may run again, leaves the
  "last completed step" and the do-not-repeat list (replay.blocks, steps.last_completed);
- timeline.build: a rewound call whose files were restored owns no change (status and
  rollback-files do not undo it a second time);
- a call with an external effect (a publish, a push) stays as it was: the rewind did not
  undo it, and the note says so.

Detection is cheap where it runs: not on every PreToolUse. It runs at Stop (each turn's
end), at SessionStart, when the replay guard is about to refuse a call (the rare path:
a redo of a rewound edit), and in `status`, `resume`, `explain` and `rollback-files`. A
transcript whose size and mtime did not change since the last look is not read again;
otherwise only what was appended is read (`rewind_transcript.look_on`), and the whole
file only when a new prompt does not go on from the last turn. `rewinds/SESSION.json` in
the store remembers the path, size and mtime, the offset and the last turn's entries.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pygit2

from gitguard import clock
from gitguard.errors import GitguardError
from gitguard.fileops import current_state
from gitguard.integrations import rewind_transcript
from gitguard.ledger import journal
from gitguard.models import TERMINAL, ToolLedgerEntry
from gitguard.storage import durable, trace_log

if TYPE_CHECKING:
    from gitguard.guard_context import GuardContext

DIR = "rewinds"


def _state_path(g: GuardContext, session_id: str) -> Path:
    return g.store.root / DIR / f"{session_id}.json"


def _seen(g: GuardContext, session_id: str) -> dict[str, object]:
    try:
        value = json.loads(_state_path(g, session_id).read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _stat(path: str) -> list[int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns]


def detect(g: GuardContext, session_id: str | None, transcript_path: str | None,
           call_id_of: Mapping[str, str] | None = None) -> list[str]:
    """Mark the ledgered calls of the session's rewound turns; the call ids marked now.
    `call_id_of`: tool_use id -> gitguard call id where they differ (an unsafe id)."""
    if not session_id or not transcript_path:
        return []
    stat = _stat(transcript_path)
    seen = _seen(g, session_id)
    same = seen.get("transcript") == transcript_path
    if stat is None or (same and seen.get("stat") == stat):
        return []
    offset, turn = seen.get("offset"), seen.get("turn")
    since = (rewind_transcript.Look(offset, frozenset(str(u) for u in turn))
             if same and isinstance(offset, int) and isinstance(turn, list) else None)
    look, suspect = rewind_transcript.look_on(transcript_path, since)
    marked: list[str] = []
    if suspect:         # a prompt that does not go on from the last turn: read it all
        found = rewind_transcript.read(transcript_path)
        if found.rewinds:
            with g.store.writing():
                marked = _mark(g, session_id, found, call_id_of or {})
    _remember(g, session_id, transcript_path, stat, look)
    return marked


def wait_written(path: str, marker: str, timeout: float = 2.0) -> bool:
    """Wait until the transcript holds `marker` (the tool_use id of the call a hook runs
    for); whether it does. Claude Code appends to its transcript in the background: at a
    PreToolUse its newest entries, the prompt of a turn resumed at an earlier message
    among them, may not be on disk yet (measured: 10-40 ms after the hook starts, longer
    under load). Everything before the call's own entry is there once that is."""
    needle = marker.encode()
    deadline = time.monotonic() + timeout
    start = 0
    while True:
        try:
            with open(path, "rb") as f:
                f.seek(start)
                chunk = f.read()
        except OSError:
            return False
        if needle in chunk:
            return True
        start = max(0, start + len(chunk) - len(needle))
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def detect_known(g: GuardContext, session_id: str | None = None) -> list[str]:
    """`detect` for every session (or one) whose transcript a hook named before. Never
    stops the command that asks: a store it cannot write only leaves rewinds unmarked."""
    folder = g.store.root / DIR
    if not folder.is_dir():
        return []
    try:
        return _detect_known(g, folder, session_id)
    except (GitguardError, OSError):
        return []


def _detect_known(g: GuardContext, folder: Path, session_id: str | None) -> list[str]:
    marked: list[str] = []
    for path in sorted(folder.glob("*.json")):
        sid = path.stem
        if session_id is not None and sid != session_id:
            continue
        transcript = _seen(g, sid).get("transcript")
        if isinstance(transcript, str):
            marked += detect(g, sid, transcript)
    return marked


def _remember(g: GuardContext, session_id: str, transcript_path: str, stat: list[int],
              look: rewind_transcript.Look) -> None:
    """Where the look ended. A cache: lost or torn, the next look reads the whole file."""
    path = _state_path(g, session_id)
    durable.ensure_dir(path.parent)
    data = json.dumps({"transcript": transcript_path, "stat": stat, "offset": look.offset,
                       "turn": sorted(look.turn)}).encode() + b"\n"
    durable.replace_unsynced(path, data)


def _mark(g: GuardContext, session_id: str, found: rewind_transcript.Transcript,
          call_id_of: Mapping[str, str]) -> list[str]:
    """Under the lock: one ledger append of `mark` events for the calls not marked yet."""
    state = journal.read(g.store)
    now = clock.stamp()
    updates: list[ToolLedgerEntry] = []
    for rewind in found.rewinds:
        entries = [e for e in (state.lookup(call_id_of.get(t, t)) for t in rewind.tool_uses)
                   if e is not None and e.session_id == session_id]
        fresh = [e for e in entries if e.rewound_at is None and e.status in TERMINAL]
        if not fresh:
            continue
        expected = _expected(g, rewind, entries)
        said = (f"Claude Code /rewind to before prompt {rewind.prompt[:8]}: the conversation "
                f"went on from {rewind.resumed_at[:8]} at {rewind.at or 'an unknown time'}")
        for entry in fresh:
            updates.append(entry.model_copy(update={
                "rewound_at": now, "rewound_by": said,
                "rewound_files": _files(g, entry, expected)}))
        trace_log.emit(g.store, "session", "session.rewind", session_id=session_id,
                       prompt=rewind.prompt, resumedAt=rewind.resumed_at,
                       calls=[e.call_id for e in fresh], fileHistory=found.format)
    if updates:
        journal.append_entries(g.store, state, updates)
    return [e.call_id for e in updates]


def _expected(g: GuardContext, rewind: rewind_transcript.Rewind,
              entries: list[ToolLedgerEntry]) -> dict[str, str | None]:
    """Workspace path -> the blob a restore puts back (None: absent): file-history's
    backup when Claude Code kept one, else the first rewound call's before-state."""
    root = os.path.realpath(g.ws.root)
    expected: dict[str, str | None] = {}
    for entry in entries:                       # in ledger order: the first before wins
        for patch in entry.file_patches:
            expected.setdefault(patch.path, patch.before_hash)
    for backup in rewind.files:
        rel = os.path.relpath(os.path.realpath(backup.path), root)
        if rel.startswith("..") or rel not in expected:
            continue
        if backup.backup is None:
            expected[rel] = None
            continue
        with contextlib.suppress(OSError):
            expected[rel] = str(pygit2.hashfile(backup.backup))
    return expected


def _files(g: GuardContext, entry: ToolLedgerEntry, expected: Mapping[str, str | None]
           ) -> str | None:
    if not entry.file_patches:
        return None
    for patch in entry.file_patches:
        now = current_state(g.ws.root, patch.path)
        oid = now.oid if now is not None and now != "other" else None
        if now == "other" or oid != expected.get(patch.path, patch.before_hash):
            return "kept"
    return "restored"

