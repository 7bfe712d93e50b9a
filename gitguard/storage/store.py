"""The store: where every gitguard file lives, and the lock that serializes writers."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from gitguard import clock
from gitguard.errors import CorruptRecord, StoreError
from gitguard.storage import durable
from gitguard.workspace import Workspace, ensure_object_store

if TYPE_CHECKING:
    from gitguard.settings import Settings
    from gitguard.storage.artifact_bundle import Bundles
    from gitguard.storage.artifact_journal import Journals
    from gitguard.storage.privacy import Privacy

STORE_SCHEMA = 1


class Store:
    def __init__(self, ws: Workspace, settings: Settings | None = None) -> None:
        self.ws = ws
        self.settings = settings
        self.root = ws.store_dir
        self.ledger_path = self.root / "ledger.jsonl"
        self.trace_path = self.root / "trace.jsonl"
        self.trace_segment_path = self.root / "trace.segment"   # gc's compacted events
        self.sessions_path = self.root / "sessions.jsonl"
        self.checkpoints_dir = self.root / "checkpoints"
        self.index_path = self.checkpoints_dir / "index.jsonl"
        self.pruned_path = self.checkpoints_dir / "pruned.jsonl"
        self.artifacts_dir = self.root / "artifacts"
        self.conflicts_path = self.root / "conflicts.json"
        self.stat_index = self.root / "stat.index"
        self.meta_path = self.root / "store.json"
        self.baselines_path = self.root / "baselines.jsonl"     # what the git hooks record
        # Not among `journals` (repaired under every lock): it grows with every changed
        # path, so its writer repairs it alone (attribution_log.append).
        self.attribution_path = self.root / "attribution.jsonl"
        self.lock = durable.StoreLock(self.root / "lock")
        # False for a long-lived process (the daemon): a store deleted under it (its
        # worktree removed) must stay deleted, not come back at the next write.
        self.create_missing = True
        # Journals seen ending on a whole line, with the stat that saw them (see `writing`).
        self._clean: dict[Path, tuple[int, int, int, int]] = {}

    @property
    def journals(self) -> tuple[Path, ...]:
        return (self.ledger_path, self.trace_path, self.sessions_path, self.index_path,
                self.pruned_path, self.baselines_path)

    def exists(self) -> bool:
        return self.meta_path.exists()

    def create(self) -> bool:
        """Create the store if missing. Returns True when it was created now."""
        if self.exists():
            return False
        if not self.create_missing:
            raise StoreError(f"the gitguard store {self.root} is gone",
                             "`gitguard init` makes a new one")
        try:
            for directory in (self.root, self.checkpoints_dir, self.artifacts_dir):
                durable.ensure_dir(directory)
            ensure_object_store(self.ws)
            if not self.ws.is_git:
                # the private object store holds the workspace's content: owner only
                os.chmod(self.ws.git_dir, durable.DIR_MODE)
            meta = {"schemaVersion": STORE_SCHEMA, "createdAt": clock.stamp(),
                    "workspace": str(self.ws.root), "git": self.ws.is_git}
            durable.atomic_write(self.meta_path, durable.canonical_json(meta) + b"\n")
        except PermissionError as exc:
            raise StoreError(f"cannot create the gitguard store at {self.root}: permission denied",
                             "make the directory writable, or run gitguard as its owner") from exc
        return True

    def check_readable(self) -> None:
        if self.root.exists() and not os.access(self.root, os.R_OK | os.X_OK):
            raise StoreError(f"the gitguard store {self.root} is not readable",
                             "fix its permissions (gitguard keeps it 0700, owned by you)")

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the store lock; on entry repair any append a crash left torn."""
        self.check_readable()
        self.create()
        if not os.access(self.root, os.W_OK):
            raise StoreError(f"the gitguard store {self.root} is not writable",
                             "fix its permissions; nothing was changed")
        with self.lock.held():
            for journal in self.journals:
                self._repair(journal)
            yield
            # The block ended normally: every append it made was whole (append_jsonl writes
            # all of a record or cuts the file back and raises; a torn one needs a crash,
            # which ends this process and its memory), and nobody else appends under our
            # lock. So the next entry need not open and read the tails this block grew
            # (the ledger, the index and the trace, at every call begin and end).
            for journal in self.journals:
                key = durable.stat_key(journal)
                if key is not None:
                    self._clean[journal] = key

    def repair_alone(self, journal: Path) -> None:
        """`_repair` of a journal outside `journals` (attribution.jsonl), under the lock."""
        self._repair(journal)

    def appended(self, journal: Path) -> None:
        """We just appended whole lines to `journal` under the lock: the next `_repair`
        need not read its tail."""
        key = durable.stat_key(journal)
        if key is not None:
            self._clean[journal] = key

    def _repair(self, journal: Path) -> None:
        """repair_torn_tail, less the open and read of a journal nobody touched since this
        Store last found it whole (the daemon's Store takes the lock twice per tool call,
        and half the journals never change then). An append, a torn one included, grows
        the file; gc's rewrite is another inode: either sends it to the repair again."""
        before = durable.stat_key(journal)
        if before is None:
            self._clean.pop(journal, None)
            return                          # nothing to repair (repair_torn_tail agrees)
        if self._clean.get(journal) == before:
            return
        durable.repair_torn_tail(journal)
        after = durable.stat_key(journal)
        if after is not None:
            self._clean[journal] = after

    def size_bytes(self) -> int:
        """Bytes of every file in the store (objects.git included outside git)."""
        total = 0
        for directory, _dirs, files in os.walk(self.root):
            for name in files:
                try:
                    total += os.lstat(os.path.join(directory, name)).st_size
                except OSError:
                    continue
        return total

    def artifact(self, name: str) -> Path:
        return self.artifacts_dir / name

    @cached_property
    def privacy(self) -> Privacy:
        """Redaction and encryption at rest (see gitguard.storage.privacy)."""
        from gitguard.storage.privacy import Privacy

        return Privacy(self, self.settings)

    def write_artifact(self, name: str, data: bytes, sync_dir: bool = True) -> str:
        """Sealed when encryption is on; redaction is the caller's choice (never patches).
        `sync_dir=False`: the caller runs `sync_artifacts` before a record names it."""
        durable.ensure_dir(self.artifacts_dir)
        durable.atomic_write(self.artifacts_dir / name, self.privacy.seal(data, f"artifact:{name}"),
                             sync_dir=sync_dir)
        return f"artifacts/{name}"

    def sync_artifacts(self) -> None:
        """The artifacts directory's entries durable: one fsync for several artifacts."""
        durable.fsync_dir(self.artifacts_dir)

    def append_artifacts(self, session_id: str, items: list[tuple[str, bytes]]) -> list[str]:
        """A call's artifacts appended to its session's journal, fsynced once
        (gitguard.storage.artifact_journal): no file each. Sealed as `write_artifact` seals."""
        refs, wait = self._append_artifacts(session_id, items, background=False)
        wait()
        return refs

    @contextmanager
    def appending_artifacts(self, session_id: str, items: list[tuple[str, bytes]]
                            ) -> Iterator[list[str]]:
        """append_artifacts whose fsync runs while the block runs (a call's checkpoint is
        written meanwhile: one fsync wait less per command); durable when the block ends,
        which must come before any record names them. Under the store lock."""
        refs, wait = self._append_artifacts(session_id, items, background=True)
        try:
            yield refs
        finally:
            wait()

    def _append_artifacts(self, session_id: str, items: list[tuple[str, bytes]], *,
                          background: bool) -> tuple[list[str], Callable[[], None]]:
        from gitguard.storage import artifact_journal

        durable.ensure_dir(self.artifacts_dir)
        journal = artifact_journal.path_for(self.artifacts_dir, session_id)
        self._repair(journal)
        wait = artifact_journal.append(
            journal, [(name, self.privacy.seal(data, f"artifact:{name}")) for name, data in items],
            background=background)
        self._journals.appended(journal, (name for name, _data in items))
        after = durable.stat_key(journal)   # ends on a whole line: ours
        if after is not None:
            self._clean[journal] = after
        return [f"artifacts/{name}" for name, _ in items], wait

    @cached_property
    def _journals(self) -> Journals:
        from gitguard.storage.artifact_journal import Journals

        return Journals(self.artifacts_dir)

    @cached_property
    def _bundles(self) -> Bundles:
        from gitguard.storage.artifact_bundle import Bundles

        return Bundles(self.artifacts_dir)

    def _artifact_name(self, ref: str) -> str:
        name = ref.removeprefix("artifacts/")
        if not name or "/" in name or name.startswith("."):
            raise StoreError(f"{ref!r} is not an artifact of this store", "run `gitguard verify`")
        return name

    def has_artifact(self, ref: str) -> bool:
        """`artifacts/NAME` resolves: its own file, a journal's line, or a bundle gc moved
        it into. A journal line of it that fails its checksum raises CorruptRecord."""
        name = self._artifact_name(ref)
        return ((self.artifacts_dir / name).is_file() or self._journaled(name) is not None
                or self._bundles.find(name) is not None)

    def _journaled(self, name: str) -> bytes | None:
        """A journal's line of `name`; when it is damaged, the bundle gc may have copied it
        into before it removes that journal, else the damage (CorruptRecord)."""
        try:
            return self._journals.find(name)
        except CorruptRecord:
            bundle = self._bundles.find(name)
            if bundle is None:
                raise
            return bundle.read(name)

    def _bundled(self, ref: str, name: str) -> bytes:
        bundle = self._bundles.find(name)
        if bundle is None:
            raise StoreError(f"the artifact {ref} is missing",
                             "run `gitguard verify`; `gitguard gc` never removes one in use")
        return bundle.read(name)

    def stored_artifact(self, ref: str) -> bytes:
        """The bytes of `artifacts/NAME` as stored (sealed when encryption is on)."""
        name = self._artifact_name(ref)
        try:
            return (self.artifacts_dir / name).read_bytes()
        except FileNotFoundError:
            pass
        # A call's journal (gitguard.storage.artifact_journal), else the bundle gc moved it into;
        # gc removes a file or a journal only after the bundle holding it is durable, so
        # looking in this order never misses it.
        journaled = self._journaled(name)
        return journaled if journaled is not None else self._bundled(ref, name)

    def read_artifact(self, ref: str) -> bytes:
        """The plaintext of `artifacts/NAME` (opened with the key when it was sealed)."""
        name = self._artifact_name(ref)
        return self.privacy.open(self.stored_artifact(ref), f"artifact:{name}")
