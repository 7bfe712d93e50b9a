"""Ledger damage a user can recover from: `verify` names a deleted, a reordered and a
damaged line; `gitguard repair` sets damaged lines aside byte for byte, turns the calls
they may have touched uncertain (never succeeded), and work goes on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitguard.api import Guard
from tests.helpers.commands import gg

PUBLISH = {"command": "npm publish"}


@pytest.fixture
def store(repo: Path) -> Path:
    """Four finished calls: a Write, a test run, a publish (non-idempotent), a Read."""
    gg(repo, "init", "--no-daemon")
    guard = Guard.open(str(repo))
    guard.start_session("s1")
    with guard.tool_call("Write", {"file_path": "a.txt"}, writes=["a.txt"]):
        (repo / "a.txt").write_text("agent\n")
    with guard.tool_call("Bash", {"command": "pytest -q"}) as call:
        call.result = "1 passed"
    with guard.tool_call("Bash", PUBLISH) as call:
        call.result = "published 1.0.0"
    with guard.tool_call("Read", {"file_path": "a.txt"}) as call:   # publish's lines: middle
        call.result = "agent"
    return repo / ".git" / "gitguard"


def lines(store: Path) -> list[bytes]:
    return (store / "ledger.jsonl").read_bytes().splitlines(keepends=True)


def record(line: bytes) -> dict:
    return json.loads(line[line.index(b'"data":') + 7:-2])


def line_of(store: Path, call_id: str, status: str) -> int:
    for n, line in enumerate(lines(store)):
        data = record(line)
        part = data.get("entry") or data.get("change") or {}
        if part.get("callId") == call_id and part.get("status") == status:
            return n
    raise AssertionError(f"no {status} line for {call_id}")


def write_lines(store: Path, new: list[bytes]) -> None:
    (store / "ledger.jsonl").write_bytes(b"".join(new))


def entry(repo: Path, call_id: str) -> dict:
    calls = json.loads(gg(repo, "ledger", "--json").stdout)
    return next(c for c in calls if c["callId"] == call_id)


def quarantined(store: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((store / "quarantine").iterdir()))


def test_a_deleted_succeeded_line_is_reported_and_its_call_becomes_uncertain(
        repo: Path, store: Path) -> None:
    before = lines(store)
    gone = line_of(store, "call_3", "succeeded")
    write_lines(store, before[:gone] + before[gone + 1:])
    out = gg(repo, "verify", check=False)
    assert out.returncode == 1
    assert "is missing: a line was deleted" in out.stdout

    done = json.loads(gg(repo, "repair", "--json").stdout)
    assert done["uncertain"] == ["call_3"] and done["setAside"] == []
    assert len(done["gaps"]) == 1
    assert entry(repo, "call_3")["status"] == "uncertain"      # never succeeded
    assert entry(repo, "call_1")["status"] == "succeeded"      # finished before: untouched
    gg(repo, "verify")
    note = gg(repo, "resume").stdout
    assert "call_3" in note and "Do not repeat" in note
    refused = gg(repo, "call", "begin", "--tool", "Bash", "--input", json.dumps(PUBLISH),
                 check=False)
    assert refused.returncode == 4                              # still never replayed


def test_reordered_lines_are_reported_then_put_back_in_order(repo: Path, store: Path) -> None:
    before = lines(store)
    swapped = [before[1], before[0], *before[2:]]
    write_lines(store, swapped)
    out = gg(repo, "verify", check=False)
    assert out.returncode == 1 and "out of order" in out.stdout

    done = json.loads(gg(repo, "repair", "--json").stdout)
    assert done["reordered"] == 2 and done["setAside"] == [] and done["gaps"] == []
    after = lines(store)
    assert after[:len(before)] == before                        # every byte, in seq order
    gg(repo, "verify")
    assert entry(repo, "call_3")["status"] == "succeeded"


def test_a_flipped_byte_stops_work_until_repair_quarantines_the_line(
        repo: Path, store: Path) -> None:
    before = lines(store)
    n = line_of(store, "call_3", "succeeded")
    damaged = bytearray(before[n])
    at = damaged.index(b"succeeded")
    damaged[at] ^= 0x20                                         # "Succeeded": the sum fails
    write_lines(store, [*before[:n], bytes(damaged), *before[n + 1:]])
    blocked = gg(repo, "ledger", check=False)
    assert blocked.returncode == 1
    assert "checksum mismatch" in blocked.stderr and "gitguard repair" in blocked.stderr
    assert "Traceback" not in blocked.stderr

    dry = json.loads(gg(repo, "repair", "--dry-run", "--json").stdout)
    assert dry["setAside"][0]["line"] == n + 1 and dry["uncertain"] == ["call_3"]
    assert (store / "ledger.jsonl").read_bytes() == b"".join(
        [*before[:n], bytes(damaged), *before[n + 1:]])          # dry run changed nothing

    done = json.loads(gg(repo, "repair", "--json").stdout)
    assert done["setAside"][0]["reason"].startswith("its checksum fails")
    assert quarantined(store) == bytes(damaged)                 # the bytes are kept
    assert oct((store / "quarantine").stat().st_mode & 0o777) == "0o700"
    assert entry(repo, "call_3")["status"] == "uncertain"
    gg(repo, "verify")
    # Work goes on: a new call, and the next repair finds nothing.
    gg(repo, "call", "begin", "--tool", "Read", "--input", '{"file_path": "a.txt"}')
    assert "nothing to repair" in gg(repo, "repair").stdout


def test_a_damaged_first_line_is_rebuilt_uncertain_so_the_replay_guard_still_sees_it(
        repo: Path, store: Path) -> None:
    before = lines(store)
    n = line_of(store, "call_3", "planned")
    damaged = bytearray(before[n])
    damaged[len(b'{"sum":"')] ^= 1                 # one bit of the sum; the JSON still reads
    damaged = bytes(damaged)
    write_lines(store, [*before[:n], damaged, *before[n + 1:]])
    done = json.loads(gg(repo, "repair", "--json").stdout)
    # its later lines cannot fold without the first: set aside too, bytes kept
    assert [s["callId"] for s in done["setAside"]] == ["call_3"] * len(done["setAside"])
    assert len(done["setAside"]) >= 2
    assert done["uncertain"] == ["call_3"] and done["lost"] == []
    assert entry(repo, "call_3")["toolName"] == "Bash"
    assert entry(repo, "call_3")["status"] == "uncertain"
    gg(repo, "verify")
    refused = gg(repo, "call", "begin", "--tool", "Bash", "--input", json.dumps(PUBLISH),
                 check=False)
    assert refused.returncode == 4
    kept = quarantined(store)
    assert damaged in kept


def test_repair_with_nothing_wrong_changes_nothing(repo: Path, store: Path) -> None:
    before = (store / "ledger.jsonl").read_bytes()
    assert "nothing to repair" in gg(repo, "repair").stdout
    assert (store / "ledger.jsonl").read_bytes() == before
    assert not (store / "quarantine").exists()


def test_a_running_daemon_serves_calls_from_the_repaired_ledger(repo: Path, store: Path) -> None:
    from tests.helpers.daemons import running_daemon

    with running_daemon(repo):
        begun = json.loads(gg(repo, "call", "begin", "--tool", "Bash", "--input",
                              '{"command": "make"}', "--json").stdout)["callId"]
        before = lines(store)
        n = line_of(store, "call_3", "succeeded")
        write_lines(store, [*before[:n], before[n].replace(b"succeeded", b"Succeeded"),
                            *before[n + 1:]])
        done = json.loads(gg(repo, "repair", "--json").stdout)
        assert done["uncertain"] == ["call_3"]       # the damaged line still names its call
        # The daemon folds the rewritten ledger: its seqs go on from the repair's, and its
        # replay guard sees call_3 uncertain.
        assert gg(repo, "call", "end", begun, "--status", "succeeded").returncode == 0
        refused = gg(repo, "call", "begin", "--tool", "Bash", "--input", json.dumps(PUBLISH),
                     check=False)
        assert refused.returncode == 4
        again = json.loads(gg(repo, "call", "begin", "--tool", "Read", "--input",
                              '{"file_path": "b"}', "--json").stdout)["callId"]
        gg(repo, "call", "end", again, "--status", "succeeded")
        assert entry(repo, begun)["status"] == "succeeded"
        assert entry(repo, "call_3")["status"] == "uncertain"
        gg(repo, "verify")
