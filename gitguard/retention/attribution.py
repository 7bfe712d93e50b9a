"""What `gitguard gc` drops from attribution.jsonl: the rows nothing can read any more.

The rows have exactly two readers:

- rollback (timeline.foreign_touch): rolling back to checkpoint C, a path is a conflict
  when a row *after C's createdAt* says the user changed it, or that a change was of
  `ambiguous` or `unknown` origin. A call's own `exact`/`window` rows never make a
  conflict: the ledger's FilePatchEntries decide those paths.
- ownership (attribution_log.latest, `status`/`diff`): the newest row of each path.

Rollback targets only checkpoints gc keeps, and gc keeps every checkpoint an open
conflict or an unfinished call names (retention.choose). So a row can go when it is not
the newest of its path and either it is no later than the oldest kept checkpoint, or it
is a call's row of confidence other than ambiguous/unknown. What stays gives every
rollback the same conflicts and `latest` the same answer
(tests/retention/test_attribution_pruning.py).
Rows are kept verbatim, in order; a torn tail stays for attribution_log's repair.
"""

from __future__ import annotations

from datetime import datetime

from gitguard.storage import durable
from gitguard.storage.store import Store

USER = "user"                                  # attribution.USER (not imported: pygit2-free)
SUSPECT = frozenset({"ambiguous", "unknown"})


def _moment(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def compact(store: Store, kept_created: list[str]) -> int:
    """Drop the rows no kept checkpoint can need. Under the store lock (gc); returns how
    many rows went. `kept_created`: the createdAt of every checkpoint gc keeps."""
    raw = durable.read_bytes(store.attribution_path)
    if not raw:
        return 0
    end = raw.rfind(b"\n") + 1
    lines = raw[:end].split(b"\n")[:-1]
    records = durable.parse_jsonl(store.attribution_path, raw).records
    oldest = min((_moment(c) for c in kept_created), default=None)
    newest: dict[str, int] = {}
    for number, record in enumerate(records):
        newest[str(record.get("path"))] = number
    kept: list[bytes] = []
    for number, record in enumerate(records):
        if newest[str(record.get("path"))] == number:
            kept.append(lines[number])
            continue
        if oldest is None or _moment(str(record["at"])) <= oldest:
            continue            # before every rollback target: foreign_touch skips it
        if record.get("owner") == USER or record.get("confidence") in SUSPECT:
            kept.append(lines[number])
    if len(kept) == len(lines):
        return 0
    durable.atomic_write(store.attribution_path,
                         b"".join(line + b"\n" for line in kept) + raw[end:])
    return len(lines) - len(kept)
