"""Artifact bundles: `gitguard gc` moves the artifacts ledger entries name into one
compressed file, so a thousand calls leave one file instead of three thousand.

A bundle is artifacts/bundle-<sha12>.z: a JSON header line (format, codec, the sha256 of
what follows once uncompressed), then one xz stream: an index line (the names, and each
one's length), then the artifacts' stored bytes end to end, in the index's order. xz,
not zlib: ~25% smaller on the ledger's patches, and a whole bundle of a thousand calls
still decompresses in ~15 ms. The bytes are each artifact's stored bytes unchanged: a sealed one
stays sealed (its associated data is its name, which the bundle keeps), so bundling
needs no key and reading one back is `Store.read_artifact` as before.

Refs do not change: `artifacts/NAME` resolves to the file when it exists, else to the
bundle that holds NAME. gc writes the new bundle (fsynced) before it deletes a file or
an older bundle, so a crash leaves every artifact in at least one place.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gitguard import faults
from gitguard.errors import CorruptRecord
from gitguard.storage import durable

FORMAT = "gitguard-artifact-bundle"
PREFIX, SUFFIX = "bundle-", ".z"


def is_bundle(name: str) -> bool:
    return name.startswith(PREFIX) and name.endswith(SUFFIX)


def bundles(directory: Path) -> list[Path]:
    try:
        return sorted(directory / n for n in os.listdir(directory) if is_bundle(n))
    except FileNotFoundError:
        return []


@dataclass
class Bundle:
    path: Path
    entries: dict[str, tuple[int, int]]     # name -> (offset, length) in `body`
    body: bytes

    def read(self, name: str) -> bytes:
        offset, length = self.entries[name]
        return self.body[offset:offset + length]


def open_bundle(path: Path) -> Bundle:
    """The whole bundle, checked against its sha256 (CorruptRecord when it does not match)."""
    raw = path.read_bytes()
    head, _, packed = raw.partition(b"\n")
    try:
        header = json.loads(head)
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise ValueError("not a bundle")
        data = lzma.decompress(packed)
    except (ValueError, lzma.LZMAError) as exc:
        raise CorruptRecord(f"artifact bundle {path.name} cannot be read",
                            "run `gitguard verify`") from exc
    if hashlib.sha256(data).hexdigest() != header.get("sha256"):
        raise CorruptRecord(f"artifact bundle {path.name} is corrupt: sha256 mismatch",
                            "run `gitguard verify`")
    line, _, body = data.partition(b"\n")
    index = json.loads(line)
    entries, offset = {}, 0
    for name, length in zip(index["names"], index["lengths"], strict=True):
        entries[str(name)] = (offset, int(length))
        offset += int(length)
    return Bundle(path, entries, body)


class Bundles:
    """The bundles of one artifacts directory, each read once (again when it changes)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._open: dict[Path, tuple[int, Bundle]] = {}

    def find(self, name: str) -> Bundle | None:
        for path in bundles(self.directory):
            try:
                mtime = path.stat().st_mtime_ns
                cached = self._open.get(path)
                if cached is None or cached[0] != mtime:
                    cached = (mtime, open_bundle(path))
                    self._open[path] = cached
            except FileNotFoundError:
                continue          # gc just replaced it: the newer one holds the same
            if name in cached[1].entries:
                return cached[1]
        return None


def rebundle(directory: Path, wanted: Iterable[str], files: Iterable[str],
             journaled: dict[str, bytes] | None = None,
             journals: Iterable[Path] = ()) -> list[str]:
    """Under the store lock: one new bundle holding the loose `files`, the `journaled`
    artifacts (read from the artifact `journals`) and what the old bundles hold of
    `wanted`; then the files, the journals and the old bundles go. Returns the names
    of the artifacts now in the bundle."""
    keep = set(wanted)
    drained = list(journals)
    old = [open_bundle(p) for p in bundles(directory)]
    stored: dict[str, bytes] = {}
    for bundle in old:
        for name in bundle.entries:
            if name in keep and name not in stored:
                stored[name] = bundle.read(name)
    stored.update(journaled or {})
    loose = sorted(set(files))
    for name in loose:
        stored[name] = (directory / name).read_bytes()
    if (not loose and not drained and len(old) <= 1
            and set(stored) == {n for b in old for n in b.entries}):
        return sorted(stored)          # nothing to move, nothing to drop
    if not stored:
        for path in [*drained, *(b.path for b in old)]:
            path.unlink(missing_ok=True)
        return []
    names = sorted(stored)
    index = durable.canonical_json({"names": names, "lengths": [len(stored[n]) for n in names]})
    data = index + b"\n" + b"".join(stored[n] for n in names)
    digest = hashlib.sha256(data).hexdigest()
    header = durable.canonical_json({"format": FORMAT, "version": 1, "codec": "xz",
                                     "sha256": digest})
    target = directory / f"{PREFIX}{digest[:12]}{SUFFIX}"
    durable.atomic_write(target, header + b"\n" + lzma.compress(data, preset=6))
    faults.point("gc.after_artifact_bundle")
    for name in loose:
        (directory / name).unlink(missing_ok=True)
    for path in drained:
        path.unlink(missing_ok=True)
    for bundle in old:
        if bundle.path != target:
            bundle.path.unlink(missing_ok=True)
    durable.fsync_dir(directory)
    return sorted(stored)
