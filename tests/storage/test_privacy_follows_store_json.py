"""Privacy reads store.json again only when it changed: what it answers equals a fresh
read after every kind of write (gitguard's atomic replace, an in-place edit of the same
size, a removal)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from gitguard.api import Guard
from gitguard.storage import durable
from gitguard.storage.privacy import Privacy


def test_the_remembered_store_json_follows_every_change(repo: Path) -> None:
    store = Guard.open(repo).store
    store.create()
    privacy = Privacy(store)
    path = store.meta_path

    def fresh() -> dict[str, object]:
        value = Privacy(store)._meta()
        assert privacy._meta() == value
        return value

    assert fresh().get("encryption") is None and privacy.recorded_key_id() is None
    meta = json.loads(path.read_bytes())
    meta["encryption"] = {"keyId": "k1", "algorithm": "x", "envelope": 1}
    durable.atomic_write(path, durable.canonical_json(meta) + b"\n")
    assert privacy.recorded_key_id() == "k1"
    fresh()
    before = path.stat()
    path.write_bytes(path.read_bytes().replace(b'"k1"', b'"k2"'))      # in place, same size
    assert path.stat().st_ino == before.st_ino and path.stat().st_size == before.st_size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1))
    assert privacy.recorded_key_id() == "k2"
    fresh()
    path.unlink()
    assert privacy._meta() == {} and privacy.recorded_key_id() is None
