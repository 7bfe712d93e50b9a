"""attribution.jsonl: who changed each path and how sure we are, one checksummed line each.

The rollback engine reads these records: any record after a checkpoint's
`createdAt` for a path owned by the user, or `ambiguous` or `unknown`, makes that
path a conflict instead of something to overwrite.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from gitguard import clock
from gitguard.calls.attribution import Recorded, Verdict
from gitguard.models import Attribution
from gitguard.storage import durable
from gitguard.storage.store import Store


def stamp(at: float) -> str:
    """The ISO time of an event; a pinned clock (tests) pins these too."""
    if os.environ.get("GITGUARD_NOW"):
        return clock.stamp()
    return clock.stamp(datetime.fromtimestamp(at, UTC))


def append(store: Store, verdicts: Iterable[Verdict], sync: bool = True) -> list[Attribution]:
    """Append the records; `sync=False` leaves the fsync to `fsync` (the daemon batches it
    at idle: another process reads the rows at once, a power cut may lose the newest)."""
    records = [Attribution(path=v.path, owner=v.owner, confidence=v.confidence, at=stamp(v.at))
               for v in verdicts]
    if not records:
        return records
    # Only the lock and this journal's own repair: the rest of the store is not touched.
    with store.lock.held():
        # The tail is read only when something else grew the file since our last append.
        store.repair_alone(store.attribution_path)
        # The append that creates the file is synced (with its directory): `fsync` then
        # has only the file's data to flush.
        sync = sync or not store.attribution_path.exists()
        durable.append_jsonl(store.attribution_path, [r.to_json() for r in records], sync=sync)
        store.appended(store.attribution_path)
    return records


def fsync(store: Store) -> None:
    """Make the rows appended with `sync=False` durable."""
    try:
        fd = os.open(store.attribution_path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        durable.fsync(fd)
    finally:
        os.close(fd)


def read(store: Store) -> list[Attribution]:
    return [Attribution.model_validate(r)
            for r in durable.read_jsonl(store.attribution_path).records]


def latest(store: Store) -> dict[str, Recorded]:
    """The newest record of each path."""
    newest: dict[str, Recorded] = {}
    for record in durable.read_jsonl(store.attribution_path).records:
        newest[record["path"]] = _recorded(record)
    return newest


def _recorded(record: dict[str, Any]) -> Recorded:
    return Recorded(record["owner"], Attribution.model_validate(record).confidence, record["at"])
