"""`gitguard blame FILE`: who wrote each line of a working-tree file.

The line owners come from the same history rollback reads (calls/timeline.py): the
path's state at every kept checkpoint, each change given to a call (exact or window
confidence, what a rollback undoes and `--merge` takes out), to the user, or to no one
surely (ambiguous, unknown: a rollback turns those into conflicts and `--merge` keeps
them as yours). Each change's lines are followed through the next ones by git's own
line diff (libgit2, as `git merge-file` and `git blame` see lines), so a line is the
last writer's: a line blamed on a call is one that rolling back to that call's pre
checkpoint takes out, unless a later call or the user rewrote it.

Lines older than the first kept checkpoint, and lines a git move (checkout, merge)
brought, are the commit's: `git blame` of HEAD names it. A commit made during a
session keeps the calls' attribution: a line the history gives a call is still that
call's once committed (the commit is named beside it), and where gc pruned the
checkpoints of that time, the post-commit hook's record (ledger/git_moves.py: which
call's last-written blob was committed) names the call for the lines its patch added.
Nothing is written: no notes, no refs.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Literal

import pygit2

from gitguard import fileops
from gitguard.calls import background, timeline
from gitguard.calls.attribution import USER
from gitguard.errors import GitguardError
from gitguard.fileops import FileState
from gitguard.git import filters, tree_edit
from gitguard.git.objects import LINK, as_tree, read_blob
from gitguard.ledger import git_moves, journal
from gitguard.models import CheckpointIndexRow, ToolLedgerEntry
from gitguard.rollback.moves import of_entries as moves_of
from gitguard.rollback.workspace_writer import planned_targets
from gitguard.snapshot import checkpoints
from gitguard.workspace import safe_relpath

if TYPE_CHECKING:
    from gitguard.guard_context import GuardContext

SCHEMA = "gitguard.blame/1"
# "call": one agent call surely wrote it (rollback to its pre checkpoint takes it out);
# "user": you, outside every call window; "commit": it was there before gitguard's first
# kept checkpoint, or a git move brought it, and HEAD's blame names the commit;
# "ambiguous": a call's window or the user, no one surely (rollback keeps it as yours).
Kind = Literal["call", "user", "commit", "ambiguous"]
# not changed since the first kept checkpoint, or brought by a git move: HEAD's blame says
_EARLIER: Literal["earlier"] = "earlier"
_GIT: Literal["git"] = "git"


@dataclass(frozen=True)
class Source:
    """Who wrote one line."""
    kind: Kind | Literal["earlier", "git"]
    call_id: str | None = None
    confidence: str | None = None
    at: str | None = None          # the checkpoint that first showed the change (None: now)
    why: str | None = None
    commit: str | None = None      # the commit holding the line now (HEAD's blame)


@dataclass(frozen=True)
class Line:
    number: int
    text: bytes
    source: Source


@dataclass(frozen=True)
class Commit:
    oid: str
    author: str
    at: str                        # ISO 8601, the author's time
    summary: str


@dataclass
class Blame:
    path: str
    lines: list[Line]
    calls: dict[str, ToolLedgerEntry] = field(default_factory=dict)
    commits: dict[str, Commit] = field(default_factory=dict)
    since: str | None = None       # the first kept checkpoint: the history starts there

    def owners(self) -> list[tuple[int, int, Source]]:
        """Runs of consecutive lines with one source: (first line, count, source)."""
        runs: list[tuple[int, int, Source]] = []
        for line in self.lines:
            if runs and runs[-1][2] == line.source:
                first, count, source = runs[-1]
                runs[-1] = (first, count + 1, source)
            else:
                runs.append((line.number, 1, line.source))
        return runs


# the file now ---------------------------------------------------------------------------

def working_file(g: GuardContext, path: str) -> tuple[str, bytes]:
    """The workspace-relative path and the bytes of the file blame reads, or a clear error."""
    rel = safe_relpath(g.ws, os.path.abspath(path))
    full = g.ws.root / rel
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        raise GitguardError(f"{rel} does not exist in the working tree",
                            "blame reads a file as it is now; `gitguard ledger` lists what "
                            "calls did to it") from None
    except NotADirectoryError:
        raise GitguardError(f"{rel} does not exist: a parent of it is a file",
                            "name a file inside the workspace") from None
    if stat.S_ISLNK(st.st_mode):
        raise GitguardError(f"{rel} is a symlink: blame reads a file's lines",
                            f"blame what it points to: {os.readlink(full)}")
    if stat.S_ISDIR(st.st_mode):
        raise GitguardError(f"{rel} is a directory", "name a file in it")
    if not stat.S_ISREG(st.st_mode):
        raise GitguardError(f"{rel} is not a regular file", "name a text file")
    try:
        data = full.read_bytes()
    except OSError as exc:
        raise GitguardError(f"{rel} cannot be read: {exc.strerror or exc}",
                            "check its permissions") from None
    if b"\0" in data[:8000]:     # git's own test for a binary file
        raise GitguardError(f"{rel} is binary: it has no lines to blame",
                            f"`gitguard ledger --json` lists the calls that wrote {rel}")
    return rel, data


def split_lines(data: bytes | None) -> list[bytes]:
    """Lines as git counts them: each ends at a newline; a last line may have none."""
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


# following lines through changes --------------------------------------------------------

def carry(before: bytes | None, after: bytes | None, owners: Sequence[Source],
          source: Source) -> list[Source]:
    """The owners of `after`'s lines: those git's diff keeps from `before` keep theirs,
    the rest are `source`'s."""
    new_count = len(split_lines(after))
    if not before or not after:
        return [source] * new_count
    patch = pygit2.Patch.create_from(before, after, context_lines=0)
    if patch.delta.is_binary:
        return [source] * new_count
    out: list[Source] = []
    kept = 0                        # lines of `before` consumed
    for hunk in patch.hunks:
        # An insertion (no old lines) names the line it follows; a change, its first.
        start = hunk.old_start if hunk.old_lines == 0 else hunk.old_start - 1
        out += owners[kept:start]
        out += [source] * hunk.new_lines
        kept = start + hunk.old_lines
    out += owners[kept:]
    if len(out) != new_count:       # a diff that does not add up: say nothing surely
        return [source] * new_count
    return out


def carry_hunks(owners: Sequence[Source], patch: pygit2.Patch, source: Source
                ) -> list[Source]:
    """`carry` from a stored diff of the change (its hunks and their context lines)."""
    out: list[Source] = []
    kept = 0
    for hunk in patch.hunks:
        start = hunk.old_start if hunk.old_lines == 0 else hunk.old_start - 1
        out += owners[kept:start]
        kept = start
        for line in hunk.lines:
            if line.origin == " ":
                out += owners[kept:kept + 1]
                kept += 1
            elif line.origin == "-":
                kept += 1
            elif line.origin == "+":
                out.append(source)
    out += owners[kept:]
    return out


def _stored_patch(reader: _Reader, call_id: str, rel: str) -> pygit2.Patch | None:
    """The call's stored diff of `rel` (what `gitguard diff CALL` prints), parsed."""
    entry = reader.state.entries.get(call_id)
    ref = next((p.patch_ref for p in entry.file_patches if p.path == rel and p.patch_ref),
               None) if entry is not None else None
    if ref is None:
        return None
    try:
        diff = pygit2.Diff.parse_diff(reader.g.store.read_artifact(ref))
    except (GitguardError, OSError, pygit2.GitError):
        return None
    for patch in diff:
        if patch is not None and patch.delta.new_file.path == rel and not patch.delta.is_binary:
            return patch
    return None


def _source(change: timeline.Change, rows: Sequence[CheckpointIndexRow]) -> Source:
    at = rows[change.position].created_at if change.position < len(rows) else None
    if change.owner == USER:
        moved = change.position < len(rows) and \
            rows[change.position].session_id == git_moves.GIT_SESSION
        return Source(_GIT if moved else "user", confidence=change.confidence, at=at)
    if change.surely_agent:
        return Source("call", change.owner, change.confidence, at)
    return Source("ambiguous", change.owner, change.confidence, at,
                  why=change.why or f"it changed while {change.owner} ran, and its origin "
                                    f"is {change.confidence}")


# the blame ---------------------------------------------------------------------------------

@dataclass
class _Reader:
    """What one blame reads once: the ledger, the checkpoint chain, the file's forms."""
    g: GuardContext
    state: journal.LedgerState
    rows: Sequence[CheckpointIndexRow]
    line: timeline.Timeline
    content: Callable[[FileState | None], bytes | None]
    parsed: dict[str, pygit2.Tree] = field(default_factory=dict)

    def __post_init__(self) -> None:
        points = [pos for pos, _ in self.line.points] + [timeline.NOW]
        # each position's previous one: where a change seen at a position began
        self.previous = dict(zip(points[1:], points, strict=False))
        # gc's stretched windows: only these split a change into several calls' patches
        self.coarse = [w for w in self.line.windows if w.coarse and w.ended]

    def lookup(self, tree: str, path: str) -> FileState | None:
        if tree not in self.parsed:
            self.parsed[tree] = as_tree(self.g.snap.repo, tree)
        return tree_edit.lookup(self.g.snap.repo, self.parsed[tree], path)


def blame(g: GuardContext, path: str) -> Blame:
    """Who wrote each line of `path` as it is now."""
    return Blamer(g).of(path)


class Blamer:
    """Blames files of one workspace, reading the ledger and the checkpoint chain once
    (the timeline page blames every changed file)."""

    def __init__(self, g: GuardContext) -> None:
        self.g = g
        self.state = journal.read(g.store)
        self.rows = checkpoints.read_index(g.store).rows if g.store.exists() else []
        self.convert = (filters.conversion(g.snap.repo, g.ws.root, g.ws.git_dir,
                                           g.snap.scan_index()) if g.ws.is_git else None)
        self.line = (timeline.build(self.rows, g.snap.tree_of, self.rows[0].checkpoint_id,
                                    self.state.in_order(),
                                    lambda entry: planned_targets(g, entry),
                                    background=background.call_ids(g.store))
                     if self.rows else None)
        self.parsed: dict[str, pygit2.Tree] = {}

    def of(self, path: str) -> Blame:
        g, state, rows = self.g, self.state, self.rows
        rel, data = working_file(g, path)
        repo, convert = g.snap.repo, self.convert

        def content(state: FileState | None) -> bytes | None:
            """A stored state in working-tree form (how the file on disk compares)."""
            if state is None or state == timeline.UNKNOWN:
                return None
            if convert is not None and state.mode != LINK:
                return convert.smudge(rel, state.oid)
            return read_blob(repo, state.oid)

        result = Blame(rel, [], since=rows[0].checkpoint_id if rows else None)
        owners: list[Source] = [Source(_EARLIER)] * len(split_lines(data))
        if self.line is not None:
            reader = _Reader(g, state, rows, self.line, content, self.parsed)
            owners = _history_owners(reader, rel, data, result)
        owners = _commits(g, state, rel, data, owners, content, result)
        for number, (text, source) in enumerate(zip(split_lines(data), owners, strict=True),
                                                1):
            result.lines.append(Line(number, text, source))
            if source.call_id and source.call_id in state.entries:
                result.calls[source.call_id] = state.entries[source.call_id]
        return result


def _history_owners(reader: _Reader, rel: str, data: bytes, result: Blame) -> list[Source]:
    """Each line's owner from the checkpoint chain, the file now its last state."""
    line = reader.line
    now = FileState(str(pygit2.hash(data)), _mode(reader.g, rel))
    at_last = reader.lookup(line.points[-1][1], rel)
    if at_last is not None and reader.content(at_last) == data:
        now = at_last          # unchanged since the newest checkpoint (in working-tree form)
    history = timeline.history(line, rel, reader.lookup, now, open_history=False)
    owners, before = _walk(reader, history, rel, result, data=data)
    if before != data:         # a conversion the states did not show: the rest is yours
        owners = carry(before, data, owners, Source("user", confidence="window"))
    return owners


@dataclass(frozen=True)
class _Step:
    """Lines to follow from `before` to `after`: the new ones are `source`'s; `carried`,
    the owners of `before` when they come from another path (a move's source)."""
    source: Source
    before: bytes | None
    after: bytes | None
    carried: list[Source] | None = None
    hunks: pygit2.Patch | None = None    # the lines as a stored diff says, no contents


def _walk(reader: _Reader, history: timeline.PathHistory, rel: str, result: Blame,
          data: bytes | None = None, until: timeline.Change | None = None, depth: int = 0
          ) -> tuple[list[Source], bytes | None]:
    """Follow the lines through the path's changes (up to `until`, excluded): the owners
    and the content then. `data`: the bytes of the last state (the file now)."""
    before = reader.content(history.base)
    owners: list[Source] = [Source(_EARLIER)] * len(split_lines(before))
    if before is not None and depth:     # a move's source: its old lines' commits now
        owners = _commits(reader.g, reader.state, rel, before, owners, reader.content,
                          result)
    for change in history.changes:
        if change is until:
            break
        after = (data if data is not None and change.after is history.now
                 else reader.content(change.after))
        start = reader.previous[change.position]
        prior = owners
        for step in _steps(reader, rel, change, start, before, after, depth, result):
            if step.hunks is not None:
                owners = carry_hunks(owners, step.hunks, step.source)
            else:
                owners = carry(step.before, step.after,
                               step.carried if step.carried is not None else owners,
                               step.source)
        if len(owners) != len(split_lines(after)):     # a stored diff that does not fit
            owners = carry(before, after, prior, _source(change, reader.rows))
        before = after
    return owners, before


def _steps(reader: _Reader, rel: str, change: timeline.Change, start: int,
           before: bytes | None, after: bytes | None, depth: int, result: Blame
           ) -> list[_Step]:
    """A change as the steps whose lines to follow. One, mostly; across a stretch gc
    pruned, each call's recorded patch of the path in turn; for a file a call moved here,
    the source's lines with their own owners, not the mover's."""
    source = _source(change, reader.rows)
    windows = [w for w in reader.coarse if w.start <= start and change.position <= w.end]
    chain = [(w.call_id, b, a) for w in windows for p, b, a in w.patches if p == rel]
    if source.kind == "call" and len(chain) > 1 and change.confidence == "exact":
        # across_pruned linked these patches from `before` to `after`: each is its call's.
        # gc pruned the blobs in between with the checkpoints, but kept each call's stored
        # diff (the ledger names it): its hunks carry the lines.
        hunks = [_stored_patch(reader, call, rel) for call, _, _ in chain]
        if all(h is not None for h in hunks):
            return [_Step(Source("call", call, "exact", source.at), None, None, hunks=h)
                    for (call, _, _), h in zip(chain, hunks, strict=True)]
    if change.before is None and source.kind == "call" and depth < 8:
        moved = _moved_from(reader, rel, change.owner)
        carried = (_source_owners(reader, moved, change.owner, result, depth)
                   if moved is not None else None)
        if carried is not None:
            return [_Step(source, carried[1], after, carried[0])]
    return [_Step(source, before, after)]


def _moved_from(reader: _Reader, rel: str, call_id: str) -> str | None:
    """The path call `call_id` moved to `rel`, if it moved a file here."""
    entry = reader.state.entries.get(call_id)
    if entry is None or not any(p.path == rel and p.after_hash for p in entry.file_patches):
        return None
    found = moves_of(reader.g.store, str(reader.g.ws.root), [entry])
    return next((m.source for m in found if m.dest == rel), None)


def _source_owners(reader: _Reader, source: str, mover: str, result: Blame, depth: int
                   ) -> tuple[list[Source], bytes] | None:
    """The owners and content of a moved file's source right before the move."""
    seen = fileops.current_state(reader.g.ws.root, source)
    now = timeline.UNKNOWN if seen == "other" else seen
    history = timeline.history(reader.line, source, reader.lookup, now, open_history=False)
    gone = next((c for c in reversed(history.changes)
                 if c.owner == mover and c.after is None), None)
    if gone is None:
        return None
    owners, content = _walk(reader, history, source, result, until=gone, depth=depth + 1)
    return (owners, content) if content is not None else None


def _mode(g: GuardContext, rel: str) -> int:
    return 0o100755 if os.stat(g.ws.root / rel).st_mode & 0o111 else 0o100644


# commits ----------------------------------------------------------------------------------

def _commits(g: GuardContext, state: journal.LedgerState, rel: str, data: bytes,
             owners: list[Source], content: Callable[[FileState | None], bytes | None],
             result: Blame) -> list[Source]:
    """Name the commit holding each line that HEAD has as it is now; give lines older than
    the history (or brought by a git move) to their commit, or to the call whose hunk that
    commit took in; what is left of them, to the user."""
    repo = g.snap.repo
    head_blob = _head_blob(repo, rel) if g.ws.is_git else None
    if head_blob is None:
        return [_settle(s) for s in owners]
    head = content(FileState(str(head_blob.id), 0o100644))
    try:
        hunks = list(repo.blame(rel))
    except (KeyError, ValueError, pygit2.GitError):
        return [_settle(s) for s in owners]
    # HEAD's line i (0-based) -> (commit, its line number in that commit's file, path there)
    in_head: list[tuple[str, int, str]] = []
    for hunk in hunks:
        for k in range(hunk.lines_in_hunk):
            in_head.append((str(hunk.final_commit_id), hunk.orig_start_line_number + k,
                            hunk.orig_path or rel))
    records = {r.commit: r for r in git_moves.read(g.store)
               if isinstance(r, git_moves.CommitRecord)} if g.store.exists() else {}
    added: dict[tuple[str, str], list[str | None]] = {}
    out: list[Source] = []
    for i, head_line in enumerate(_unchanged_from(head, data)):
        source = owners[i]
        if head_line is None or head_line >= len(in_head):
            out.append(_settle(source))
            continue
        commit, orig_line, orig_path = in_head[head_line]
        _remember(repo, commit, result)
        if source.kind in (_EARLIER, _GIT):
            call = _committed_call(g, state, records.get(commit), orig_path, orig_line, added)
            source = (Source("call", call, "exact") if call is not None
                      else Source("commit"))
        out.append(replace(source, commit=commit))
    return out


def _settle(source: Source) -> Source:
    """A line older than the history that no commit holds: yours (changes outside every
    call window are the user's)."""
    if source.kind == _EARLIER:
        return Source("user", confidence="window",
                      why="it was there before gitguard's first kept checkpoint")
    if source.kind == _GIT:
        return replace(source, kind="user")
    return source


def _head_blob(repo: pygit2.Repository, rel: str) -> pygit2.Blob | None:
    try:
        head = repo.head.peel(pygit2.Commit)
        entry = head.tree[rel]
    except (KeyError, ValueError, pygit2.GitError):
        return None
    obj = repo.get(entry.id)
    return obj if isinstance(obj, pygit2.Blob) and entry.filemode != LINK else None


def _unchanged_from(head: bytes | None, data: bytes) -> list[int | None]:
    """For each line of `data`, the 0-based line of `head` it is unchanged from, or None."""
    count = len(split_lines(data))
    if not head:
        return [None] * count
    patch = pygit2.Patch.create_from(head, data, context_lines=0)
    if patch.delta.is_binary:
        return [None] * count
    out: list[int | None] = []
    kept = 0
    for hunk in patch.hunks:
        start = hunk.old_start if hunk.old_lines == 0 else hunk.old_start - 1
        out += list(range(kept, start))
        out += [None] * hunk.new_lines
        kept = start + hunk.old_lines
    out += list(range(kept, kept + count - len(out)))
    return out if len(out) == count else [None] * count


def _committed_call(g: GuardContext, state: journal.LedgerState,
                    record: git_moves.CommitRecord | None, path: str, line: int,
                    added: dict[tuple[str, str], list[str | None]]) -> str | None:
    """The call that wrote `line` (1-based, in the commit's file), from the post-commit
    hook's record of which call's last-written blob of the path the commit took in."""
    if record is None:
        return None
    for patch in record.agent_patches:
        if patch.path != path or patch.after_hash is None:
            continue
        key = (patch.call_id, path)
        if key not in added:
            added[key] = _patch_chain(g, state, path, patch.after_hash)
        owners = added[key]
        if 0 < line <= len(owners) and owners[line - 1] is not None:
            return owners[line - 1]
    return None


def _patch_chain(g: GuardContext, state: journal.LedgerState, path: str, oid: str
                 ) -> list[str | None]:
    """Per line of blob `oid`, the call whose recorded patch wrote it, following the calls'
    patches of `path` back while each starts from the blob the one before it left (an edit
    of someone else's in between ends the chain: its lines stay None)."""
    wrote = {p.after_hash: (e.call_id, p.before_hash) for e in state.in_order()
             for p in e.file_patches if p.path == path and p.after_hash}
    chain: list[tuple[str, str | None, str]] = []
    at: str | None = oid
    while at is not None and at in wrote and len(chain) < 1000:
        call_id, before = wrote[at]
        if any(after == at for _, _, after in chain):
            break
        chain.append((call_id, before, at))
        at = before
    repo = g.snap.repo
    try:
        base = read_blob(repo, chain[-1][1]) if chain and chain[-1][1] else None
        owners: list[Source] = [Source(_EARLIER)] * len(split_lines(base))
        for call_id, before, after in reversed(chain):
            owners = carry(read_blob(repo, before) if before else None,
                           read_blob(repo, after), owners, Source("call", call_id, "exact"))
    except KeyError:        # gc pruned a blob of the chain: no line can be told surely
        return []
    return [o.call_id if o.kind == "call" else None for o in owners]


def _remember(repo: pygit2.Repository, oid: str, result: Blame) -> None:
    if oid in result.commits:
        return
    commit = repo.get(oid)
    if not isinstance(commit, pygit2.Commit):
        return
    moment = datetime.fromtimestamp(commit.author.time,
                                    timezone(timedelta(minutes=commit.author.offset)))
    result.commits[oid] = Commit(oid, commit.author.name, moment.isoformat(),
                                 commit.message.split("\n", 1)[0][:120])


# output -------------------------------------------------------------------------------------

def to_json(found: Blame, undo: Callable[[str], str]) -> dict[str, Any]:
    """The blame as one document (schema gitguard.blame/1)."""
    return {
        "schema": SCHEMA, "path": found.path, "since": found.since,
        "lines": [line_json(line) for line in found.lines],
        "calls": {c: _call_json(e, undo) for c, e in sorted(found.calls.items())},
        "commits": {o: {"author": c.author, "at": c.at, "summary": c.summary}
                    for o, c in sorted(found.commits.items())},
    }


def line_json(line: Line) -> dict[str, Any]:
    s = line.source
    out: dict[str, Any] = {"line": line.number,
                           "text": line.text.decode("utf-8", errors="replace"),
                           "owner": s.kind}
    if s.call_id:
        out["callId"] = s.call_id
    if s.confidence:
        out["confidence"] = s.confidence
    if s.at:
        out["at"] = s.at
    if s.commit:
        out["commit"] = s.commit
    if s.why:
        out["why"] = s.why
    return out


def _call_json(entry: ToolLedgerEntry, undo: Callable[[str], str]) -> dict[str, Any]:
    return {"tool": entry.tool_name, "sessionId": entry.session_id,
            "agentId": entry.agent_id, "agentType": entry.agent_type,
            "status": entry.status, "startedAt": entry.started_at,
            "finishedAt": entry.finished_at, "summary": entry.summary,
            "preCheckpointId": entry.pre_checkpoint_id,
            "undo": undo(entry.pre_checkpoint_id) if entry.pre_checkpoint_id else None}


def who(source: Source, calls: Mapping[str, ToolLedgerEntry],
        commits: Mapping[str, Commit]) -> str:
    """The owner column of the human output."""
    if source.kind == "call" and source.call_id:
        entry = calls.get(source.call_id)
        tool = f" {entry.tool_name}" if entry else ""
        mark = "~" if source.confidence == "window" else ""
        return f"{source.call_id}{mark}{tool}"
    if source.kind == "ambiguous":
        return f"{source.call_id} or you?"
    if source.kind == "commit" and source.commit:
        found = commits.get(source.commit)
        return f"{source.commit[:8]} {found.author if found else ''}".rstrip()
    return "you"


def _when(source: Source, calls: Mapping[str, ToolLedgerEntry],
          commits: Mapping[str, Commit]) -> str:
    if source.kind == "commit" and source.commit and source.commit in commits:
        return commits[source.commit].at[:10]
    entry = calls.get(source.call_id or "")
    stamp = (entry.started_at or entry.planned_at) if entry else source.at
    if stamp:
        return stamp[:16].replace("T", " ")
    return "before gitguard" if source.why else "not checkpointed yet"


def render(found: Blame, undo: Callable[[str], str]) -> str:
    """Each line with its owner and when, then the calls named and how to undo each."""
    if not found.lines:
        return f"{found.path} is empty\n"
    cols = [(who(line.source, found.calls, found.commits),
             _when(line.source, found.calls, found.commits)) for line in found.lines]
    width = min(max(len(w) for w, _ in cols), 40)
    when_width = max(len(t) for _, t in cols)
    number_width = len(str(len(found.lines)))
    out = []
    for line, (owner, when) in zip(found.lines, cols, strict=True):
        text = line.text.decode("utf-8", errors="replace").rstrip("\r")
        out.append(f"{owner[:width]:<{width}}  {when:<{when_width}}  "
                   f"{line.number:>{number_width}}| {text}")
    marks = {line.source.kind for line in found.lines}
    windows = any(line.source.confidence == "window" and line.source.kind == "call"
                  for line in found.lines)
    if windows:
        out.append("~ a command's change its words did not name (window confidence)")
    if "ambiguous" in marks:
        out.append("or you? no one surely made it: a rollback keeps it as yours")
    for call_id, entry in sorted(found.calls.items()):
        agent = f", agent {entry.agent_type or entry.agent_id}" if entry.agent_id else ""
        head = f"{call_id}: {entry.tool_name}, session {entry.session_id}{agent}"
        if entry.pre_checkpoint_id:
            head += f"; take its lines out: {undo(entry.pre_checkpoint_id)}"
        out.append(head)
    return "\n".join(out) + "\n"
