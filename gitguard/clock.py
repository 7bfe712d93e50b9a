"""Timestamps and ids. One place, so tests can pin the clock with GITGUARD_NOW."""

from __future__ import annotations

import os
import secrets
from datetime import UTC, datetime


def now() -> datetime:
    pinned = os.environ.get("GITGUARD_NOW")
    if pinned:
        return datetime.fromisoformat(pinned.replace("Z", "+00:00"))
    return datetime.now(UTC)


def stamp(moment: datetime | None = None) -> str:
    moment = moment or now()
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def day(moment: datetime | None = None) -> str:
    return (moment or now()).astimezone(UTC).strftime("%Y%m%d")


def session_id() -> str:
    moment = now().astimezone(UTC)
    return f"sess_{moment.strftime('%Y%m%d_%H%M%S')}_{secrets.token_hex(2)}"
