"""Who owns a change: an agent call or the user, and how sure we are. Pure functions.

Without the daemon, attribution comes from snapshots at call boundaries: what
changed between a call's pre and post snapshot is the call's, what changed between
calls is the user's. A path whose current content is no longer what the agent last
wrote has been changed by the user since.

With the daemon, every filesystem change is seen as it happens and fed, in order,
together with the opening and closing of call windows, to a `Tracker`. The rules:

* A change while no call window is open is the user's (confidence `window`: it fell
  outside every window).
* A call that declares the paths it writes and is not a shell command (Edit, Write,
  MultiEdit, ...) is *declared-only*. A declared path it changed is the call's with
  confidence `exact` when the change came as one write and the final content
  matches what the tool declared (Write: the whole content; Edit: the new text is
  present and the replaced text gone). A declared path written twice or more in the
  window, or whose final content differs from the declaration, is `ambiguous`: the
  tool writes once, so someone else wrote too. An undeclared path changed during a
  declared-only window is the user's: the tool does not write there.
* During a shell call (no declared writes, or a command tool) every change is the
  call's, confidence `window`. A path written in two or more separate write
  sessions inside one window (a session ends when the writer closes the file, a
  rename lands on it, it is deleted or its mode changes) is `ambiguous`: most
  commands write a file once, and a user saving the same file in their editor
  while the command runs shows up exactly like that. This is a heuristic with a
  known blind side: a user save that is the *only* write to a path during a shell
  window cannot be told from the command's own write without process identity,
  which inotify does not give; such a change is recorded as the call's (`window`).
  A command that writes one file twice is reported ambiguous: the safe side, since
  rollback then asks instead of overwriting.
* When calls overlap (subagents, tools run in parallel, another session in the same
  worktree, a shell left running in the background), a change belongs to the running
  call that declared the path when exactly one did; with only declared-only calls
  running and none declaring it, to the user. Any other change in overlapping windows
  is `ambiguous` for the shell calls that could have made it (two calls declared it, or
  a shell call ran beside another call): never an `exact` or `window` guess.
* A shell call moved to the background (Claude Code's `run_in_background`) keeps its
  window open until its end is observed; it runs beside the user's work for minutes or
  hours, so every change it could have made is `ambiguous`: its own, never the user's,
  and never something rollback restores without asking.
* When events were lost (the kernel queue overflowed) or nobody was watching (the
  daemon was down), a rescan finds the changes; they are `unknown`, owner `user`. One
  exception: a change the daemon finds at its start to a path exactly one still open
  call declared is that call's (the hook that began the call started the daemon, which
  came up while the call ran).

Rollback reverts only call-owned `exact`/`window` changes; `user`, `ambiguous`
and `unknown` records after a checkpoint make the path a conflict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from gitguard.models import Confidence, FilePatchEntry, ToolLedgerEntry

USER = "user"

EventKind = Literal["create", "write", "close", "attrib", "delete", "move_from", "move_to"]
# Events that end a write session; `create` and `write` open (or continue) one.
_ENDS_SESSION = frozenset({"close", "attrib", "delete", "move_from", "move_to"})
_COMMAND_KEYS = ("command", "cmd", "argv")
_SHELL_TOOLS = frozenset({"bash", "run_command", "shell", "exec", "execute_command",
                          "run_shell_command", "terminal"})


@dataclass(frozen=True)
class AgentWrite:
    """The agent's last write of a path: which call, what content, whether it was declared."""

    call_id: str
    after_hash: str | None
    declared: bool
    at: str = ""


def last_agent_writes(entries: Iterable[ToolLedgerEntry]) -> dict[str, AgentWrite]:
    """The newest FilePatchEntry per path over calls in ledger order."""
    latest: dict[str, AgentWrite] = {}
    for entry in entries:
        # A shell command's declared paths come from its words, not content it named.
        named = frozenset(entry.declared_writes) if not is_shell(entry.tool_name) else ()
        for patch in entry.file_patches:
            latest[patch.path] = AgentWrite(entry.call_id, patch.after_hash,
                                            patch.path in named, patch.created_at)
    return latest


def written_at_once(entries: Iterable[ToolLedgerEntry]) -> frozenset[str]:
    """Paths two calls whose windows overlapped both changed, neither the only one that
    declared it: neither surely made the change (snapshots at call boundaries cannot tell
    whose it was; `timeline` says the same to rollback)."""
    spans: dict[str, list[tuple[str, str, bool]]] = {}
    for entry in entries:
        if entry.started_at is None or entry.finished_at is None:
            continue
        named = frozenset(entry.declared_writes)
        for patch in entry.file_patches:
            spans.setdefault(patch.path, []).append(
                (entry.started_at, entry.finished_at, patch.path in named))
    shared: set[str] = set()
    for path, calls in spans.items():
        for i, (start, end, declared) in enumerate(calls):
            for start2, end2, declared2 in calls[i + 1:]:
                if start < end2 and start2 < end and declared == declared2:
                    shared.add(path)
    return frozenset(shared)


def owner_of(current_hash: str | None, agent: AgentWrite | None) -> tuple[str, Confidence]:
    """Owner and confidence of a path that differs from the baseline."""
    if agent is None or agent.after_hash != current_hash:
        return USER, "window"
    return agent.call_id, "exact" if agent.declared else "window"


@dataclass(frozen=True)
class Recorded:
    """The newest attribution record of a path (from attribution.jsonl)."""

    owner: str
    confidence: Confidence
    at: str


def owner_with_records(current_hash: str | None, agent: AgentWrite | None,
                       record: Recorded | None) -> tuple[str, Confidence]:
    """`owner_of`, refined by what the daemon saw: a record newer than the agent's last
    write wins, unless the path holds exactly what that write left (it was moved away
    and back: stash and pop, checkout and restore); a call's own record carries its
    confidence (exact/window/ambiguous)."""
    if record is None:
        return owner_of(current_hash, agent)
    if agent is not None and record.at > agent.at and agent.after_hash == current_hash:
        return owner_of(current_hash, agent)
    if agent is None or record.at > agent.at:
        return record.owner, record.confidence
    owner, confidence = owner_of(current_hash, agent)
    if owner == record.owner:
        return owner, record.confidence
    return owner, confidence


def owner_words(owner: str, confidence: str) -> str:
    """How every command names who changed a path (status, resume, explain, conflicts)."""
    if confidence == "ambiguous":
        return (f"{owner} or the user (ambiguous)" if owner != USER
                else "the user or a call (ambiguous)")
    if confidence == "unknown":
        return ("someone while nobody watched (unknown)" if owner == USER
                else f"{owner} or the user (unknown: it never finished)")
    return "the user" if owner == USER else f"{owner} ({confidence})"


def unsettled_owner(path_then: str | None, path_end: str | None | bool, now: str | None
                    ) -> bool:
    """Whether a change now falls in an unfinished call's window: the path differs from its
    state when the call began and is as the window's end left it (`True` for an end not
    reached yet). Such a change cannot be told from a user edit: it is ambiguous."""
    return path_then != now and (path_end is True or path_end == now)


def patches_after(entries: Iterable[ToolLedgerEntry], seq_of: dict[str, int],
                  since_seq: int) -> list[FilePatchEntry]:
    """FilePatchEntries of calls that finished after ledger position `since_seq`."""
    return [p for e in entries if seq_of.get(e.call_id, 0) > since_seq for p in e.file_patches]


# --- the daemon's live attribution -------------------------------------------------------

@dataclass(frozen=True)
class Expectation:
    """What a declared-write tool said the file will hold, when its input says so."""

    whole: bytes | None = None                 # Write: the entire new content
    present: tuple[bytes, ...] = ()            # Edit/MultiEdit: new text that must be there
    absent: tuple[bytes, ...] = ()             # Edit: replaced text that must be gone

    def matches(self, content: bytes | None) -> bool:
        if content is None:
            return False
        if self.whole is not None and content != self.whole:
            return False
        return (all(p in content for p in self.present)
                and all(a not in content for a in self.absent))


def expectations(tool_input: Mapping[str, Any], declared: Iterable[str],
                 resolve: Any = None) -> dict[str, Expectation]:
    """Expectations for the declared paths, from a Write/Edit/MultiEdit style input.

    `resolve` maps the input's file path to the workspace-relative path (it may raise
    for a path outside the workspace; then nothing is expected)."""
    raw_path = tool_input.get("file_path") or tool_input.get("path")
    declared = list(declared)
    if not isinstance(raw_path, str) or not declared:
        return {}
    try:
        target = resolve(raw_path) if resolve is not None else raw_path
    except Exception:  # noqa: BLE001 - an unusable path just means "no expectation"
        return {}
    if target not in declared:
        return {}
    content = tool_input.get("content")
    if isinstance(content, str):
        return {target: Expectation(whole=content.encode())}
    edits = tool_input.get("edits")
    pairs = edits if isinstance(edits, list) else [tool_input]
    edits_ = [e for e in pairs if isinstance(e, Mapping)]
    news = [e["new_string"] for e in edits_ if isinstance(e.get("new_string"), str)]
    present = [n.encode() for n in news if n]
    # Edit replaces a unique (or every) occurrence, so the old text is gone afterwards,
    # unless some new text brings it back.
    absent = [e["old_string"].encode() for e in edits_
              if isinstance(e.get("old_string"), str) and e["old_string"]
              and not any(e["old_string"] in n for n in news)]
    if not present and not absent:
        return {}
    return {target: Expectation(present=tuple(present), absent=tuple(absent))}


def declares(declared: frozenset[str], path: str) -> bool:
    """A path a call declared, or one below a declared directory (`mv dir1 dir2` declares
    the two directories; what it moves is the files below them)."""
    if path in declared:
        return True
    parts = path.split("/")
    return any("/".join(parts[:depth]) in declared for depth in range(1, len(parts)))


def is_shell(tool: str) -> bool:
    """A tool that runs shell commands (what it writes is read from its words)."""
    return tool.lower() in _SHELL_TOOLS


def is_declared_only(tool: str, tool_input: Mapping[str, Any], declared: Iterable[str]) -> bool:
    """A call that owns only what it names: a file tool that declares its paths, or a
    shell command whose words say every file it can write (`shell_targets`; those are
    its declared paths, none for `ls`). A command that writes where nobody can tell (a
    build, a script) is not: its window claims what changed in it."""
    command = next((tool_input[k] for k in _COMMAND_KEYS if k in tool_input), None)
    if tool.lower() in _SHELL_TOOLS or command is not None:
        from gitguard.calls.shell_targets import written_paths

        return isinstance(command, str | list) and written_paths(command, "/") is not None
    return bool(list(declared))


@dataclass(frozen=True)
class FsEvent:
    """One change the watcher saw, workspace-relative, with the wall time it was seen."""

    path: str
    kind: EventKind
    at: float


@dataclass(frozen=True)
class Verdict:
    path: str
    owner: str
    confidence: Confidence
    at: float


@dataclass
class _PathSeen:
    first_at: float
    sessions: int = 0
    open_session: bool = False
    shared: bool = False      # another call window was open too

    def note(self, kind: EventKind) -> None:
        if kind in _ENDS_SESSION:
            if not self.open_session:
                self.sessions += 1
            self.open_session = False
        elif not self.open_session:
            self.sessions += 1
            self.open_session = True


@dataclass
class Window:
    call_id: str
    declared: frozenset[str]
    declared_only: bool
    expected: dict[str, Expectation] = field(default_factory=dict)
    seen: dict[str, _PathSeen] = field(default_factory=dict)
    background: bool = False
    # A shell command's declared paths are read from its words, its content unknown: a
    # change there is its own on window confidence, never exact.
    shell: bool = False


@dataclass
class Tracker:
    """Feeds events and call windows in the order they happened; returns verdicts."""

    windows: dict[str, Window] = field(default_factory=dict)
    outside: dict[str, float] = field(default_factory=dict)   # user changes not yet flushed

    def observe(self, event: FsEvent) -> None:
        # Who could have made this change: the running call that declared the path; else
        # the running shell calls; else (only declared-only calls run, none writes here)
        # nobody but the user.
        claimants = [w for w in self.windows.values() if declares(w.declared, event.path)]
        shared = len(claimants) > 1
        if not claimants:
            claimants = [w for w in self.windows.values() if not w.declared_only]
            shared = bool(claimants) and len(self.windows) > 1
        if not claimants:
            self.outside.setdefault(event.path, event.at)
            return
        for window in claimants:
            seen = window.seen.get(event.path)
            if seen is None:
                seen = window.seen[event.path] = _PathSeen(event.at)
            seen.note(event.kind)
            seen.shared = seen.shared or shared

    def open(self, call_id: str, declared: Iterable[str], declared_only: bool,
             expected: Mapping[str, Expectation] | None = None, shell: bool = False
             ) -> list[Verdict]:
        """Open a call window; user changes seen before it are flushed first."""
        flushed = self.flush_user()
        self.windows[call_id] = Window(call_id, frozenset(declared), declared_only,
                                       dict(expected or {}), shell=shell)
        return flushed

    def to_background(self, call_id: str) -> None:
        """The call goes on in the background: its window stays open, its changes ambiguous."""
        window = self.windows.get(call_id)
        if window is not None:
            window.background = True

    def close(self, call_id: str, final: Mapping[str, bytes | None]) -> list[Verdict]:
        """Close a window. `final` holds the content (None: deleted) of its declared paths
        that changed, for the expectation check."""
        window = self.windows.pop(call_id, None)
        if window is None:
            return []
        verdicts: list[Verdict] = []
        for path, seen in sorted(window.seen.items()):
            owner, confidence = self._judge(window, path, seen, final)
            verdicts.append(Verdict(path, owner, confidence, seen.first_at))
        return verdicts

    @staticmethod
    def _judge(window: Window, path: str, seen: _PathSeen,
               final: Mapping[str, bytes | None]) -> tuple[str, Confidence]:
        if seen.shared or seen.sessions > 1 or window.background:
            return window.call_id, "ambiguous"
        if declares(window.declared, path):
            expected = window.expected.get(path)
            if expected is not None and not expected.matches(final.get(path)):
                return window.call_id, "ambiguous"
            return window.call_id, "window" if window.shell else "exact"
        if window.declared_only:
            return USER, "window"
        return window.call_id, "window"

    def flush_user(self) -> list[Verdict]:
        """User changes seen outside every window since the last flush."""
        verdicts = [Verdict(p, USER, "window", at) for p, at in sorted(self.outside.items())]
        self.outside.clear()
        return verdicts

    def unwatched(self, paths: Iterable[str], at: float) -> list[Verdict]:
        """Changes made while nobody watched (found when the daemon starts, its windows
        reopened). A path exactly one open call declared is that call's, as if seen as one
        write (its input or its command's words name it); every other is `unknown`."""
        lost: list[str] = []
        for path in sorted(set(paths)):
            if sum(path in w.declared for w in self.windows.values()) == 1:
                self.observe(FsEvent(path, "write", at))
                self.observe(FsEvent(path, "close", at))
            else:
                lost.append(path)
        return self.lost(lost, at)

    def lost(self, paths: Iterable[str], at: float) -> list[Verdict]:
        """Changes a rescan found after events were lost: unknown, whoever made them."""
        found = sorted(set(paths))
        for path in found:
            self.outside.pop(path, None)
            for window in self.windows.values():
                window.seen.pop(path, None)
        return [Verdict(p, USER, "unknown", at) for p in found]
