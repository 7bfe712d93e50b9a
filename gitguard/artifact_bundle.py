"""Artifact bundles: `gitguard gc` moves the artifacts ledger entries name into one
compressed file, so a thousand calls leave one file instead of three thousand.

A bundle is artifacts/bundle-<sha12>.z: a JSON header line (format, the sha256 of the
uncompressed body, and each artifact's name -> [offset, length] in it), then the body
zlib-compressed. The body holds each artifact's stored bytes unchanged: a sealed one
stays sealed (its associated data is its name, which the bundle keeps), so bundling
needs no key and reading one back is `Store.read_artifact` as before.

Refs do not change: `artifacts/NAME` resolves to the file when it exists, else to the
bundle that holds NAME. gc writes the new bundle (fsynced) before it deletes a file or
an older bundle, so a crash leaves every artifact in at least one place.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gitguard import durable, faults
from gitguard.errors import CorruptRecord

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
    entries: dict[str, tuple[int, int]]
    sha256: str
    body_at: int              # where the compressed body starts in the file
    _body: bytes | None = None

    def read(self, name: str) -> bytes:
        if self._body is None:
            raw = self.path.read_bytes()
            try:
                body = zlib.decompress(raw[self.body_at:])
            except zlib.error as exc:
                raise CorruptRecord(f"artifact bundle {self.path.name} cannot be read",
                                    "run `gitguard verify`") from exc
            if hashlib.sha256(body).hexdigest() != self.sha256:
                raise CorruptRecord(f"artifact bundle {self.path.name} is corrupt: sha256 "
                                    "mismatch", "run `gitguard verify`")
            self._body = body
        offset, length = self.entries[name]
        return self._body[offset:offset + length]


def open_bundle(path: Path) -> Bundle:
    """The bundle's header (its body is read on first use)."""
    with open(path, "rb") as fh:
        head = fh.readline()
    try:
        header = json.loads(head)
        entries = {str(k): (int(v[0]), int(v[1])) for k, v in header["entries"].items()}
        if header.get("format") != FORMAT:
            raise ValueError(header.get("format"))
        return Bundle(path, entries, str(header["sha256"]), len(head))
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise CorruptRecord(f"artifact bundle {path.name} has no valid header",
                            "run `gitguard verify`") from exc


class Bundles:
    """The bundles of one artifacts directory, their headers read once."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._open: dict[Path, tuple[int, Bundle]] = {}

    def find(self, name: str) -> Bundle | None:
        for path in bundles(self.directory):
            try:
                mtime = path.stat().st_mtime_ns
            except FileNotFoundError:
                continue          # gc just replaced it: the newer one holds the same
            cached = self._open.get(path)
            if cached is None or cached[0] != mtime:
                cached = (mtime, open_bundle(path))
                self._open[path] = cached
            if name in cached[1].entries:
                return cached[1]
        return None


def rebundle(directory: Path, wanted: Iterable[str], files: Iterable[str]) -> list[str]:
    """Under the store lock: one new bundle holding the loose `files` and what the old
    bundles hold of `wanted`; then the files and the old bundles go. Returns the names
    of the artifacts now in the bundle."""
    keep = set(wanted)
    old = [open_bundle(p) for p in bundles(directory)]
    stored: dict[str, bytes] = {}
    for bundle in old:
        for name in bundle.entries:
            if name in keep and name not in stored:
                stored[name] = bundle.read(name)
    loose = sorted(set(files))
    for name in loose:
        stored[name] = (directory / name).read_bytes()
    if not loose and len(old) <= 1 and set(stored) == {n for b in old for n in b.entries}:
        return sorted(stored)          # nothing to move, nothing to drop
    if not stored:
        for bundle in old:
            bundle.path.unlink(missing_ok=True)
        return []
    body, entries = _body(stored)
    digest = hashlib.sha256(body).hexdigest()
    header = durable.canonical_json({"format": FORMAT, "version": 1, "sha256": digest,
                                     "entries": entries})
    target = directory / f"{PREFIX}{digest[:12]}{SUFFIX}"
    durable.atomic_write(target, header + b"\n" + zlib.compress(body, 9))
    faults.point("gc.after_artifact_bundle")
    for name in loose:
        (directory / name).unlink(missing_ok=True)
    for bundle in old:
        if bundle.path != target:
            bundle.path.unlink(missing_ok=True)
    durable.fsync_dir(directory)
    return sorted(stored)


def _body(stored: Mapping[str, bytes]) -> tuple[bytes, dict[str, list[int]]]:
    parts, entries, offset = [], {}, 0
    for name in sorted(stored):
        data = stored[name]
        entries[name] = [offset, len(data)]
        parts.append(data)
        offset += len(data)
    return b"".join(parts), entries
