"""Who changed a path after a checkpoint, from the checkpoint chain (and the watcher when it ran).

Without the daemon the checkpoints are the only witnesses: each call has a pre
and a post checkpoint, and whatever changed between them is the call's; whatever
changed between one checkpoint and the next outside every call window, or between
the newest checkpoint and the working tree now, is the user's. A call that never
ended (a crash) owns the changes up to the next checkpoint after its pre.

The daemon adds `attribution.jsonl`: a record for a path after the checkpoint owned
by the user, or of ambiguous or unknown confidence, marks the path as touched by
someone other than the agent. `foreign_touch` is the single place that decides it.
"""

from __future__ import annotations

import bisect
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from gitguard.calls.attribution import USER, declares, is_shell
from gitguard.calls.delegation import is_delegation
from gitguard.fileops import FileState
from gitguard.ledger.replay import never_ran
from gitguard.models import Attribution, CheckpointIndexRow, Confidence, ToolLedgerEntry
from gitguard.storage import durable
from gitguard.storage.store import Store

NOW = sys.maxsize                          # the position of the working tree as it is
UNKNOWN = FileState("unknown", 0)          # something git cannot store (a fifo, an unreadable file)
ATTRIBUTION_FILE = "attribution.jsonl"


@dataclass(frozen=True)
class Window:
    """A call's stretch of the checkpoint index: changes inside it are the call's."""

    call_id: str
    start: int
    end: int
    ended: bool
    declared: frozenset[str]
    patch_ref: str | None
    planned: Mapping[str, FileState | None] | None = None   # gitguard's own entries
    # gc pruned the call's pre or post checkpoint: the window is stretched to the kept
    # checkpoints around it, and other calls (or the user) may share the stretch; its
    # recorded patches (path, before, after) say what it changed.
    coarse: bool = False
    patches: tuple[tuple[str, FileState | None, FileState | None], ...] = ()
    status: str = ""            # the call's ledger status (a reconciled one is settled)
    unfinished: Confidence = "unknown"     # a crash: unknown; closed uncertain: ambiguous
    # An ended call's recorded paths: what it changed. A change to another path inside
    # its window was someone else's (another session's call, the user). None: not known
    # (it never finished), so it may have changed anything there.
    changed: frozenset[str] | None = None
    # It ran on in the background beside other work: none of its changes is surely its.
    background: bool = False
    # A shell command: its declared paths are read from its words, not content it named.
    shell: bool = False

    def claims(self, path: str) -> bool:
        return self.changed is None or path in self.changed

    def confidence(self, path: str, after: FileState | None) -> Confidence:
        if self.background:
            return "ambiguous"
        if self.ended:
            return "exact" if declares(self.declared, path) and not self.shell else "window"
        if self.planned is not None and path in self.planned and self.planned[path] == after:
            return "exact"
        return self.unfinished   # it never finished: a user edit since cannot be told apart

    def unsettled(self) -> str:
        """Why a change in this unfinished window cannot be told apart from a later edit."""
        return interrupted_reason(self.call_id, self.status)


def interrupted_reason(call_id: str, status: str) -> str:
    """A conflict's reason for a path a call changed without ever finishing. It follows
    `reconcile`: settled, the call's outcome is known, but what it wrote never was."""
    if status in ("succeeded", "failed"):
        return (f"it changed while {call_id} was running; {call_id} was interrupted and "
                f"reconciled as {status}, but what it wrote was never recorded: a later "
                "edit cannot be told apart")
    return (f"it changed while {call_id} was running, and {call_id} never finished: a later "
            "edit cannot be told apart")


@dataclass(frozen=True)
class Change:
    before: FileState | None
    after: FileState | None
    owner: str                  # a callId or "user"
    confidence: Confidence
    patch_ref: str | None
    position: int               # index position (or NOW) where the change was first seen
    why: str | None = None      # for an unknown change: why it cannot be told apart
    since: str | None = None    # createdAt of the checkpoint the change was made after

    @property
    def surely_agent(self) -> bool:
        """A change exactly one agent call made: rollback may undo it, and --merge takes its
        hunks out. A change nobody could pin on one call (ambiguous, unknown) is not."""
        return (self.owner != USER and self.why is None
                and self.confidence in ("exact", "window"))


@dataclass(frozen=True)
class PathHistory:
    path: str
    base: FileState | None      # at the target checkpoint
    now: FileState | None
    changes: tuple[Change, ...]

    def last_agent_change(self) -> Change | None:
        agent = [c for c in self.changes if c.owner != USER]
        return agent[-1] if agent else None

    def first_agent_change(self) -> Change | None:
        """The first change after the target not the user's: its `before` is the file as
        the agent found it (a user edit made since the checkpoint included), what a
        rollback restores and what the three-way view and --merge take as the base."""
        return next((c for c in self.changes if c.owner != USER), None)


@dataclass
class Timeline:
    target: int                                  # index position of the target checkpoint
    points: list[tuple[int, str]]                # (position, tree) from the target on
    windows: list[Window] = field(default_factory=list)
    stamps: dict[int, str] = field(default_factory=dict)    # position -> createdAt

    def claiming(self, start: int, end: int, path: str) -> tuple[list[Window], int]:
        """The call windows holding the stretch start..end that may have changed `path`,
        innermost last, and how many windows hold the stretch at all. Windows overlap
        when sessions, subagents or parallel calls run at once: an ended call whose
        recorded patches leave the path out did not change it."""
        inside = [w for w in self.windows if w.start <= start and end <= w.end]
        claiming = sorted((w for w in inside if w.claims(path)), key=lambda w: w.start)
        return claiming, len(inside)

    def agent_windows(self) -> list[Window]:
        """Calls whose window reaches past the target: their changes may need undoing."""
        return [w for w in self.windows if w.end > self.target]

    def across_pruned(self, window: Window, path: str, start: int, end: int,
                      before: FileState | None, after: FileState | None) -> Change:
        """A change between two kept checkpoints that gc left with pruned ones between.

        The snapshots that showed who changed what in between are gone, so the calls'
        own records must account for it: every patch of the path in the stretch, in
        ledger order, chained from `before` to `after` (each starting where the last
        ended). Then the change is the last call's; otherwise someone else may have
        edited in between, and the change is unknown (a conflict, never overwritten).
        """
        chain = [(w, b, a) for w in self.windows
                 if w.coarse and w.ended and w.start <= start and end <= w.end
                 for p, b, a in w.patches if p == path]
        steps = zip(chain, chain[1:], strict=False)
        linked = (bool(chain) and _same(chain[0][1], before) and _same(chain[-1][2], after)
                  and all(_same(a, b) for (_, _, a), (_, b, _) in steps))
        if linked:
            last = chain[-1][0]
            return Change(before, after, last.call_id, "exact", last.patch_ref, end)
        owner = chain[-1][0] if chain else window
        return Change(before, after, owner.call_id, "unknown", owner.patch_ref, end,
                      why=f"gc pruned the checkpoints around {owner.call_id}'s change and the "
                          "calls' recorded patches do not account for all of it: an edit by "
                          "someone else cannot be ruled out")


def build(rows: Sequence[CheckpointIndexRow], tree_of: Callable[[str], str], target_id: str,
          entries: Iterable[ToolLedgerEntry],
          planned: Callable[[ToolLedgerEntry], Mapping[str, FileState | None] | None],
          background: Collection[str] = ()) -> Timeline:
    """`tree_of` maps a snapshot commit to its tree; only checkpoints from the target on need it.

    `planned` gives, for a gitguard entry a crash left open, what it meant to write;
    `background`, the calls that ran on in the background (integrations.background).
    """
    position = {row.checkpoint_id: i for i, row in enumerate(rows)}
    target = position[target_id]
    timeline = Timeline(target, [(i, tree_of(rows[i].snapshot_commit))
                                 for i in range(target, len(rows))],
                        stamps={i: rows[i].created_at for i in range(target, len(rows))})
    moments: list[datetime] | None = None     # the rows' times, parsed once if gc pruned any
    for entry in entries:
        start = position.get(entry.pre_checkpoint_id or "")
        end = position.get(entry.post_checkpoint_id or "")
        coarse = False
        if start is None or (end is None and entry.post_checkpoint_id):
            if not entry.pre_checkpoint_id:
                continue                      # no snapshot was ever taken for it
            # gc pruned a checkpoint of this call: stretch to the kept ones around it.
            moments = moments if moments is not None else [_moment(r.created_at) for r in rows]
            if start is None:
                start = _kept_before(moments, entry.planned_at)
                if start is None:
                    continue                  # it ran before every kept checkpoint
            if end is None and entry.post_checkpoint_id:
                end = _kept_after(moments, entry.finished_at or entry.planned_at)
            coarse = True
        # Resume closes a call a crash interrupted with its own checkpoint: such a call
        # never recorded its patches, so its window is read like an open one's (declared
        # paths, everything that changed inside it, confidence unknown), even once it
        # is reconciled.
        ended = end is not None and (end == NOW or rows[end].kind != "resume")
        if never_ran(entry) or is_delegation(entry.tool_name):
            continue                          # denied before it ran, or a container: it
                                              # owns nothing (its subagent's calls do)
        if entry.rewound_files == "restored":
            continue                          # the agent's own rewind put its files back:
                                              # nothing of it is left to undo
        # Closed without its own end (no PostToolUse, the transcript could not tell): what
        # changed in its window cannot be told from a user edit (DESIGN.md, Attribution).
        unsure = ended and entry.status == "uncertain"
        ended = ended and not unsure
        if end is None:
            end = start + 1 if start + 1 < len(rows) else NOW
        if end <= target:
            # It ended at or before the target: it covers no stretch from the target on
            # (covering, across_pruned) and is no agent window (agent_windows). Leaving it
            # out keeps each path's lookups O(calls since the target), not O(history).
            continue
        patch_ref = entry.file_patches[0].patch_ref if entry.file_patches else None
        timeline.windows.append(Window(
            entry.call_id, start, end, ended, frozenset(entry.declared_writes), patch_ref,
            None if ended else planned(entry), coarse,
            tuple((p.path, _state(p.before_hash, p.before_mode),
                   _state(p.after_hash, p.after_mode)) for p in entry.file_patches)
            if coarse else (), entry.status,
            "ambiguous" if unsure else "unknown",
            changed=frozenset(p.path for p in entry.file_patches) if ended else None,
            background=entry.call_id in background, shell=is_shell(entry.tool_name)))
    return timeline


def _kept_before(moments: Sequence[datetime], stamp: str) -> int | None:
    """The last kept checkpoint taken no later than `stamp`."""
    at = bisect.bisect_right(moments, _moment(stamp))
    return at - 1 if at else None


def _kept_after(moments: Sequence[datetime], stamp: str) -> int:
    """The first kept checkpoint taken no earlier than `stamp`, else the working tree."""
    at = bisect.bisect_left(moments, _moment(stamp))
    return at if at < len(moments) else NOW


def _state(oid: str | None, mode: int | None) -> FileState | None:
    return None if oid is None else FileState(oid, mode if mode is not None else 0)


def _same(recorded: FileState | None, seen: FileState | None) -> bool:
    """A patch's recorded state is what a snapshot saw (a mode it did not record: any)."""
    if recorded is None or seen is None:
        return recorded is seen
    return recorded.oid == seen.oid and recorded.mode in (0, seen.mode)


def history(timeline: Timeline, path: str, lookup: Callable[[str, str], FileState | None],
            now: FileState | None, open_history: bool = True) -> PathHistory:
    """The path's state at each checkpoint from the target on, and who made each change.

    `open_history`: a command's change to a file the user changed since the target is
    ambiguous (window_rules). Blame reads each change against its own call's pre
    checkpoint, the rollback that undoes that call, where no user change comes between
    (`False`)."""
    states: list[tuple[int, FileState | None]] = [(pos, lookup(tree, path))
                                                  for pos, tree in timeline.points]
    states.append((NOW, now))
    changes: list[Change] = []
    yours = False        # the user changed it since the target (window_rules: open history)
    for (start, before), (end, after) in zip(states, states[1:], strict=False):
        if before != after:
            change = _change(timeline, path, start, end, before, after)
            if open_history and yours and change.owner != USER:
                change = _open_history(timeline, path, change)
            yours = yours or change.owner == USER
            changes.append(replace(change, since=timeline.stamps.get(start)))
    return PathHistory(path, states[0][1], now, tuple(changes))


def _open_history(timeline: Timeline, path: str, change: Change) -> Change:
    """A change a call owns only by its window (it did not name the path) to a file the
    user changed before it is ambiguous: it may be the user's own save while the command
    ran (window_rules, open history)."""
    if change.confidence != "window" or change.why is not None:
        return change
    window = next((w for w in timeline.windows if w.call_id == change.owner), None)
    if window is None or declares(window.declared, path):
        return change
    return replace(change, confidence="ambiguous",
                   why=f"{change.owner} is a command whose writes cannot be read from its "
                       f"words, and you had changed {path} before it ran: its change cannot "
                       "be told from a save of yours while it ran")


def _change(timeline: Timeline, path: str, start: int, end: int, before: FileState | None,
            after: FileState | None) -> Change:
    """Who made the change of `path` between positions `start` and `end`."""
    claiming, open_windows = timeline.claiming(start, end, path)
    if not claiming:
        return Change(before, after, USER, "window", None, end)
    window = claiming[-1]
    if all(w.coarse and w.ended for w in claiming):
        # gc stretched these windows over the same kept checkpoints: their recorded
        # patches tell the chain of changes (one call after another, not at once).
        return timeline.across_pruned(window, path, start, end, before, after)
    if len(claiming) > 1:
        # Two calls open at once both account for this change: neither surely made it.
        names = ", ".join(w.call_id for w in claiming)
        return Change(before, after, window.call_id, "ambiguous", window.patch_ref, end,
                      why=f"calls {names} ran at once and each may have changed it")
    if open_windows > 1 and not declares(window.declared, path) and not window.coarse:
        # Overlapping windows: only a path exactly one open call declared is surely
        # that call's (DESIGN.md, Attribution); a shell's undeclared change beside
        # other work could be anyone's, the user's included.
        return Change(before, after, window.call_id, "ambiguous", window.patch_ref, end,
                      why=f"{window.call_id} ran beside other calls and did not declare "
                          "it: the change cannot be told from a user edit")
    confidence = window.confidence(path, after)
    if window.background:
        why: str | None = (f"{window.call_id} ran in the background beside other work: a "
                           "change in its window cannot be told from a user edit")
    elif confidence in ("unknown", "ambiguous") and not window.ended:
        why = window.unsettled()
    else:
        why = None
    return Change(before, after, window.call_id, confidence, window.patch_ref, end, why=why)


def read_attributions(store: Store, paths: Collection[str] | None = None) -> list[Attribution]:
    """The watcher's records, when a daemon has written them; a torn tail is ignored.

    `paths`: only records of these (a rollback's candidates): a long session's file holds
    a record per change, and only the candidates' are worth validating.
    """
    path = store.root / ATTRIBUTION_FILE
    return [Attribution.model_validate(r) for r in durable.read_jsonl(path).records
            if paths is None or not isinstance(r, dict) or r.get("path") in paths]


def by_path(records: Iterable[Attribution]) -> dict[str, list[Attribution]]:
    """Records grouped by path, each group in file order (what foreign_touch reads)."""
    grouped: dict[str, list[Attribution]] = {}
    for record in records:
        grouped.setdefault(record.path, []).append(record)
    return grouped


def _moment(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def foreign_touch(item: PathHistory, since: str, records: Iterable[Attribution]) -> str | None:
    """Why someone other than an agent call touched this path after `since` (after the
    agent's first change to it, when that came later), or None.

    A file holding exactly the bytes the last agent change left is that call's, whatever
    moved it in between (`git stash` and `stash pop`, a checkout and a restore): what
    happened after that change (in the checkpoints, in the watcher's records newer than
    the call's own) ended where the agent left it, so no one else's work is there now.
    """
    records = list(records)
    last = item.last_agent_change()
    changes: Sequence[Change] = item.changes
    start = _moment(since)
    first = item.first_agent_change()
    if first is not None:
        # The user's edits before the agent's first write are part of what a rollback
        # restores (the file as the agent found it): neither they nor the watcher's
        # records of them make a conflict.
        changes = changes[changes.index(first):]
        if first.since is not None:
            start = max(start, _moment(first.since))
    settled: datetime | None = None
    if last is not None and item.now == last.after and last.why is None and \
            last.confidence not in ("ambiguous", "unknown"):
        changes = changes[:changes.index(last) + 1]
        own = [_moment(r.at) for r in records if r.path == item.path and r.owner == last.owner]
        settled = max(own) if own else None
    last_call: str | None = None
    for change in changes:
        if change.owner != USER and change.why is not None:
            return change.why
        if change.owner != USER and change.confidence in ("ambiguous", "unknown"):
            return interrupted_reason(change.owner, "")
        if change.owner != USER:
            last_call = change.owner
        elif last_call is not None:
            return f"the user changed it after {last_call} wrote it"
        else:
            return "the user changed it before the agent did"
    for record in records:
        if record.path != item.path or _moment(record.at) <= start:
            continue
        if settled is not None and _moment(record.at) > settled:
            continue        # after the call's own record, and it holds the call's bytes again
        if record.owner == USER:
            return f"the watcher saw the user change it at {record.at}"
        if record.confidence in ("ambiguous", "unknown"):
            return f"the watcher saw a change of {record.confidence} origin at {record.at}"
    return None
