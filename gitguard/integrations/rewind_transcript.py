"""Claude Code's rewinds, read from its transcript (issue 30; docs/recovery.md, "Rewinds").

No hook fires for `/rewind`. What it leaves behind, captured from the real CLIs
(fixtures/claude_code/transcript_rewind_*.jsonl):

- The conversation: the transcript is append-only; every chain entry (user, assistant,
  system, attachment) names its `parentUuid`. After a rewind the next prompt's parent is
  an entry from before the rewound prompt, so the rewound turns stay in the file, off the
  chain. A prompt whose chain does not pass through the previous prompt is a rewind; the
  prompts after its branch point that are not on its chain are the rewound turns, and
  their `tool_use` ids are the calls gitguard ledgered.
- The code ("restore code"): `file-history-snapshot` records name, per prompt, a backup
  of each file Claude Code tracks (`~/.claude/file-history/SESSION/NAME@vN`;
  `backupFileName` null: the file did not exist). Two formats:
  * earlier (2.1.100 captured): a snapshot per prompt at its start, then an
    `isSnapshotUpdate: true` record each time a tool first touches a file in the turn
    (`messageId` the tool's message, `snapshot.messageId` the prompt), paths relative to
    the session's cwd;
  * later (2.1.219 and 2.1.332 captured): one snapshot per prompt, written when the next
    prompt starts, holding every file tracked so far with `realParentDir`; a file first
    touched in a turn appears only in a later snapshot, at version 1 (its content before
    that turn).
  Either way the content a file had when prompt P was sent is P's own entry for it, else
  its version 1 backup from a later record.

Readers never raise: an unreadable or unfamiliar transcript shows no rewind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

_CHAIN = (b'"parentUuid"',)
_SNAPSHOT = b'"file-history-snapshot"'


@dataclass(frozen=True)
class Backup:
    """What a file held when a prompt was sent: `backup` (a path under file-history), or
    None when the file did not exist."""

    path: str               # absolute
    backup: str | None


@dataclass(frozen=True)
class Rewind:
    prompt: str                     # the first rewound prompt's uuid
    resumed_at: str                 # the kept entry the conversation went on from
    new_prompt: str                 # the prompt that went on from there
    at: str                         # when the new prompt was sent
    rewound_prompts: tuple[str, ...]
    tool_uses: tuple[str, ...]      # the tool_use ids of the rewound turns, in order
    files: tuple[Backup, ...] = ()  # what file-history says each file held at `prompt`


@dataclass
class Transcript:
    session_id: str | None = None
    cwd: str | None = None
    rewinds: list[Rewind] = field(default_factory=list)
    tool_uses: dict[str, str] = field(default_factory=dict)   # tool_use id -> prompt uuid
    # prompt uuid -> path (as recorded) -> (backupFileName, version, realParentDir)
    snapshots: dict[str, dict[str, tuple[str | None, int, str | None]]] = \
        field(default_factory=dict)
    first_versions: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    format: str | None = None       # "earlier" / "later": which file-history records


def _lines(path: str) -> Iterator[dict[str, Any]]:
    try:
        with open(path, "rb") as fh:
            for line in fh:
                head = line[:400]
                if not (_CHAIN[0] in head or _SNAPSHOT in head):
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict):
                    yield record
    except OSError:
        return


def _is_prompt(record: dict[str, Any]) -> bool:
    if record.get("type") != "user" or record.get("isSidechain") or record.get("isMeta"):
        return False
    content = (record.get("message") or {}).get("content")
    if isinstance(content, str):
        return True
    return isinstance(content, list) and bool(content) and not any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def _tool_ids(record: dict[str, Any]) -> list[str]:
    if record.get("type") != "assistant":
        return []
    content = (record.get("message") or {}).get("content")
    return [b["id"] for b in content or () if isinstance(b, dict)
            and b.get("type") == "tool_use" and isinstance(b.get("id"), str)]


def history_dir(path: str, session_id: str) -> str:
    """~/.claude/file-history/SESSION beside ~/.claude/projects/PROJECT/SESSION.jsonl."""
    claude = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(path))))
    return os.path.join(claude, "file-history", session_id)


def read(path: str | None, history: str | None = None) -> Transcript:
    """The transcript's rewinds, with the file-history backups of each rewound prompt
    (`history`: the session's backup directory; by default beside the transcript)."""
    found = Transcript()
    if not path:
        return found
    parent: dict[str, str | None] = {}
    index: dict[str, int] = {}
    prompts: list[str] = []
    stamps: dict[str, str] = {}
    owner: dict[str, str] = {}                 # chain entry -> the prompt its turn began at
    dropped: set[str] = set()
    for n, record in enumerate(_lines(path)):
        if record.get("type") == "file-history-snapshot":
            _snapshot(found, record)
            continue
        uuid = record.get("uuid")
        if not isinstance(uuid, str) or record.get("isSidechain"):
            continue
        found.session_id = found.session_id or record.get("sessionId")
        found.cwd = found.cwd or record.get("cwd")
        up = record.get("parentUuid") or record.get("logicalParentUuid")
        parent[uuid] = up if isinstance(up, str) else None
        index[uuid] = n
        if _is_prompt(record):
            owner[uuid] = uuid
            stamps[uuid] = str(record.get("timestamp") or "")
            if prompts:
                _check(found, parent, index, prompts, dropped, uuid, stamps)
            prompts.append(uuid)
        elif parent[uuid] in owner:
            owner[uuid] = owner[parent[uuid]]  # type: ignore[index]
        for tool_id in _tool_ids(record):
            if uuid in owner:
                found.tool_uses[tool_id] = owner[uuid]
    found.rewinds = [_with_tools(r, found) for r in found.rewinds]
    if found.rewinds and found.session_id:
        where = history or history_dir(path, found.session_id)
        found.rewinds = [_with_files(r, found, where) for r in found.rewinds]
    return found


def _check(found: Transcript, parent: dict[str, str | None], index: dict[str, int],
           prompts: list[str], dropped: set[str], new: str, stamps: dict[str, str]) -> None:
    """Does prompt `new` go on from the previous live prompt? If not, it is a rewind."""
    live = [p for p in prompts if p not in dropped]
    if not live:
        return
    previous = live[-1]
    chain: set[str] = set()
    at: str | None = parent.get(new)
    while at is not None and at not in chain:
        if at == previous:
            return                              # the usual case: one turn walked
        chain.add(at)
        if at in index and index[at] < index[previous]:
            break                               # the branch point: before the previous prompt
        at = parent.get(at)
    if at is None or at not in index or index[at] >= index[previous]:
        return                                  # a root or an unknown entry: cannot tell
    rewound = tuple(p for p in live if index[p] > index[at] and p not in chain)
    if not rewound:
        return
    dropped.update(rewound)
    found.rewinds.append(Rewind(rewound[0], at, new, stamps.get(new, ""), rewound, ()))


def _with_tools(rewind: Rewind, found: Transcript) -> Rewind:
    prompts = set(rewind.rewound_prompts)
    ids = tuple(t for t, p in found.tool_uses.items() if p in prompts)
    return Rewind(rewind.prompt, rewind.resumed_at, rewind.new_prompt, rewind.at,
                  rewind.rewound_prompts, ids, rewind.files)


def _snapshot(found: Transcript, record: dict[str, Any]) -> None:
    snap = record.get("snapshot")
    if not isinstance(snap, dict) or not isinstance(snap.get("messageId"), str):
        return
    files = snap.get("trackedFileBackups")
    if not isinstance(files, dict):
        return
    if record.get("isSnapshotUpdate"):
        found.format = "earlier"
    elif found.format is None and any(isinstance(v, dict) and "realParentDir" in v
                                      for v in files.values()):
        found.format = "later"
    mine = found.snapshots.setdefault(snap["messageId"], {})
    for rel, value in files.items():
        if not isinstance(value, dict) or not isinstance(value.get("version"), int):
            continue
        name = value.get("backupFileName")
        name = name if isinstance(name, str) else None
        real = value.get("realParentDir")
        real = real if isinstance(real, str) else None
        if record.get("isSnapshotUpdate") or rel not in mine:
            mine[rel] = (name, value["version"], real)
        if value["version"] == 1 and rel not in found.first_versions:
            found.first_versions[rel] = (name, real)


def _with_files(rewind: Rewind, found: Transcript, base: str) -> Rewind:
    """What each file Claude Code tracks held when the first rewound prompt was sent: what
    its "restore code" puts back."""
    own = found.snapshots.get(rewind.prompt, {})
    files: list[Backup] = []
    for rel in sorted(set(own) | set(found.first_versions)):
        if rel in own:
            name, _version, real = own[rel]
        else:
            name, real = found.first_versions[rel]
        where = rel if os.path.isabs(rel) else os.path.join(real or found.cwd or "", rel)
        files.append(Backup(os.path.normpath(where),
                            os.path.join(base, name) if name is not None else None))
    return Rewind(rewind.prompt, rewind.resumed_at, rewind.new_prompt, rewind.at,
                  rewind.rewound_prompts, rewind.tool_uses, tuple(files))


# --- the cheap look: only what was appended since the last one ---------------------------

@dataclass(frozen=True)
class Look:
    """Where the last look at a transcript ended: `offset` bytes read, and `turn`, the
    chain entries from the last prompt on (the entries a next prompt goes on from)."""

    offset: int
    turn: frozenset[str]


def look_on(path: str, since: Look | None) -> tuple[Look, bool]:
    """Read only what was appended after `since`: the new Look, and whether a prompt in it
    may go on from somewhere else than the last turn (a rewind: `read` the whole file then).
    Without `since` (or a file that shrank) the whole file is looked at."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            start = since.offset if since is not None and since.offset <= size else 0
            fh.seek(start)
            data = fh.read()
    except OSError:
        return Look(0, frozenset()), False
    end = data.rfind(b"\n") + 1                  # a torn last line waits for the next look
    known = set(since.turn) if since is not None and start else set()
    turn: set[str] = set(known)
    seen: dict[str, str | None] = {}
    suspect = False
    for line in data[:end].splitlines():
        if _CHAIN[0] not in line[:400]:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or record.get("isSidechain"):
            continue
        uuid = record.get("uuid")
        if not isinstance(uuid, str):
            continue
        up = record.get("parentUuid") or record.get("logicalParentUuid")
        seen[uuid] = up if isinstance(up, str) else None
        if _is_prompt(record):
            if known or turn:
                suspect = suspect or not _reaches(seen, seen[uuid], turn)
            turn = {uuid}
        else:
            turn.add(uuid)
    return Look(start + end, frozenset(turn)), suspect


def _reaches(seen: dict[str, str | None], at: str | None, turn: set[str]) -> bool:
    """Whether walking up from `at` through this look's entries comes to the last turn."""
    steps = 0
    while at is not None and steps <= len(seen):
        if at in turn:
            return True
        if at not in seen:
            return False
        at = seen[at]
        steps += 1
    return False
