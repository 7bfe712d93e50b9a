"""Crash logs: a new private file per crash, in the store or the user's private state
directory, never written through a symlink and never left empty."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gitguard import clock, error_boundary

NOW = "2026-03-01T10:00:00Z"


def boom() -> BaseException:
    try:
        raise RuntimeError("boom in a test")
    except RuntimeError as exc:
        return exc


@pytest.fixture
def no_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """cwd outside any workspace, the state directory under tmp_path, a pinned clock."""
    outside = tmp_path / "outside"
    outside.mkdir()
    monkeypatch.chdir(outside)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("GITGUARD_NOW", NOW)
    return tmp_path / "state" / "gitguard"


def test_without_a_store_the_log_goes_to_a_private_state_directory(no_store: Path) -> None:
    where = Path(error_boundary.crash_log(boom()))
    assert where.parent == no_store
    assert stat.S_IMODE(no_store.stat().st_mode) == 0o700
    assert stat.S_IMODE(where.stat().st_mode) == 0o600
    assert "boom in a test" in where.read_text()


def test_one_log_per_crash(no_store: Path) -> None:
    first, second = error_boundary.crash_log(boom()), error_boundary.crash_log(boom())
    assert first != second
    assert all(Path(p).stat().st_size > 0 for p in (first, second))


def test_a_planted_symlink_is_never_written_through(no_store: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    no_store.mkdir(parents=True, mode=0o700)
    base = f"crash-{clock.stamp().replace(':', '')}-{os.getpid()}"
    planted = [no_store / f"{base}.log", *(no_store / f"{base}-{n}.log" for n in range(1, 5))]
    # where gitguard used to write with no store: $TMPDIR/gitguard-crash-<pid>.log
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    planted.append(tmp / f"gitguard-crash-{os.getpid()}.log")
    for link in planted:
        link.symlink_to(victim)
    where = Path(error_boundary.crash_log(boom()))
    assert victim.read_bytes() == b"precious\n"
    assert all(link.is_symlink() for link in planted)
    assert where not in planted and not where.is_symlink()
    assert "boom in a test" in where.read_text()


def test_a_symlinked_state_directory_is_refused(no_store: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    no_store.parent.mkdir(parents=True)
    no_store.symlink_to(elsewhere)
    said = error_boundary.crash_log(boom())
    assert said.startswith("not written")
    assert list(elsewhere.iterdir()) == []


def test_in_a_workspace_the_log_goes_to_the_store(repo: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.helpers.commands import gg

    gg(repo, "init", "--no-hooks", "--no-daemon")
    monkeypatch.chdir(repo)
    where = Path(error_boundary.crash_log(boom()))
    assert where.parent == repo / ".git" / "gitguard"
    assert stat.S_IMODE(where.stat().st_mode) == 0o600 and where.stat().st_size > 0


def test_the_hook_error_log_follows_no_symlink_and_stays_private(
        no_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no store it was appended to $TMPDIR/gitguard-hook-errors.log (umask's mode,
    following a planted symlink); now the user's private state directory."""
    from gitguard.integrations import hooklog

    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    (tmp / "gitguard-hook-errors.log").symlink_to(victim)
    where = Path(hooklog.log_failure(None, "claude-code", boom()))
    assert where == no_store / "hook-errors.log"
    assert stat.S_IMODE(where.stat().st_mode) == 0o600 and "boom in a test" in where.read_text()
    where.unlink()
    where.symlink_to(victim)
    assert hooklog.log_failure(None, "claude-code", boom()).startswith("(nowhere")
    assert victim.read_bytes() == b"precious\n"
