"""What the store keeps private: redaction before anything is stored, sealing at rest.

Redaction applies to what an agent *says*: message blobs, run state, tool input and
result artifacts, ledger summaries. It never touches snapshot trees or patches, which
must restore the workspace byte for byte. Sealing (AES-GCM, `gitguard.storage.sealing`)
applies to run state, message blobs and every artifact when encryption is on: turned on
by `[encryption] enabled = true` (or GITGUARD_ENCRYPT=1), and from then on by the key id
recorded in store.json, so a store once encrypted never silently writes plaintext.
"""

from __future__ import annotations

import base64
import binascii
import json
from functools import cached_property
from typing import TYPE_CHECKING, Any

from gitguard.errors import KeyProblem, StoreError
from gitguard.settings import Settings, load
from gitguard.storage import durable, sealing

if TYPE_CHECKING:
    from gitguard.storage.redact import Redactor
    from gitguard.storage.store import Store

SEALED_STATE = "$sealed"


class Privacy:
    def __init__(self, store: Store, settings: Settings | None = None) -> None:
        self.store = store
        self._settings = settings
        self._meta_read: tuple[tuple[int, int, int, int], bytes] | None = None

    @cached_property
    def settings(self) -> Settings:
        return self._settings or load(self.store.ws.root)

    # redaction ------------------------------------------------------------------------
    @cached_property
    def redactor(self) -> Redactor:
        from gitguard.storage.redact import Redactor

        try:
            return Redactor(self.settings.redact_patterns)
        except ValueError as exc:
            raise StoreError(str(exc), "fix [redact] patterns in .gitguard.toml") from None

    def redact_text(self, text: str) -> str:
        return self.redactor.redact(text).text

    def redact_bytes(self, data: bytes) -> bytes:
        return self.redactor.redact_bytes(data)[0]

    def redact_json(self, value: Any) -> Any:
        """Every string inside, then the JSON text as a whole (for `"password": "..."`).

        The whole-text pass sees keys next to values; if its replacement ever broke the
        JSON, the string-by-string result stands.
        """
        leaves = self._redact_leaves(value)
        text = durable.canonical_json(leaves).decode()
        found = self.redactor.redact(text)
        if not found.count:
            return leaves
        try:
            return json.loads(found.text)
        except ValueError:
            return leaves

    def _redact_leaves(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, list):
            return [self._redact_leaves(v) for v in value]
        if isinstance(value, dict):
            return {k: self._redact_leaves(v) for k, v in value.items()}
        return value

    # sealing --------------------------------------------------------------------------
    def _meta(self) -> dict[str, Any]:
        # Asked ~3 times per tool call (each seal): read again only when store.json is
        # another file or was written since (atomic_write: a new inode).
        seen = durable.stat_key(self.store.meta_path)
        if seen is None:
            return {}
        if self._meta_read is not None and self._meta_read[0] == seen:
            raw = self._meta_read[1]
        else:
            try:
                raw = self.store.meta_path.read_bytes()
            except FileNotFoundError:
                return {}
            self._meta_read = (seen, raw)
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise StoreError(f"{self.store.meta_path} is not valid JSON",
                             "run `gitguard verify`") from exc
        return value if isinstance(value, dict) else {}

    def recorded_key_id(self) -> str | None:
        found = self._meta().get("encryption", {})
        key_id = found.get("keyId") if isinstance(found, dict) else None
        return key_id if isinstance(key_id, str) else None

    @property
    def encrypted(self) -> bool:
        return self.settings.encryption or self.recorded_key_id() is not None

    @cached_property
    def key(self) -> sealing.Key:
        key = sealing.load_key(self.settings.keyring_user)
        recorded = self.recorded_key_id()
        if recorded is not None and recorded != key.key_id:
            raise KeyProblem(
                f"the key given is not this store's key (store key id {recorded}, "
                f"given key id {key.key_id})", sealing.KEY_HINT)
        return key

    def _record_key(self, key: sealing.Key) -> None:
        """Name the key in store.json the first time something is sealed. Under the lock."""
        meta = self._meta()
        if meta.get("encryption", {}).get("keyId") == key.key_id:
            return
        meta["encryption"] = {"keyId": key.key_id, "algorithm": sealing.ALGORITHM,
                              "envelope": 1}
        durable.atomic_write(self.store.meta_path, durable.canonical_json(meta) + b"\n")

    def seal(self, data: bytes, label: str, deterministic: bool = False) -> bytes:
        if not self.encrypted:
            return data
        key = self.key
        if self.recorded_key_id() is None:
            self._record_key(key)
        return key.seal(data, label, deterministic)

    def open(self, data: bytes, label: str) -> bytes:
        """Plaintext from before encryption was turned on reads as it is."""
        if not sealing.is_sealed(data):
            return data
        return self.key.open(data, label)

    def seal_state(self, state: dict[str, Any] | None) -> dict[str, Any] | None:
        if state is None or not self.encrypted:
            return state
        sealed = self.seal(durable.canonical_json(state), "state")
        return {SEALED_STATE: base64.b64encode(sealed).decode()}

    def open_state(self, state: dict[str, Any] | None) -> dict[str, Any] | None:
        if state is None or set(state) != {SEALED_STATE}:
            return state
        try:
            data = base64.b64decode(str(state[SEALED_STATE]), validate=True)
        except (binascii.Error, ValueError):
            raise StoreError("a sealed run state is damaged", "run `gitguard verify`") from None
        value = json.loads(self.open(data, "state"))
        return value if isinstance(value, dict) else None
