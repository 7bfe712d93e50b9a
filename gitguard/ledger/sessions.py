"""Agent sessions of one worktree: started, ended and reopened events in sessions.jsonl.

A session outlives its processes (DESIGN.md, Sessions): Claude Code ends every `-p` run
and every interactive exit with SessionEnd, and `--resume ID` / `--continue` come back
under the same id. An ended session is therefore only closed for the time being: any
later start of the same id reopens it with its whole ledger. A fork (`--fork-session`)
is a new id with a `parentId`; `lineage` gives the ids whose calls it inherits.
"""

from __future__ import annotations

import os

from gitguard import clock
from gitguard.errors import GitguardError, UnknownId
from gitguard.models import Move, Session, Subagent
from gitguard.storage import durable
from gitguard.storage.store import Store


def read(store: Store) -> list[Session]:
    sessions: dict[str, Session] = {}
    for record in durable.read_jsonl(store.sessions_path).records:
        session = Session.model_validate(record)
        sessions[session.session_id] = session
    return list(sessions.values())


def open_session(store: Store) -> Session | None:
    for session in reversed(read(store)):
        if session.ended_at is None:
            return session
    return None


# The parent of a fork that could not be named yet (its transcript's copied history not
# written when its first hook ran): until it is, every other session is its past, so the
# replay guard errs on the side of refusing.
UNKNOWN_PARENT = "*"


def start(store: Store, session_id: str | None = None, agent: str | None = None,
          parent_id: str | None = None) -> Session:
    """The session, opened: a new one, the open one, or an ended one reopened (never an
    error because it ended). `parent_id` links a fork to the session it came from; a
    link once made is kept. Under the store lock."""
    session_id = session_id or clock.session_id()
    _check_id(session_id)
    if parent_id == session_id:
        parent_id = None
    for existing in read(store):
        if existing.session_id != session_id:
            continue
        named = existing.parent_id not in (None, UNKNOWN_PARENT)
        link = existing.parent_id if named or parent_id is None else parent_id
        if existing.ended_at is None and link == existing.parent_id:
            return existing
        reopened = existing.model_copy(update={"ended_at": None, "parent_id": link,
                                               "agent": existing.agent or agent})
        durable.append_jsonl(store.sessions_path, [reopened.to_json()])
        return reopened
    session = Session(session_id=session_id, started_at=clock.stamp(), agent=agent,
                      parent_id=parent_id)
    durable.append_jsonl(store.sessions_path, [session.to_json()])
    return session


def lineage(store: Store, session: Session) -> tuple[str, ...]:
    """The session's id, then its parent's, grandparent's, ... (a fork's inherited history)."""
    if session.parent_id is None:
        return (session.session_id,)
    known = {s.session_id: s for s in read(store)}
    if session.parent_id == UNKNOWN_PARENT:
        return (session.session_id, *(s for s in known if s != session.session_id))
    chain = [session.session_id]
    parent: str | None = session.parent_id
    while parent is not None and parent not in chain:
        chain.append(parent)
        found = known.get(parent)
        parent = found.parent_id if found is not None else None
    return tuple(chain)


def subagent_started(store: Store, session_id: str, agent_id: str,
                     agent_type: str | None) -> Session:
    """A subagent of the session began (SubagentStart). Under the store lock."""
    session = start(store, session_id)
    if any(a.agent_id == agent_id and a.ended_at is None for a in session.subagents):
        return session
    others = tuple(a for a in session.subagents if a.agent_id != agent_id)
    agent = Subagent(agent_id=agent_id, agent_type=agent_type, started_at=clock.stamp())
    return _updated(store, session, others + (agent,))


def subagent_stopped(store: Store, session_id: str, agent_id: str,
                     transcript_path: str | None) -> Session:
    """A subagent of the session ended (SubagentStop). Under the store lock."""
    session = start(store, session_id)
    known = {a.agent_id: a for a in session.subagents}
    agent = known.get(agent_id) or Subagent(agent_id=agent_id, started_at=clock.stamp())
    if agent.ended_at is not None:
        return session
    known[agent_id] = agent.model_copy(update={"ended_at": clock.stamp(),
                                               "transcript_path": transcript_path})
    return _updated(store, session, tuple(known.values()))


def moved_in(store: Store, session_id: str, from_dir: str | None, to_dir: str) -> Session:
    """The session's working directory changed into this worktree (CwdChanged): the
    session is opened here and the move kept (its newest MAX_MOVES). Under the store lock."""
    session = start(store, session_id)
    move = Move(from_dir=from_dir, to_dir=to_dir, at=clock.stamp())
    changed = session.model_copy(update={"moves": (*session.moves, move)[-MAX_MOVES:]})
    durable.append_jsonl(store.sessions_path, [changed.to_json()])
    return changed


MAX_MOVES = 64


def _updated(store: Store, session: Session, subagents: tuple[Subagent, ...]) -> Session:
    # Bounded: a session keeps its newest subagents' records (the ledger keeps their calls).
    changed = session.model_copy(update={"subagents": subagents[-MAX_SUBAGENTS:]})
    durable.append_jsonl(store.sessions_path, [changed.to_json()])
    return changed


MAX_SUBAGENTS = 256


def end(store: Store, session_id: str) -> Session:
    """Under the store lock."""
    for existing in read(store):
        if existing.session_id == session_id:
            if existing.ended_at is not None:
                return existing
            ended = existing.model_copy(update={"ended_at": clock.stamp()})
            durable.append_jsonl(store.sessions_path, [ended.to_json()])
            return ended
    raise UnknownId(f"no session {session_id!r}", "list sessions with `gitguard session list`")


def resolve(store: Store, explicit: str | None) -> Session:
    """--session, else GITGUARD_SESSION, else the open session, else a new one. Under lock."""
    wanted = explicit or os.environ.get("GITGUARD_SESSION") or None
    if wanted:
        return start(store, wanted)
    return open_session(store) or start(store)


def _check_id(session_id: str) -> None:
    # The id becomes a ref name: keep it to characters git accepts everywhere.
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
    if (not session_id or not set(session_id) <= allowed or session_id.startswith(".")
            or ".." in session_id or session_id.endswith(".lock")):
        raise GitguardError(f"{session_id!r} is not a valid session id",
                            "use letters, digits, '_', '-' and '.'")
