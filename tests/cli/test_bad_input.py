"""Bad input: exit 1, an Error: line and a Hint:, no traceback, nothing else changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.commands import gg, git
from tests.helpers.gitstate import GitState


def store_files(repo: Path) -> dict[str, bytes]:
    root = repo / ".git" / "gitguard"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "lock"}


def assert_user_error(proc: object, message: str) -> None:
    assert proc.returncode == 1, proc.stderr  # type: ignore[attr-defined]
    err = proc.stderr  # type: ignore[attr-defined]
    assert err.startswith(f"Error: {message}"), err
    assert "\nHint: " in err and "Traceback" not in err


@pytest.fixture
def started(repo: Path) -> Path:
    gg(repo, "call", "begin", "--tool", "Write", "--input", "{}", "--writes", "a.txt")
    (repo / "a.txt").write_text("a")
    gg(repo, "call", "end", "call_1", "--status", "succeeded")
    return repo


def test_invalid_json_input(started: Path, state_of: GitState) -> None:
    before = store_files(started)
    proc = gg(started, "call", "begin", "--tool", "Bash", "--input", "{not json", check=False)
    assert_user_error(proc, "--input is not valid JSON")
    assert store_files(started) == before
    state_of.assert_unchanged(started)


def test_unknown_call_id(started: Path) -> None:
    before = store_files(started)
    proc = gg(started, "call", "end", "call_99", "--status", "succeeded", check=False)
    assert_user_error(proc, "no call 'call_99' in the ledger")
    assert store_files(started) == before


def test_ending_a_call_twice(started: Path) -> None:
    before = store_files(started)
    proc = gg(started, "call", "end", "call_1", "--status", "failed", check=False)
    assert_user_error(proc, "call call_1 is succeeded; it cannot become failed")
    assert store_files(started) == before


def test_a_corrupt_checkpoint_file(started: Path) -> None:
    ckpt = sorted((started / ".git" / "gitguard" / "checkpoints").glob("ckpt_*.json"))[0]
    ckpt.write_bytes(ckpt.read_bytes().replace(b'"pre"', b'"post"'))
    before = store_files(started)
    proc = gg(started, "verify", check=False)
    assert_user_error(proc, "the store has 1 problem(s)")
    assert "sha256 mismatch" in proc.stdout
    assert store_files(started) == before


def test_a_corrupt_ledger_line_is_reported(started: Path) -> None:
    ledger = started / ".git" / "gitguard" / "ledger.jsonl"
    lines = ledger.read_bytes().split(b"\n")
    lines[0] = lines[0].replace(b"Write", b"Wrote")
    ledger.write_bytes(b"\n".join(lines))
    before = store_files(started)
    proc = gg(started, "ledger", check=False)
    assert_user_error(proc, "ledger.jsonl line 1 (byte 0) is corrupt")
    proc = gg(started, "call", "begin", "--tool", "Read", "--input", "{}", check=False)
    assert_user_error(proc, "ledger.jsonl line 1 (byte 0) is corrupt")
    assert store_files(started) == before


def test_an_unusable_store(repo: Path) -> None:
    """A store path that is a file is unusable for any user, root included."""
    (repo / ".git" / "gitguard").write_text("not a directory")
    proc = gg(repo, "call", "begin", "--tool", "Read", "--input", "{}", check=False)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("Error: ") and "Traceback" not in proc.stderr


def test_usage_error_exits_2(repo: Path) -> None:
    proc = gg(repo, "call", "end", "call_1", check=False)
    assert proc.returncode == 2
    assert "Missing option '--status'" in proc.stderr


def test_a_path_outside_the_workspace_is_refused(repo: Path) -> None:
    proc = gg(repo, "call", "begin", "--tool", "Write", "--input", "{}", "--writes", "../x",
              check=False)
    assert_user_error(proc, "../x is outside the workspace")


@pytest.mark.parametrize("depth", [101, 900, 5000])
def test_a_deeply_nested_input_is_exit_1(started: Path, depth: int, state_of: GitState) -> None:
    """5,000 levels used to end in RecursionError (exit 3, a crash log); 900 passed the
    parser and failed deeper in."""
    before = store_files(started)
    deep = "[" * (depth - 1) + "]" * (depth - 1)
    proc = gg(started, "call", "begin", "--tool", "Bash", "--input", f'{{"a": {deep}}}',
              check=False)
    assert_user_error(proc, "--input nests deeper than 100 levels")
    assert store_files(started) == before
    state_of.assert_unchanged(started)


def test_a_deeply_nested_input_file_is_exit_1(started: Path, tmp_path: Path) -> None:
    before = store_files(started)
    deep = tmp_path / "deep.json"
    deep.write_text("{\"a\": " + "[" * 200_000 + "]" * 200_000 + "}")
    proc = gg(started, "call", "begin", "--tool", "Bash", "--input-file", str(deep),
              check=False)
    assert_user_error(proc, "--input nests deeper than 100 levels")
    assert store_files(started) == before


def test_the_api_refuses_a_deep_or_self_referencing_input(started: Path) -> None:
    from gitguard.api import Guard
    from gitguard.errors import GitguardError

    looped: dict[str, object] = {}
    looped["self"] = looped
    deep: list[object] = []
    for _ in range(150):
        deep = [deep]
    before = store_files(started)
    with Guard.open(str(started)) as guard:
        for bad in (looped, {"a": deep}):
            with pytest.raises(GitguardError, match="nests deeper than 100"):
                guard.begin_call("Bash", bad)
    assert store_files(started) == before


def test_the_api_refuses_an_input_that_is_not_json(started: Path) -> None:
    """Bytes, sets or objects in a Python caller's input were a TypeError from deep in
    the hashing (an internal error); now a GitguardError, with nothing written."""
    from gitguard.api import Guard
    from gitguard.errors import GitguardError

    before = store_files(started)
    with Guard.open(str(started)) as guard:
        for bad in ({"a": b"bytes"}, {"a": {1, 2}}, {"a": object()}):
            with pytest.raises(GitguardError, match="the call's input is not JSON"):
                guard.begin_call("Bash", bad)
    assert store_files(started) == before


def test_a_repository_at_a_path_longer_than_a_socket_address_works_before_init(
        tmp_path: Path) -> None:
    """The daemon's socket address is `<store>/daemon.sock`; past sun_path's 108 bytes the
    client reaches it through an O_PATH descriptor of the store, which does not exist yet
    before the first call: that is "no daemon", not a traceback."""
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "repo"
    deep.mkdir(parents=True)
    git(deep, "init", "-q")
    assert len(str(deep / ".git" / "gitguard" / "daemon.sock")) > 108
    begun = gg(deep, "call", "begin", "--tool", "Write", "--input", "{}", "--writes", "a.txt",
               "--json", check=False)
    assert "Traceback" not in begun.stderr
    assert begun.returncode == 0, begun.stderr
    assert json.loads(begun.stdout)["callId"] == "call_1"
