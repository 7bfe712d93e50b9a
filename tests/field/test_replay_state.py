"""Replay identity = tool + input + the state it acts on: a second `git push` after new
commits is another push (allowed), the same push of the same commits is a replay
(refused), with and without the daemon; `npm publish` of an unchanged package is still a
replay, and a tool's `replayKey` in .gitguard.toml adds the state it names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitguard.ledger import journal
from gitguard.storage.store import Store
from gitguard.workspace import discover
from tests.helpers.commands import gg, git
from tests.helpers.daemons import daemon_if

REFUSED = 4


def _remote(repo: Path) -> Path:
    remote = repo.parent / "remote.git"
    git(repo.parent, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    return remote


def _commit(repo: Path, text: str) -> str:
    (repo / "README.md").write_text(text)
    git(repo, "commit", "-qam", text)
    return git(repo, "rev-parse", "HEAD").strip()


def _index_equals_walk(repo: Path) -> None:
    """The replay index (fast) and a walk of the ledger (slow) find the same calls."""
    state = journal.read(Store(discover(repo)))
    for entry in state.in_order():
        key = journal.run_key(entry)
        walked = [e.call_id for e in state.in_order() if journal.run_key(e) == key]
        assert [e.call_id for e in state.runs_of(key)] == walked


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
@pytest.mark.parametrize("argv", [["git", "push", "-q", "origin", "main"],
                                  ["git", "push", "-q"]], ids=["named", "upstream"])
def test_a_push_of_new_commits_is_not_a_replay(repo: Path, daemon: bool,
                                               argv: list[str]) -> None:
    remote = _remote(repo)
    git(repo, "push", "-q", "-u", "origin", "main")       # the user's own, unguarded
    gg(repo, "init", "--no-hooks", "--no-daemon")
    with daemon_if(repo, daemon):
        first = _commit(repo, "# project\nsecond\n")
        gg(repo, "run", "--", *argv)
        assert git(remote, "rev-parse", "main").strip() == first
        again = gg(repo, "run", "--", *argv, check=False)
        assert again.returncode == REFUSED, again.stdout + again.stderr
        assert "on the same state" in again.stderr
        second = _commit(repo, "# project\nthird\n")
        gg(repo, "run", "--", *argv)
        assert git(remote, "rev-parse", "main").strip() == second
    _index_equals_walk(repo)


def _publish(repo: Path) -> int:
    began = gg(repo, "call", "begin", "--tool", "Bash", "--input",
               json.dumps({"command": "npm publish"}), "--json", check=False)
    if began.returncode != 0:
        return began.returncode
    gg(repo, "call", "end", json.loads(began.stdout)["callId"], "--status", "succeeded")
    return 0


def test_npm_publish_of_an_unchanged_package_is_a_replay(repo: Path) -> None:
    (repo / "package.json").write_text('{"name": "p", "version": "1.0.0"}\n')
    gg(repo, "init", "--no-hooks", "--no-daemon")
    assert _publish(repo) == 0
    _commit(repo, "# project\nnew commit\n")
    assert _publish(repo) == REFUSED


def test_a_declared_replay_key_adds_the_state_it_names(repo: Path) -> None:
    (repo / "package.json").write_text('{"name": "p", "version": "1.0.0"}\n')
    (repo / ".gitguard.toml").write_text('[tools.Bash]\nreplayKey = ["file:package.json"]\n')
    gg(repo, "init", "--no-hooks", "--no-daemon")
    assert _publish(repo) == 0
    assert _publish(repo) == REFUSED              # the same package: a replay
    (repo / "package.json").write_text('{"name": "p", "version": "1.0.1"}\n')
    assert _publish(repo) == 0                    # another version: another publish
    assert _publish(repo) == REFUSED
    _index_equals_walk(repo)


def test_a_replay_key_item_gitguard_does_not_know_is_a_config_error(repo: Path) -> None:
    (repo / ".gitguard.toml").write_text('[tools.Bash]\nreplayKey = ["env:HOME"]\n')
    gg(repo, "init", "--no-hooks", "--no-daemon")
    began = gg(repo, "call", "begin", "--tool", "Bash", "--input",
               json.dumps({"command": "npm publish"}), check=False)
    assert began.returncode == 1
    assert "replayKey item 'env:HOME'" in began.stderr


def _write(repo: Path) -> tuple[int, str | None]:
    """A Write call of notes.md that must never repeat; (exit, replayOf)."""
    began = gg(repo, "call", "begin", "--tool", "Write", "--writes", "notes.md",
               "--replay", "never", "--input",
               json.dumps({"file_path": "notes.md", "content": "agent\n"}), "--json",
               check=False)
    if began.returncode != 0:
        return began.returncode, None
    entry = json.loads(began.stdout)
    (repo / "notes.md").write_text("agent\n")
    gg(repo, "call", "end", entry["callId"], "--status", "succeeded")
    return 0, entry.get("replayOf")


def test_a_write_on_another_base_is_another_write(repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    assert _write(repo) == (0, None)
    (repo / "notes.md").unlink()
    assert _write(repo)[0] == REFUSED                 # the same base (none): a replay
    (repo / "notes.md").write_text("the user's notes\n")
    assert _write(repo) == (0, None)                  # another base: another write
