"""Agent sessions of one worktree: started and ended events in sessions.jsonl."""

from __future__ import annotations

import os

from gitguard import clock, durable
from gitguard.errors import GitguardError, UnknownId
from gitguard.models import Session
from gitguard.store import Store


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


def start(store: Store, session_id: str | None = None, agent: str | None = None) -> Session:
    """Under the store lock."""
    session_id = session_id or clock.session_id()
    _check_id(session_id)
    for existing in read(store):
        if existing.session_id == session_id:
            if existing.ended_at is None:
                return existing
            raise GitguardError(f"session {session_id} has ended",
                                "start a new session with another id")
    session = Session(session_id=session_id, started_at=clock.stamp(), agent=agent)
    durable.append_jsonl(store.sessions_path, [session.to_json()])
    return session


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
