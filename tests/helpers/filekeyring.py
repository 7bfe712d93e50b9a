"""A real keyring backend that keeps entries in a JSON file under $HOME (for tests).

Selected with PYTHON_KEYRING_BACKEND=tests.helpers.filekeyring.FileKeyring (the repository
on PYTHONPATH); keyring loads it as it loads any third-party backend.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from keyring.backend import KeyringBackend


class FileKeyring(KeyringBackend):
    priority = 1  # type: ignore[assignment]

    @property
    def _path(self) -> Path:
        return Path(os.environ["HOME"]) / "test-keyring.json"

    def _load(self) -> dict[str, str]:
        try:
            data = json.loads(self._path.read_text())
        except FileNotFoundError:
            return {}
        return {str(k): str(v) for k, v in data.items()}

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        entries = self._load()
        entries[f"{service}/{username}"] = password
        self._path.write_text(json.dumps(entries))
        self._path.chmod(0o600)

    def delete_password(self, service: str, username: str) -> None:
        entries = self._load()
        entries.pop(f"{service}/{username}", None)
        self._path.write_text(json.dumps(entries))
