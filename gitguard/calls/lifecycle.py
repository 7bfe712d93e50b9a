"""Beginning and ending a tool call: ledger events around pre and post snapshots."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pygit2

from gitguard import clock, jsontext
from gitguard.calls import tools
from gitguard.calls.delegation import is_delegation
from gitguard.errors import GitguardError, IllegalTransition, ReplayRefused, UnsafePath
from gitguard.git import packing, patch_text
from gitguard.ledger import git_moves, journal, sessions
from gitguard.ledger.replay import BLOCKING_STATUSES, rewound_local, stricter
from gitguard.models import FilePatchEntry, Idempotency, ReplayPolicy, RiskLevel, ToolLedgerEntry
from gitguard.snapshot import checkpoints, shared_checkpoint
from gitguard.storage import durable, trace_log
from gitguard.storage.store import Store
from gitguard.workspace import safe_relpath

if TYPE_CHECKING:
    from gitguard.guard_context import GuardContext

PATCH_NAME = "patch_{}.diff"
SUMMARY_KEYS = ("command", "cmd", "file_path", "path", "notebook_path", "pattern", "url", "query")


def summarize(tool_input: Mapping[str, Any]) -> str:
    for key in SUMMARY_KEYS:
        value = tool_input.get(key)
        if isinstance(value, str) and value:
            return value[:200]
        if isinstance(value, list) and value:
            return " ".join(str(v) for v in value)[:200]
    return durable.canonical_json(dict(tool_input)).decode()[:120]


def patch_of(store: Store, entry: ToolLedgerEntry) -> bytes:
    """The call's unified diff as `call end` stored it (one artifact for all its files):
    what `gitguard diff CALL` prints and the timeline page shows."""
    if not entry.file_patches:
        return b""
    return store.read_artifact(entry.file_patches[0].patch_ref)


def error_summary(result: bytes) -> str:
    lines = [ln.strip() for ln in result.decode(errors="replace").splitlines() if ln.strip()]
    return " | ".join(lines[-4:])[:300]


def _replay_check(state: journal.LedgerState, lineage: Sequence[str], tool: str, digest: str,
                  policy: ReplayPolicy, confirm: bool, force: bool) -> str | None:
    """The earlier call this one repeats, or a ReplayRefused when the policy says no.
    `lineage`: the session and the sessions it was forked from (their calls are its past)."""
    # Looked up by key, not a walk of the whole ledger: O(this input's runs), not O(history),
    # and without their entries (which may be older than the ledger's window).
    runs = [r for sid in reversed(lineage) for r in state.runs_by_key((sid, tool, digest))]
    earlier = [(call_id, run) for call_id, run in runs if run.status in BLOCKING_STATUSES]
    if earlier:     # rare: only a repeat reads the entries, for the agent's own rewinds
        earlier = [(c, r) for c, r in earlier if not rewound_local(state.get(c))]
    if not earlier:
        return None
    # Each run's policy is effective_policy(its entry, "auto"): the stricter of them and
    # the policy asked for is the stricter of effective_policy(entry, asked) over them.
    policy = stricter(policy, *(run.policy for _call_id, run in earlier))
    prior_id = earlier[-1][0]
    if policy == "auto" or force or (policy == "ask" and confirm):
        return prior_id
    prior = state.get(prior_id)         # refused: its entry, for the message
    when = prior.finished_at or prior.started_at or prior.planned_at
    same = " on the same state" if prior.replay_key else ""
    said = (f"{tool} with this input{same} already ran as {prior.call_id} "
            f"({prior.status} at {when}); its replay policy is {policy}")
    if policy == "ask":
        raise ReplayRefused(said, "check that running it again is safe, then pass --confirm")
    raise ReplayRefused(said, "it must not run twice; if you are sure, pass --force-replay "
                              "(the override is recorded in the ledger)")


def _shell_writes(g: GuardContext, tool: str, tool_input: Mapping[str, Any]) -> list[str]:
    """A shell command's write targets read from its words (`shell_targets`), as workspace
    paths, when the caller named none: relative to the input's `cwd`, else the workspace
    root. Targets outside the workspace are not ours."""
    from gitguard.calls.classify import command_of
    from gitguard.calls.shell_targets import written_paths

    command = command_of(tool, tool_input)
    if command is None:
        return []
    where = tool_input.get("cwd")
    base = os.path.join(g.ws.root, where) if isinstance(where, str) else str(g.ws.root)
    found: list[str] = []
    for path in written_paths(command, os.path.normpath(base)) or ():
        try:
            found.append(safe_relpath(g.ws, path))
        except UnsafePath:
            continue
    return [p for p in dict.fromkeys(found) if p]


def _replay_key(g: GuardContext, tool: str, tool_input: Mapping[str, Any], digest: str,
                writes: Sequence[str]) -> str | None:
    """The call's replay identity where the state it acts on is part of it (replay_state).
    A shell command's declared paths are what it writes (read from its words), not a base
    it edits: they never make a second `npm publish > log` another call."""
    from gitguard.calls import replay_state
    from gitguard.calls.classify import command_of

    command = command_of(tool, tool_input)
    return replay_state.replay_key(g.ws, g.snap.repo if g.ws.is_git else None, digest,
                                   command, tools.declared_replay_key(g.settings, tool),
                                   writes if command is None else ())


def _probe_facts(g: GuardContext, tool: str, tool_input: Mapping[str, Any],
                 effects: Sequence[str]) -> dict[str, str] | None:
    """What the call's built-in probe will need, as it stands now (calls.probe_facts);
    only for the commands a built-in probe exists for. Redacted: a fact that held a secret
    (a token in a remote's URL) is left out and named, never stored."""
    from gitguard.calls import probe_facts

    if not probe_facts.PROBED_EFFECTS.intersection(effects):
        return None
    from gitguard.calls.classify import command_of

    command = command_of(tool, tool_input)
    if command is None:
        return None
    try:
        here = Path.cwd()
        cwd = here if here.is_relative_to(g.ws.root) else g.ws.root
        facts = probe_facts.gather(g.ws.root, cwd, g.snap.repo if g.ws.is_git else None,
                                   command)
    except (OSError, ValueError, KeyError, pygit2.GitError):
        return None                     # a probe less; never a call refused for it
    if facts is None:
        return None
    redacted = g.store.privacy.redact_json(facts)
    secret = sorted(k for k in facts if redacted.get(k) != facts[k])
    kept = {k: v for k, v in facts.items() if k not in secret}
    return {**kept, "redacted": ",".join(secret)} if secret else kept


def begin(g: GuardContext, tool: str, tool_input: Mapping[str, Any], *, step_id: str | None = None,
          call_id: str | None = None, writes: Sequence[str] = (),
          idempotency: Idempotency | None = None, replay: ReplayPolicy | None = None,
          risk: RiskLevel | None = None, side_effects: Sequence[str] = (),
          session_id: str | None = None, confirm: bool = False,
          force_replay: bool = False, compensates: str | None = None,
          agent_id: str | None = None, agent_type: str | None = None) -> ToolLedgerEntry:
    if not tool:
        raise GitguardError("a call needs a tool name", "pass --tool NAME")
    if not isinstance(tool_input, Mapping):
        raise GitguardError("a call's input must be a JSON object", 'for example {"command": '
                            '"ls"}')
    jsontext.check_depth(tool_input, "the call's input")
    try:
        digest = journal.input_hash(tool_input)
    except (TypeError, ValueError) as exc:     # the Python API takes any Mapping
        raise GitguardError(f"the call's input is not JSON: {exc}",
                            "pass str, number, bool, None, list and dict values with "
                            "str keys") from None
    declared = tuple(safe_relpath(g.ws, w) for w in writes)
    # Redact before anything quotes or cuts the input (the classification reason quotes the
    # command; the summary is cut at 200 characters): half a secret matches no pattern.
    # The hash stays over the real input, so a replay is still recognised.
    redacted_input = g.store.privacy.redact_json(dict(tool_input))
    # A shell command's targets are read from the redacted words: a secret never becomes
    # a declared path (the ledger, the stat index).
    declared = declared or tuple(_shell_writes(g, tool, redacted_input))
    cls = tools.classify(g.settings, tool, redacted_input)
    key = _replay_key(g, tool, tool_input, digest, declared)
    facts = _probe_facts(g, tool, tool_input, cls.side_effects)
    started_clock = time.perf_counter()
    with g.store.writing():
        session = sessions.resolve(g.store, session_id)
        state = journal.read(g.store)
        call_id = call_id or f"call_{state.calls + 1}"
        if state.known(call_id):
            raise IllegalTransition(f"call {call_id} already exists "
                                    f"({state.get(call_id).status})",
                                    "use a new --call-id, or end it with `gitguard call end`")
        policy = replay or cls.replay_policy
        try:
            replay_of = _replay_check(state, sessions.lineage(g.store, session), tool,
                                      key or digest, policy, confirm, force_replay)
        except ReplayRefused as refused:
            trace_log.emit(g.store, "recovery", "recovery.replay_refused",
                           session_id=session.session_id, tool=tool, inputHash=digest,
                           reason=refused.message)
            raise
        stored_input = durable.canonical_json(redacted_input)
        # Appended to the session's artifact journal: no file of its own. Its fsync runs
        # while the pre checkpoint is written; both are durable before the ledger names them.
        with g.store.appending_artifacts(session.session_id,
                                         [(f"input_{call_id}.json", stored_input)]) as refs:
            planned = ToolLedgerEntry(
                call_id=call_id, step_id=step_id or f"step_{state.calls + 1}",
                tool_name=tool, input_hash=digest, status="planned",
                risk_level=risk or cls.risk_level, idempotency=idempotency or cls.idempotency,
                replay_policy=policy, side_effects=tuple(side_effects) or cls.side_effects,
                session_id=session.session_id, planned_at=clock.stamp(),
                summary=summarize(redacted_input),
                classification_reason=("set by the caller" if (idempotency or replay)
                                       else cls.reason),
                input_ref=refs[0], declared_writes=declared, replay_of=replay_of,
                compensates=compensates, replay_key=key, probe_facts=facts,
                note=f"forced replay of {replay_of}" if (replay_of and force_replay) else None,
                agent_id=agent_id, agent_type=agent_type,
            )
            # The pre checkpoint first, then planned and started in one append (one fsync): a
            # kill in between leaves a checkpoint no entry names, which resume and verify
            # accept; a call is in the ledger only once it is started. The checkpoint's seq is
            # the ledger's last before the call, so it never points past the ledger.
            # Right after the session's previous call ended, with nothing changed since,
            # that call's post checkpoint is this one's pre (gitguard.snapshot.shared_checkpoint
            # says why every reader takes it so): no checkpoint file, no index line, 3 fsyncs less.
            tree = g.snap.write_tree()
            index = checkpoints.read_index(g.store)
            pre = (shared_checkpoint.reusable(g.store, g.snap, index, state,
                                              session.session_id, tree)
                   or checkpoints.write(g.store, g.snap, index,
                                        session_id=session.session_id, kind="pre", tree=tree,
                                        ledger_seq=state.last_seq, step_id=planned.step_id,
                                        call_id=call_id))
        started = planned.model_copy(update={"status": "started", "started_at": clock.stamp(),
                                             "pre_checkpoint_id": pre.checkpoint_id})
        journal.append_entries(g.store, state, [planned, started])
        trace_log.emit(g.store, "tool", "tool.start", session_id=session.session_id,
                       duration_ms=(time.perf_counter() - started_clock) * 1000, callId=call_id,
                       tool=tool, checkpointId=pre.checkpoint_id, bytes=len(stored_input))
    return started


def end(g: GuardContext, call_id: str, status: str, result: str | bytes | None = None
        ) -> ToolLedgerEntry:
    if status not in ("succeeded", "failed"):
        raise GitguardError(f"a call ends succeeded or failed, not {status!r}",
                            "pass --status succeeded or --status failed")
    data = result.encode() if isinstance(result, str) else result
    started_clock = time.perf_counter()
    entered = clock.stamp()
    if data is not None:
        data = g.store.privacy.redact_bytes(data)
    with g.store.writing():
        state = journal.read(g.store)
        entry = state.get(call_id)
        journal.check_transition(entry, status, call_id)
        index = checkpoints.read_index(g.store)
        # A declared-only call's end snapshot looks at its declared paths only: what else
        # changed in its window is found by the next scan and is the user's
        # (Snapshotter.write_declared says why that is the safe direction). The daemon
        # takes its own tree; either way the call's patches hold its declared paths only
        # (`_not_its_own`), whatever else the post tree shows of other writers.
        declared_only = owns_declared_only(g, entry)
        tree = (g.snap.write_declared(entry.declared_writes)
                if declared_only and g.snap.ends_declared_calls_without_scan()
                else g.snap.write_tree())
        # The patch and the result first, in one append to the session's artifact journal
        # (one fsync): nothing names them before the ledger record. A delegation owns no
        # change: what its window saw, its subagent's calls (or the user) made.
        patches, patch = ((), b"") if is_delegation(entry.tool_name) else _file_patches(
            g, index, entry, tree.tree, _not_its_own(g, state, entry, declared_only),
            strays=None if declared_only else _command_dirs(g, entry, None))
        items = [(PATCH_NAME.format(call_id), patch)] if patches else []
        if data is not None:
            items.append((f"result_{call_id}.txt", data))
        # Its fsync runs while the post checkpoint is written (as at begin).
        with g.store.appending_artifacts(entry.session_id, items) as refs:
            result_ref = refs[-1] if data is not None else None
            post = checkpoints.write(g.store, g.snap, index, session_id=entry.session_id,
                                     kind="post", tree=tree, ledger_seq=state.last_seq,
                                     step_id=entry.step_id, call_id=call_id)
        finished = entry.model_copy(update={
            "status": status, "finished_at": clock.stamp(), "result_ref": result_ref,
            "post_checkpoint_id": post.checkpoint_id, "file_patches": patches,
            "error_summary": error_summary(data) if (status == "failed" and data) else None,
        })
        journal.append_entries(g.store, state, [finished])
        trace_log.emit(g.store, "tool", "tool.end", session_id=entry.session_id,
                       duration_ms=(time.perf_counter() - started_clock) * 1000, callId=call_id,
                       status=status, files=len(patches), checkpointId=post.checkpoint_id,
                       toolMs=_elapsed_ms(entry.started_at, entered),
                       bytes=len(data or b"") + len(patch))
        # Without a daemon nobody else packs: keep our loose objects under git's auto-gc bar
        # (the daemon checks every few calls itself). The call is recorded by now;
        # housekeeping that fails must not make it look failed.
        if not g.packs_in_background:
            try:
                packing.maybe_pack(g.store, g.snap.repo)
            except GitguardError as exc:
                trace_log.emit(g.store, "gc", "gc.pack_failed", error=exc.message)
    return finished


def close_unrun(g: GuardContext, call_id: str, why: str) -> ToolLedgerEntry:
    """End a started call that never ran (its PreToolUse came, then a denial): `failed`,
    with no snapshot and an empty window (post checkpoint = pre checkpoint), so it owns
    nothing and whatever changed meanwhile stays the user's (replay.never_ran)."""
    with g.store.writing():
        state = journal.read(g.store)
        entry = state.get(call_id)
        journal.check_transition(entry, "failed", call_id)
        closed = entry.model_copy(update={
            "status": "failed", "finished_at": clock.stamp(),
            "post_checkpoint_id": entry.pre_checkpoint_id, "error_summary": why[:300],
            "note": "the tool never ran"})
        journal.append_entries(g.store, state, [closed])
        trace_log.emit(g.store, "tool", "tool.never_ran", session_id=entry.session_id,
                       callId=call_id, reason=why)
    return closed


def owns_declared_only(g: GuardContext, entry: ToolLedgerEntry) -> bool:
    """The call owns only the paths it declared (`attribution.is_declared_only`, from its
    stored input): what else changed in its window is someone else's."""
    from gitguard.calls.attribution import is_declared_only  # here: `call begin` needs none of it

    stored_input = _stored_input(g, entry) if entry.declared_writes else None
    return stored_input is not None and is_declared_only(entry.tool_name, stored_input,
                                                         entry.declared_writes)


def _stored_input(g: GuardContext, entry: ToolLedgerEntry) -> dict[str, Any] | None:
    """The call's stored input (redaction keeps its keys); None when it cannot be read,
    and the end snapshot is then a full scan."""
    if entry.input_ref is None:
        return None
    try:
        stored = json.loads(g.store.read_artifact(entry.input_ref))
    except (GitguardError, OSError, ValueError):
        return None
    return stored if isinstance(stored, dict) else None


def _elapsed_ms(start: str | None, end: str | None) -> float | None:
    """How long the tool itself ran: from its `started` stamp to when `call end` began."""
    if start is None or end is None:
        return None
    delta = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    return round(delta.total_seconds() * 1000, 3)


def _not_its_own(g: GuardContext, state: journal.LedgerState, entry: ToolLedgerEntry,
                 declared_only: bool) -> Callable[[str], bool]:
    """Which paths that changed between the call's pre and post snapshots it did not
    change (DESIGN.md, Attribution), though they fall inside its window:

    * a declared-only call (Write, Edit, ...) writes only what it declared: any other
      path is someone else's (another session's call, the user's editor or commit);
    * any call: a path another call declared while their windows overlapped is that
      call's (exactly one open call declared it), and a path the user committed during
      the window (the post-commit hook's `CommitRecord`) is the user's.

    A path the call declared itself always stays its own. Another session's shell call
    in the same window cannot be told apart here: its changes stay in both, and rollback
    sees two owners of one change and makes it a conflict (`timeline.history`)."""
    from gitguard.calls.attribution import declares

    own = frozenset(entry.declared_writes)
    if declared_only:
        return lambda path: not declares(own, path)
    others = _declared_by_overlapping(state, entry) | git_moves.committed_by_user(
        g.store, entry.started_at or "")
    others -= own
    return lambda path: path in others


def _declared_by_overlapping(state: journal.LedgerState, entry: ToolLedgerEntry) -> set[str]:
    """Paths declared by the other calls whose windows overlapped this one's: begun after it
    (it is still open), or begun before it and not finished when it began."""
    start = entry.started_at or ""
    kept, dropped_until = state.recent_entries()
    # A finished call left out of the ledger's window overlaps this one only if it ended
    # after this one began: rare (a call open across WINDOW others), then read them all.
    others = kept if dropped_until < start else state.in_order()
    found: set[str] = set()
    for other in others:
        if other.call_id == entry.call_id or not other.declared_writes:
            continue
        if other.started_at is None:
            continue                    # never started: it wrote nothing
        if other.started_at >= start or other.finished_at is None or other.finished_at >= start:
            found.update(other.declared_writes)
    return found


def _command_dirs(g: GuardContext, entry: ToolLedgerEntry,
                  stored: dict[str, Any] | None) -> frozenset[str] | None:
    """The directories the call's command runs in, when it ran a command whose writes
    cannot be read from its words (the stray rule: window_rules); None otherwise. Its
    stored input says, read when it was not read already."""
    from gitguard.calls import window_rules
    from gitguard.calls.classify import command_of
    from gitguard.calls.classify_tools import COMMAND_TOOLS, tool_key

    if tool_key(entry.tool_name) not in COMMAND_TOOLS:
        return None
    stored = stored if stored is not None else _stored_input(g, entry)
    if stored is None:
        return None
    return window_rules.command_dirs(command_of(entry.tool_name, stored), stored,
                                     str(g.ws.root))


def _file_patches(g: GuardContext, index: checkpoints.Index, entry: ToolLedgerEntry,
                  post_tree: str, not_its_own: Callable[[str], bool] = lambda _p: False,
                  strays: frozenset[str] | None = None
                  ) -> tuple[tuple[FilePatchEntry, ...], bytes]:
    """The call's file patches and the patch artifact's bytes (never redacted), which the
    caller stores as PATCH_NAME. `strays`: the directories a command whose writes cannot
    be read from its words ran in; it leaves out the new files in directories it did not
    touch (`window_rules`). None: no such command."""
    if entry.pre_checkpoint_id is None:
        return (), b""
    pre = checkpoints.load(g.store, index.find(entry.pre_checkpoint_id))
    pre_tree = g.snap.tree_of(pre.snapshot_commit)
    changes = [c for c in g.snap.diff(pre_tree, post_tree) if not not_its_own(c.path)]
    if strays is not None:
        from gitguard.calls import window_rules

        stray = window_rules.strays([(c.path, c.old_oid) for c in changes],
                                    frozenset(entry.declared_writes),
                                    window_rules.dirs_of(g.snap.repo, pre_tree), strays)
        changes = [c for c in changes if c.path not in stray]
    # What a git command of the user's left while the call was open is the user's (git hooks).
    users = git_moves.left_by_user(g.store, g.snap, index, entry.pre_checkpoint_id)
    changes = [c for c in changes if c.path not in users or users[c.path] != c.new_oid]
    if not changes:
        return (), b""
    patch = patch_text.render(g.snap.repo, changes)     # in-process: no git diff-tree -p
    patch_ref = f"artifacts/{PATCH_NAME.format(entry.call_id)}"
    created = clock.stamp()
    return tuple(
        FilePatchEntry(path=c.path, before_hash=c.old_oid, after_hash=c.new_oid,
                       patch_ref=patch_ref, tool_call_id=entry.call_id, created_at=created,
                       before_mode=c.old_mode or None, after_mode=c.new_mode or None)
        for c in changes
    ), patch
