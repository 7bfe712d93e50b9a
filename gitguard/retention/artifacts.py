"""What `gitguard gc` does with artifacts: which ones store records name, which are crash
leftovers to remove, and moving the ledger's (files and the calls' journals,
gitguard.storage.artifact_journal) into one bundle (gitguard.storage.artifact_bundle)."""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from gitguard.ledger import segment
from gitguard.models import ToolLedgerEntry
from gitguard.storage import artifact_bundle, artifact_journal, durable
from gitguard.storage.store import Store

if TYPE_CHECKING:
    from gitguard.retention import policy

ARTIFACT_GRACE = timedelta(minutes=10)   # never race a writer that has not indexed yet
_ARTIFACT_REF = re.compile(rb'artifacts/((?:[^"\\]|\\.)+)"')


def named(store: Store, files: dict[str, dict[str, Any]], plan: policy.Plan) -> set[str]:
    """Every artifact name a store record names.

    A reference is any JSON string starting with "artifacts/" in the ledger (its
    segment too), the conflicts, the kept checkpoints, or any other JSON file of the store.
    """
    sources = [p for p in store.root.iterdir() if p.suffix in (".json", ".jsonl")]
    blob = b"\n".join(p.read_bytes() for p in sources if p.is_file())
    blob += b"\n" + segment.read_segment(store.ledger_path).data   # gc's older lines
    blob += json.dumps([f for i, f in files.items() if plan.kept(i)]).encode()
    found = set()
    for match in _ARTIFACT_REF.finditer(blob):
        try:
            text = json.loads(b'"' + match.group(1) + b'"')
        except ValueError:  # not JSON after all: take the bytes as they are
            text = match.group(1).decode(errors="surrogateescape")
        found.update({text, text.split()[0] if text.split() else text})
    return found


def unreferenced(store: Store, names: set[str]) -> list[str]:
    """Artifact files no store record names (crash leftovers), older than the grace
    period. Bundles are gc's own and are rewritten by `bundle`."""
    if not store.artifacts_dir.is_dir():
        return []
    limit = time.time() - ARTIFACT_GRACE.total_seconds()
    return sorted(p.name for p in store.artifacts_dir.iterdir()
                  if p.is_file() and p.name not in names and p.stat().st_mtime < limit
                  and not artifact_bundle.is_bundle(p.name)
                  and not artifact_journal.is_journal(p.name))


def ledger_named(entries: list[ToolLedgerEntry]) -> set[str]:
    """The artifacts ledger entries name in their ref fields: only gitguard reads those,
    through Store.read_artifact, so they may live in a bundle. (Others, such as `run`'s
    stdout copies a result text points a person at, stay files.)"""
    refs = [r for e in entries
            for r in (e.input_ref, e.result_ref, *(p.patch_ref for p in e.file_patches)) if r]
    return {r.removeprefix("artifacts/") for r in refs if r.startswith("artifacts/")}


def bundle(store: Store, names: set[str], entries: list[ToolLedgerEntry],
           conflicts: list[dict[str, Any]]) -> int:
    """Move the ledger's loose artifacts into one compressed bundle; drop from the old
    bundles what nothing names any more. Returns how many artifacts the bundle holds."""
    if not store.artifacts_dir.is_dir():
        return 0
    # A conflict's patch stays a file: `gitguard conflicts` shows its path to a person.
    shown = {str(c.get("agentPatchRef", "")).removeprefix("artifacts/")
             for c in conflicts}
    movable = (ledger_named(entries) & names) - shown
    loose = [n for n in movable if (store.artifacts_dir / n).is_file()
             and not artifact_bundle.is_bundle(n)]
    # The calls' artifact journals go whole: what a record names moves into the bundle,
    # a conflict's patch into a file of its own; the rest is what a killed call appended
    # before its ledger record (gc holds the store lock: no call is halfway).
    journals = artifact_journal.journals(store.artifacts_dir)
    journaled = {name: data for path in journals
                 for name, data in artifact_journal.read(path).items()
                 if name in names and not (store.artifacts_dir / name).is_file()}
    for name in shown & set(journaled):
        durable.atomic_write(store.artifacts_dir / name, journaled.pop(name))
    return len(artifact_bundle.rebundle(store.artifacts_dir, names, loose, journaled,
                                        journals))
