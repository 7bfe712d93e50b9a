"""Shared fixtures: real git repositories in temp dirs, isolated HOME, pinned author and dates."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.commands import git
from tests.helpers.gitstate import GitState, capture

PINNED_ENV = {
    "GIT_AUTHOR_NAME": "Test User",
    "GIT_AUTHOR_EMAIL": "user@example.com",
    "GIT_COMMITTER_NAME": "Test User",
    "GIT_COMMITTER_EMAIL": "user@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
}


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory,
                 monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    for key, value in PINNED_ENV.items():
        monkeypatch.setenv(key, value)
    # No test gets a watcher daemon by accident (`gitguard init` starts one otherwise);
    # daemon tests start theirs explicitly and stop it in a fixture.
    monkeypatch.setenv("GITGUARD_NO_DAEMON", "1")
    # Hook commands start Python unless the run asks for the package's native client
    # (`GITGUARD_NATIVE=1 make test`); tests/ipc/test_native_client.py tests it either way.
    monkeypatch.setenv("GITGUARD_NATIVE", os.environ.get("GITGUARD_NATIVE", "0"))
    for key in ("GITGUARD_SESSION", "GITGUARD_FAULT", "GITGUARD_NOW", "GIT_DIR", "GIT_INDEX_FILE",
                "GIT_WORK_TREE"):
        monkeypatch.delenv(key, raising=False)
    # Neither git nor gitguard climbs out of the test's directories into a shared one: a
    # stray `.agent-runtime` store left in /tmp made plain-directory tests find it.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", os.pathsep.join(
        str(Path(p).resolve()) for p in {tempfile.gettempdir(), "/dev/shm"}))
    (home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n[gc]\n\tauto = 0\n")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with one commit on main, a tag, a stash, and an ignored file."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q")
    (path / "README.md").write_text("# project\n")
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text("def main():\n    return 1\n")
    (path / ".gitignore").write_text("build/\n*.log\n.env\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "initial")
    git(path, "tag", "v1")
    (path / "README.md").write_text("# project\nstashed line\n")
    git(path, "stash", "-q")
    (path / ".env").write_text("SECRET=1\n")
    (path / "build").mkdir()
    (path / "build" / "out.bin").write_bytes(b"\x00\x01build")
    return path


@pytest.fixture
def state_of(repo: Path) -> Iterator[GitState]:
    """The user's git state before the test; the test compares against it."""
    yield capture(repo)
