"""`gitguard gc`: retention, chain rewrite, what it must never remove, crash safety."""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gitguard import verify
from gitguard.api import Guard
from gitguard.git import packing
from gitguard.models import CheckpointIndexRow
from gitguard.retention import collect, policy
from gitguard.settings import Retention
from gitguard.storage import artifact_journal, durable
from tests.helpers.commands import gg, git
from tests.helpers.gitstate import GitState, capture, fsck_clean

GC_ENV = {"GITGUARD_GC_KEEP_DAYS": "0", "GITGUARD_GC_KEEP_LAST": "3"}


def agent_session(repo: Path, calls: int = 8) -> Guard:
    """`calls` one-line edits of app.py, a checkpoint with messages every third call."""
    guard = Guard.open(repo)
    guard.start_session("s1")
    for i in range(calls):
        entry = guard.begin_call("Edit", {"file_path": "src/app.py", "n": i},
                                 writes=["src/app.py"])
        (repo / "src" / "app.py").write_text(f"def main():\n    return {i}\n")
        guard.end_call(entry.call_id, "succeeded", f"edit {i}")
        if i % 3 == 2:
            guard.checkpoint("manual", f"step_{i}", state={"i": i},
                             messages=[{"role": "user", "content": f"message {j}"}
                                       for j in range(i)])
    return guard


def trees(repo: Path) -> dict[str, str]:
    """checkpoint id -> tree id of its snapshot (read through a new Guard each time)."""
    rows = Guard.open(repo).checkpoints()
    if not rows:
        return {}
    out = git(repo, "rev-parse", *(r.snapshot_commit + "^{tree}" for r in rows)).split()
    return {r.checkpoint_id: tree for r, tree in zip(rows, out, strict=True)}


def exists(repo: Path, oid: str) -> bool:
    return subprocess.run(["git", "cat-file", "-e", oid], cwd=repo).returncode == 0


def test_gc_keeps_what_the_policy_says_and_every_kept_checkpoint_restores(
        repo: Path, state_of: GitState) -> None:
    guard = agent_session(repo)
    rows = guard.checkpoints()
    safety = guard.checkpoint("pre_rollback", "safety")
    middle = rows[5].checkpoint_id
    gg(repo, "pin", middle)
    open_call = guard.begin_call("Write", {"file_path": "late.txt"}, writes=["late.txt"])
    for step in range(3):  # so neither the safety nor the open call's checkpoint is "last"
        (repo / "notes.txt").write_text(f"user note {step}\n")
        guard.checkpoint("manual", f"later_{step}")
    before = trees(repo)
    old_commits = {r.checkpoint_id: r.snapshot_commit for r in guard.checkpoints()}
    index_bytes = (repo / ".git" / "gitguard" / "checkpoints" / "index.jsonl").read_bytes()

    dry = json.loads(gg(repo, "gc", "--dry-run", "--json", env=GC_ENV).stdout)
    assert dry["dryRun"] and dry["pruned"] and dry["commitsDropped"] > 0
    assert (repo / ".git" / "gitguard" / "checkpoints" / "index.jsonl").read_bytes() \
        == index_bytes, "--dry-run changes nothing"

    done = json.loads(gg(repo, "gc", "--json", env=GC_ENV).stdout)
    assert done["pruned"] == dry["pruned"] and done["kept"] == dry["kept"]
    kept = done["kept"]
    ids = list(before)
    assert kept[ids[0]] == ["first"] and kept[middle] == ["pinned"]
    assert kept[safety.checkpoint_id] == ["pre_rollback"]
    assert kept[open_call.pre_checkpoint_id or ""] == ["call in flight"]
    assert kept[ids[-1]] == ["last", "newest complete"] and kept[ids[-2]] == ["last"]
    assert set(kept) | set(done["pruned"]) == set(before)
    assert done["freedBytes"] > 0 and done["pack"]["dropped"] > 0
    state_of.assert_unchanged(repo)
    gg(repo, "verify")

    # The chain now holds only kept snapshots, with their trees unchanged.
    chain = git(repo, "rev-list", "--first-parent", "refs/gitguard/sessions/s1").split()
    assert len(chain) <= len(kept)
    assert trees(repo) == {i: before[i] for i in kept}
    git(repo, "gc", "--prune=now", "-q")
    fsck_clean(repo)
    gg(repo, "verify")
    assert trees(repo) == {i: before[i] for i in kept}
    again = Guard.open(repo)
    for checkpoint_id in kept:
        ckpt = again.load_checkpoint(checkpoint_id)
        assert len(again.messages(ckpt)) == len(ckpt.message_refs)
    pruned_commits = {old_commits[i] for i in done["pruned"]} - set(old_commits[i]
                                                                        for i in kept)
    assert pruned_commits and not [c for c in pruned_commits if exists(repo, c)]
    # The call still open at gc time ends normally: its pre checkpoint is there.
    (repo / "late.txt").write_text("late\n")
    ended = again.end_call(open_call.call_id, "succeeded")
    assert "late.txt" in [p.path for p in ended.file_patches]
    state_of.assert_unchanged(repo)


def test_gc_never_removes_what_an_open_conflict_needs(repo: Path) -> None:
    guard = agent_session(repo, calls=7)
    entry = guard.ledger()[2]
    conflict_ckpt = entry.pre_checkpoint_id or ""
    agent_blob = entry.file_patches[0].after_hash or ""
    conflict = {"path": "src/app.py", "expectedHash": agent_blob, "actualHash": None,
                "agentPatchRef": entry.file_patches[0].patch_ref, "resolution": "pending",
                "checkpointId": conflict_ckpt, "baseHash": None, "schemaVersion": 1}
    conflicts = repo / ".git" / "gitguard" / "conflicts.json"
    durable.atomic_write(conflicts, json.dumps([conflict]).encode())
    done = json.loads(gg(repo, "gc", "--json", env=GC_ENV).stdout)
    assert "open conflict" in done["kept"][conflict_ckpt]
    git(repo, "gc", "--prune=now", "-q")
    assert exists(repo, agent_blob), "the agent's content of a pending conflict survives"
    assert (repo / ".git" / "gitguard" / entry.file_patches[0].patch_ref).exists()
    assert git(repo, "rev-parse", "refs/gitguard/keep/conflicts").strip()
    gg(repo, "verify")
    # Once resolved, gc lets go of what only the conflict needed.
    durable.atomic_write(conflicts, json.dumps([{**conflict, "resolution": "keep_user"}]
                                               ).encode())
    done = json.loads(gg(repo, "gc", "--json", env=GC_ENV).stdout)
    assert conflict_ckpt in done["pruned"]
    assert "refs/gitguard/keep" not in git(repo, "for-each-ref", "refs/gitguard/")


def test_gc_removes_orphan_artifacts_and_old_trace_events(repo: Path) -> None:
    agent_session(repo, calls=2)
    store = repo / ".git" / "gitguard"
    old_orphan = store / "artifacts" / "input_call_99.json"
    old_orphan.write_bytes(b"{}")
    os.chmod(old_orphan, 0o600)
    hour_ago = time.time() - 3600
    os.utime(old_orphan, (hour_ago, hour_ago))
    fresh_orphan = store / "artifacts" / "result_call_98.txt"
    fresh_orphan.write_bytes(b"being written by a process that has not indexed it yet")
    os.chmod(fresh_orphan, 0o600)
    # The calls' artifacts are in their session's journal, with what a call killed
    # between its append and its ledger record left there: nothing names that.
    (journal,) = artifact_journal.journals(store / "artifacts")
    referenced = artifact_journal.read(journal)
    artifact_journal.append(journal, [("input_call_97.json", b"{}")])
    stale = {"at": "2020-01-01T00:00:00.000Z", "type": "tool", "name": "tool.start",
             "sessionId": "s0", "durationMs": 1.0, "data": {}, "schemaVersion": 1}
    durable.append_jsonl(store / "trace.jsonl", [stale])
    done = json.loads(gg(repo, "gc", "--json").stdout)
    assert done["artifactsRemoved"] == ["input_call_99.json"]
    assert done["artifactsBundled"] == len(referenced) == 6
    assert done["traceEventsDropped"] == 1
    assert not old_orphan.exists() and fresh_orphan.exists() and not journal.exists()
    # The ledger's artifacts moved into one bundle, and read back byte for byte.
    left = sorted(p.name for p in (store / "artifacts").iterdir())
    assert left[1:] == [fresh_orphan.name] and left[0].startswith("bundle-")
    guard = Guard.open(repo)
    for name, data in referenced.items():
        assert guard.store.read_artifact(f"artifacts/{name}") == data
    assert not guard.store.has_artifact("artifacts/input_call_97.json")
    assert verify.problems(guard.store, guard.snap) == []
    events = json.loads(gg(repo, "trace", "--json").stdout)
    assert events[0]["at"] > "2020-01-01" and events[-1]["name"] == "gc.run"


def problems(repo: Path) -> list[str]:
    guard = Guard.open(repo)
    return verify.problems(guard.store, guard.snap) + verify.permission_problems(guard.store)


@pytest.mark.parametrize("fault", ["gc.after_temp_refs", "gc.after_index", "gc.after_refs",
                                   "pack.before_delete"])
def test_a_crash_anywhere_in_gc_leaves_a_verifiable_store(repo: Path, fault: str) -> None:
    guard = agent_session(repo, calls=4)
    packing.pack_gitguard_objects(guard.store)  # a pack of ours for the merge to replace
    before = trees(repo)
    crashed = gg(repo, "gc", check=False, env={**GC_ENV, "GITGUARD_FAULT": fault})
    assert crashed.returncode == -9, crashed.stderr
    assert problems(repo) == []
    git(repo, "gc", "--prune=now", "-q")
    assert problems(repo) == []
    now = trees(repo)
    assert now and now.items() <= before.items(), "every indexed checkpoint keeps its tree"
    again = Guard.open(repo)
    for row in again.checkpoints():
        again.messages(again.load_checkpoint(row.checkpoint_id))
    collect.run(again.store, again.snap, again.settings)
    assert problems(repo) == []
    assert "refs/gitguard/gc/" not in git(repo, "for-each-ref", "refs/gitguard/")


def test_gc_refuses_a_store_with_problems(repo: Path) -> None:
    agent_session(repo, calls=1)
    rows = json.loads(gg(repo, "checkpoints", "--json").stdout)
    path = repo / ".git" / "gitguard" / "checkpoints" / f"{rows[0]['checkpointId']}.json"
    path.write_bytes(path.read_bytes().replace(b'"pre"', b'"post"'))
    proc = gg(repo, "gc", check=False)
    assert proc.returncode == 1
    assert "Error: gc changes nothing while the store has problems" in proc.stderr
    assert "Hint: run `gitguard verify`" in proc.stderr


def test_pin_refuses_an_unknown_checkpoint(repo: Path) -> None:
    proc = gg(repo, "pin", "ckpt_nope", check=False)
    assert proc.returncode == 1 and "Error: no checkpoint 'ckpt_nope'" in proc.stderr


def test_packing_keeps_git_auto_gc_idle(repo: Path) -> None:
    """Without a daemon, `call end` packs our objects before git's auto-gc would start."""
    git(repo, "config", "gc.auto", "100")
    state = capture(repo)
    guard = Guard.open(repo)
    loose_17 = []
    for i in range(40):
        entry = guard.begin_call("Write", {"file_path": f"gen/f{i}.txt"},
                                 writes=[f"gen/f{i}.txt"])
        (repo / "gen").mkdir(exist_ok=True)
        (repo / "gen" / f"f{i}.txt").write_text(f"generated {i}\n")
        guard.end_call(entry.call_id, "succeeded")
        loose_17.append(len(os.listdir(repo / ".git" / "objects" / "17"))
                        if (repo / ".git" / "objects" / "17").is_dir() else 0)
    counts = dict(line.split(": ") for line in git(repo, "count-objects", "-v").splitlines())
    packs = [e for e in json.loads(gg(repo, "trace", "--json").stdout) if e["name"] == "gc.pack"]
    made = len(git(repo, "rev-list", "--objects", "--glob=refs/gitguard/*").split("\n"))
    assert packs and made > 100, "the run wrote more objects than gc.auto and packed them"
    assert int(counts["count"]) < 100
    assert max(loose_17) <= 1, "git's own estimate (objects/17) never passed gc.auto/256"
    packs_before = sorted(os.listdir(repo / ".git" / "objects" / "pack"))
    auto = subprocess.run(["git", "-c", "gc.autoDetach=false", "gc", "--auto"], cwd=repo,
                          capture_output=True, text=True)
    assert auto.returncode == 0 and auto.stderr == "" and auto.stdout == ""
    assert sorted(os.listdir(repo / ".git" / "objects" / "pack")) == packs_before
    state.assert_unchanged(repo)
    fsck_clean(repo)


def test_plain_directory_gc(tmp_path: Path) -> None:
    work = tmp_path / "plain"
    work.mkdir()
    (work / "a.txt").write_text("a\n")
    guard = Guard.open(work)
    for i in range(6):
        entry = guard.begin_call("Edit", {"file_path": "a.txt"}, writes=["a.txt"])
        (work / "a.txt").write_text(f"a{i}\n")
        guard.end_call(entry.call_id, "succeeded")
    done = json.loads(gg(work, "gc", "--json", env={**GC_ENV, "GITGUARD_GC_KEEP_LAST": "2"}
                         ).stdout)
    assert done["pruned"] and done["commitsDropped"] > 0
    gg(work, "verify")
    objects = work / ".agent-runtime" / "objects.git"
    subprocess.run(["git", f"--git-dir={objects}", "gc", "--prune=now", "-q"], check=True)
    gg(work, "verify")


# --- the policy alone ------------------------------------------------------------------

def _rows(spec: list[tuple[str, str, str, int]]) -> list[CheckpointIndexRow]:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    return [CheckpointIndexRow(checkpoint_id=i, session_id=s, kind=k,  # type: ignore[arg-type]
                               file=f"{i}.json", sha256="0" * 64, snapshot_commit="0" * 40,
                               created_at=(base + timedelta(days=d)).isoformat())
            for i, s, k, d in spec]


def test_retention_policy() -> None:
    rows = _rows([("a1", "a", "pre", 0), ("a2", "a", "post", 0), ("a3", "a", "resume", 0),
                  ("a4", "a", "pre", 0), ("a5", "a", "post", 0), ("a6", "a", "pre", 0),
                  ("a7", "a", "post", 0), ("a8", "a", "pre", 0),
                  ("b1", "b", "pre", 9), ("b2", "b", "post", 9), ("b3", "b", "pre", 9)])
    now = datetime(2026, 1, 10, tzinfo=UTC)
    plan = policy.choose(rows, Retention(keep_first=1, keep_last=1, keep_days=2), now,
                         pinned=["a4", "zz"], in_flight=["a2"], conflicts=["a6"],
                         complete=[r.checkpoint_id for r in rows if r.checkpoint_id != "a8"])
    assert plan.prune == ["a5"]
    assert plan.keep == {
        "a1": ["first"], "a2": ["call in flight"], "a3": ["resume"], "a4": ["pinned"],
        "a6": ["open conflict"], "a7": ["newest complete"], "a8": ["last"],
        "b1": ["first", "young session"], "b2": ["young session"],
        "b3": ["last", "young session", "newest complete"]}
    old = policy.choose(rows, Retention(keep_first=0, keep_last=1, keep_days=0), now)
    assert old.prune == ["a1", "a2", "a4", "a5", "a6", "a7", "b1", "b2"]


def test_a_checkpoint_id_is_never_given_out_twice_after_gc(repo: Path) -> None:
    """`checkpoints.next_id` counts up from the highest id still in the index, so gc must
    never prune today's highest: it is always some session's last checkpoint."""
    guard = agent_session(repo, calls=4)
    guard.start_session("s2")
    entry = guard.begin_call("Write", {"file_path": "other.txt"}, writes=["other.txt"])
    (repo / "other.txt").write_text("other\n")
    guard.end_call(entry.call_id, "succeeded", "wrote")
    issued = [r.checkpoint_id for r in guard.checkpoints()]
    gg(repo, "gc", env={"GITGUARD_GC_KEEP_DAYS": "0", "GITGUARD_GC_KEEP_LAST": "1",
                        "GITGUARD_GC_KEEP_FIRST": "0"})
    assert len(Guard.open(repo).checkpoints()) < len(issued), "gc pruned something"
    fresh = Guard.open(repo).checkpoint("manual", "after gc").checkpoint_id
    assert fresh not in issued and fresh > max(issued)
