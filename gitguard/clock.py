"""Timestamps and ids. One place, so tests can pin the clock with GITGUARD_NOW."""

from __future__ import annotations

import os
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
    # os.urandom is what secrets.token_hex reads; importing secrets (hmac, random) loads
    # OpenSSL's libcrypto in every fresh process that imports this module.
    return f"sess_{moment.strftime('%Y%m%d_%H%M%S')}_{os.urandom(2).hex()}"
