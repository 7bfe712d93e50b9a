"""The kill matrix: a real gitguard process SIGKILLs itself at each named fault point, then
resume must succeed, lose no acknowledged record, change no user file, mark the
interrupted call uncertain when it had started, refuse to replay it, and leave a store
that `gitguard verify` passes."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pygit2
import pytest

from gitguard import verify
from gitguard.api import Guard
from gitguard.errors import ReplayRefused
from gitguard.git import packing
from gitguard.ledger import segment
from gitguard.snapshot import stat_tree
from gitguard.storage import trace_log
from tests.helpers.crashkit import (
    KNOWN_POINTS,
    fault_points_in_source,
    git,
    make_repo,
    scratch_root,
    user_git_state,
    workspace_files,
)

PUBLISH = {"command": "npm publish"}
JOURNALS = ("ledger.jsonl", "checkpoints/index.jsonl", "trace.jsonl")
GC_ENV = {"GITGUARD_GC_KEEP_DAYS": "0", "GITGUARD_GC_KEEP_LAST": "2"}   # gc prunes here


def setup_begin(guard: Guard, repo: Path) -> dict[str, str]:
    guard.start_session("s1")
    with guard.tool_call("Write", {"file_path": "a.txt"}, writes=["a.txt"]):
        (repo / "a.txt").write_text("agent\n")
    (repo / "notes.txt").write_text("the user's notes\n")   # the next snapshot is a new commit
    return {}


def setup_begin_shared(guard: Guard, repo: Path) -> dict[str, str]:
    """call_1 ended and nothing changed since: call_2's pre is call_1's post (shared_checkpoint)."""
    guard.start_session("s1")
    with guard.tool_call("Write", {"file_path": "a.txt"}, writes=["a.txt"]):
        (repo / "a.txt").write_text("agent\n")
    return {}


def setup_started(guard: Guard, repo: Path) -> dict[str, str]:
    setup_begin(guard, repo)
    guard.begin_call("Bash", PUBLISH, call_id="call_2")
    (repo / "build" / "pkg.tgz").write_bytes(b"tarball")
    (repo / "CHANGELOG.md").write_text("1.0.0\n")
    return {}


def setup_begin_upgraded(guard: Guard, repo: Path) -> dict[str, str]:
    """A store from before the no-daemon lag state: the next scan takes the git way."""
    setup_begin(guard, repo)
    stat_tree.path_of(guard.store.root).unlink()
    return {}


def setup_seed(guard: Guard, repo: Path) -> dict[str, str]:
    """Only the first snapshot (against the user's index): the next scan makes the private
    stat index, a copy rewritten as v4, and re-keys the first snapshot's state to it;
    drafts/ is an untracked directory the first tree holds, which that scan settles."""
    (repo / "drafts").mkdir()
    (repo / "drafts" / "plan.md").write_text("a plan\n")
    guard.start_session("s1")
    guard.checkpoint(step_id="step_1")
    (repo / "notes.txt").write_text("the user's notes\n")
    return {}


def setup_started_upgraded(guard: Guard, repo: Path) -> dict[str, str]:
    setup_started(guard, repo)
    stat_tree.path_of(guard.store.root).unlink()
    return {}


def setup_uncertain(guard: Guard, repo: Path) -> dict[str, str]:
    setup_started(guard, repo)
    guard.resume()
    return {}


def setup_manual(guard: Guard, repo: Path) -> dict[str, str]:
    setup_begin(guard, repo)
    (repo / "notes.txt").write_text("more notes\n")
    return {}


def setup_published(guard: Guard, repo: Path) -> dict[str, str]:
    """call_1 wrote a.txt, call_2 published and wrote CHANGELOG.md, the user wrote notes."""
    setup_started(guard, repo)
    guard.end_call("call_2", "succeeded", "+ pkg@1.0.0")
    return {"target": guard.ledger()[0].pre_checkpoint_id or ""}


def setup_long(guard: Guard, repo: Path) -> dict[str, str]:
    """Enough checkpoints for gc to prune, and a pack of ours for it to merge."""
    setup_published(guard, repo)
    for n in range(3):
        with guard.tool_call("Edit", {"file_path": "src/app.py", "n": n}, writes=["src/app.py"]):
            (repo / "src" / "app.py").write_text(f"def main():\n    return {n}\n")
    packing.pack_gitguard_objects(guard.store)
    return {}


def setup_many_files(guard: Guard, repo: Path) -> dict[str, str]:
    """setup_long, and artifacts/ grown past what gc shrinks (files `run` would write; on
    tmpfs a directory's size is 20 bytes an entry)."""
    setup_long(guard, repo)
    for n in range(2500):
        path = guard.store.artifacts_dir / f"stdout_call_{n:04d}_with_a_longer_name.txt"
        path.write_bytes(b"out\n")
        path.chmod(0o600)
    return {}


@dataclass(frozen=True)
class Scenario:
    setup: Callable[[Guard, Path], dict[str, str]]
    argv: tuple[str, ...]                      # `$name` is filled from what setup returns
    env: dict[str, str] = field(default_factory=dict)
    journals: tuple[str, ...] = JOURNALS       # append-only files in this command
    writes_workspace: bool = False             # rollback: it is the command's job
    own_tool: str | None = None                # gitguard's own ledger entry, if it makes one


SCENARIOS = {
    "begin": Scenario(setup_begin, ("call", "begin", "--tool", "Bash", "--input",
                                    json.dumps(PUBLISH), "--call-id", "call_2")),
    "end": Scenario(setup_started, ("call", "end", "call_2", "--status", "succeeded",
                                    "--result", "+ pkg@1.0.0")),
    "begin-shared": Scenario(setup_begin_shared, ("call", "begin", "--tool", "Bash", "--input",
                                                  json.dumps(PUBLISH), "--call-id", "call_2")),
    "begin-upgraded": Scenario(setup_begin_upgraded, ("call", "begin", "--tool", "Bash",
                                                      "--input", json.dumps(PUBLISH),
                                                      "--call-id", "call_2")),
    "begin-seed": Scenario(setup_seed, ("call", "begin", "--tool", "Bash", "--input",
                                        json.dumps(PUBLISH), "--call-id", "call_2")),
    "end-upgraded": Scenario(setup_started_upgraded, ("call", "end", "call_2", "--status",
                                                      "succeeded", "--result", "+ pkg@1.0.0")),
    "end-failed": Scenario(setup_started, ("call", "end", "call_2", "--status", "failed",
                                           "--result", "npm ERR! 403")),
    "resume": Scenario(setup_started, ("resume",)),
    "reconcile": Scenario(setup_uncertain, ("reconcile", "call_2", "--status", "succeeded")),
    "checkpoint": Scenario(setup_manual, ("checkpoint", "--step", "step_9")),
    "rollback": Scenario(setup_published, ("rollback-files", "--to", "$target"),
                         writes_workspace=True, own_tool="gitguard.rollback_files"),
    # gc rewrites the index and trims the trace on purpose; the ledger stays append-only.
    "gc": Scenario(setup_long, ("gc",), env=GC_ENV, journals=("ledger.jsonl",)),
    "gc-shrink": Scenario(setup_many_files, ("gc",), env=GC_ENV, journals=("ledger.jsonl",)),
    "gc-repack": Scenario(setup_long, ("gc", "--repack-repository"), env=GC_ENV,
                          journals=("ledger.jsonl",)),
}

# (fault point, scenario, status of call_2 after resume; None: it never reached the ledger)
MATRIX: list[tuple[str, str, str | None]] = [
    # call begin: pre checkpoint, then planned+started in one append. Before that append
    # the call is not in the ledger at all (a checkpoint no entry names may be left).
    ("jsonl.before_write", "begin", None),
    ("jsonl.torn_write", "begin", None),
    ("durable.before_file_fsync", "begin", None),
    ("jsonl.after_fsync", "begin", None),
    ("snapshot.after_update_index", "begin-upgraded", None),
    ("snapshot.after_tree", "begin", None),
    ("stat.after_copy", "begin-seed", None),
    ("stat.after_convert", "begin-seed", None),
    ("stat.after_rekey", "begin-seed", None),
    ("stat.after_settle", "begin-seed", None),
    ("snapshot.before_ref", "begin", None),
    ("checkpoint.before_file", "begin", None),
    ("checkpoint.before_index", "begin", None),
    ("checkpoint.after_index", "begin", None),
    ("ledger.before_started", "begin", None),
    ("ledger.after_started", "begin", "uncertain"),
    # the pre checkpoint shared with call_1's post: nothing is written before the ledger
    ("jsonl.torn_write", "begin-shared", None),
    ("ledger.before_started", "begin-shared", None),
    ("ledger.after_started", "begin-shared", "uncertain"),
    ("snapshot.after_update_index", "end-upgraded", "uncertain"),
    ("snapshot.after_tree", "end", "uncertain"),
    ("snapshot.before_ref", "end", "uncertain"),
    ("checkpoint.before_file", "end", "uncertain"),
    ("durable.before_file_fsync", "end", "uncertain"),
    ("checkpoint.before_index", "end", "uncertain"),
    ("jsonl.before_write", "end", "uncertain"),
    ("jsonl.torn_write", "end", "uncertain"),
    ("checkpoint.after_index", "end", "uncertain"),
    ("ledger.before_succeeded", "end", "uncertain"),
    ("ledger.after_succeeded", "end", "succeeded"),
    ("ledger.before_failed", "end-failed", "uncertain"),
    ("ledger.after_failed", "end-failed", "failed"),
    ("resume.before_checkpoint", "resume", "uncertain"),
    ("snapshot.before_ref", "resume", "uncertain"),
    ("checkpoint.before_index", "resume", "uncertain"),
    ("resume.after_checkpoint", "resume", "uncertain"),
    ("ledger.before_uncertain", "resume", "uncertain"),
    ("jsonl.torn_write", "resume", "uncertain"),
    ("ledger.after_uncertain", "resume", "uncertain"),
    ("resume.after_mark", "resume", "uncertain"),
    ("resume.before_done", "resume", "uncertain"),
    ("ledger.before_succeeded", "reconcile", "uncertain"),
    ("ledger.after_succeeded", "reconcile", "succeeded"),
    ("snapshot.before_ref", "checkpoint", None),
    ("checkpoint.before_index", "checkpoint", None),
    ("checkpoint.after_index", "checkpoint", None),
    ("rollback.after_safety", "rollback", "succeeded"),
    ("rollback.mid_apply", "rollback", "succeeded"),
    ("atomic_write.before_replace", "gc", "succeeded"),
    ("gc.after_temp_refs", "gc", "succeeded"),
    ("gc.after_index", "gc", "succeeded"),
    ("gc.after_refs", "gc", "succeeded"),
    ("gc.after_artifact_bundle", "gc", "succeeded"),
    ("gc.after_ledger_segment", "gc", "succeeded"),
    ("gc.after_trace_segment", "gc", "succeeded"),
    ("gc.after_dir_swap", "gc-shrink", "succeeded"),
    ("pack.before_delete", "gc", "succeeded"),
    ("gc.after_repack", "gc-repack", "succeeded"),
]
# What gitguard's own entry is after resume: a rollback killed mid-apply had started writing.
OWN_STATUS = {"rollback.after_safety": None, "rollback.mid_apply": "uncertain"}


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    root = scratch_root()
    yield root
    shutil.rmtree(root, ignore_errors=True)


def run_cli(repo: Path, *args: str, fault: str, env: dict[str, str]
            ) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "GITGUARD_FAULT"}
    full.update(env, GITGUARD_FAULT=fault)
    return subprocess.run([sys.executable, "-m", "gitguard", *args], cwd=repo, env=full,
                          capture_output=True, text=True)


def journals(repo: Path, names: tuple[str, ...]) -> dict[str, bytes]:
    """Each journal's bytes; the ledger's with the lines gc moved into ledger.segment."""
    root = repo / ".git" / "gitguard"
    found = {name: (root / name).read_bytes() if (root / name).exists() else b""
             for name in names}
    if "ledger.jsonl" in found:
        found["ledger.jsonl"] = segment.read_stream(root / "ledger.jsonl") or b""
    return found


def assert_safety_holds(guard: Guard, before: dict[str, str], after: dict[str, str]) -> None:
    """Every path a killed rollback changed can come back: its old content is in the
    pre_rollback checkpoint (DESIGN.md invariant 2)."""
    changed = [p for p in set(before) | set(after) if before.get(p) != after.get(p)]
    if not changed:
        return
    safety = [r for r in guard.checkpoints() if r.kind == "pre_rollback"][-1]
    commit = guard.snap.repo.get(safety.snapshot_commit)
    assert isinstance(commit, pygit2.Commit)
    for path in changed:
        if path in before:
            kept = hashlib.sha256(bytes(guard.snap.repo.get(commit.tree[path].id).data))
            assert kept.hexdigest() == before[path], f"{path}: the safety checkpoint lost it"


@pytest.mark.parametrize(("point", "scenario", "expected"), MATRIX,
                         ids=[f"{s}@{p}" for p, s, _ in MATRIX])
def test_kill_at_fault_point(scratch: Path, point: str, scenario: str,
                             expected: str | None) -> None:
    plan = SCENARIOS[scenario]
    repo = make_repo(scratch / f"{scenario}-{point}")
    git_state = user_git_state(repo)
    with Guard.open(repo) as guard:
        values = plan.setup(guard, repo)
    argv = [values[arg[1:]] if arg.startswith("$") else arg for arg in plan.argv]
    files = workspace_files(repo)
    acknowledged = journals(repo, plan.journals)

    killed = run_cli(repo, *argv, fault=point, env=plan.env)
    assert killed.returncode == -signal.SIGKILL, (
        f"{point} was never reached by `gitguard {' '.join(argv)}` "
        f"(exit {killed.returncode}): {killed.stderr}")
    after_kill = workspace_files(repo)
    if not plan.writes_workspace:
        assert after_kill == files, "a user file changed"

    # Resume runs in this process: one interpreter start per row keeps the matrix fast, and
    # the CLI's resume is covered by test_resume.py.
    with Guard.open(repo) as guard:
        answer = guard.resume().to_json()

    assert workspace_files(repo) == after_kill, "resume changed a workspace file"
    for name, before in acknowledged.items():
        assert journals(repo, plan.journals)[name].startswith(before), \
            f"{name} lost an acknowledged record"
    assert user_git_state(repo) == git_state, "the user's git state changed"

    with Guard.open(repo) as guard:
        entries = {e.call_id: e for e in guard.ledger()}
        assert not [e for e in entries.values() if e.status in ("planned", "approved", "started")]
        status = entries["call_2"].status if "call_2" in entries else None
        assert status == expected
        assert ("call_2" in answer["uncertain"]) == (expected == "uncertain")
        assert ("call_2" in answer["doNotRepeat"]) == (expected in ("uncertain", "succeeded"))
        if plan.own_tool is not None:
            own = [e.status for e in entries.values() if e.tool_name == plan.own_tool]
            assert (own[-1] if own else None) == OWN_STATUS[point]
        if plan.writes_workspace:
            assert_safety_holds(guard, files, after_kill)
        checked = verify.report(guard.store, guard.snap)
        assert checked.problems == []
        if scenario.startswith("gc"):   # the compacted forms read back whatever the kill left
            assert [e.name for e in trace_log.read(guard.store)][:1] == ["session.start"]
            for entry in entries.values():
                for ref in (entry.input_ref, entry.result_ref):
                    assert ref is None or guard.store.read_artifact(ref)
        again = guard.resume().to_json()
        assert again == answer, "a second resume gives the same answer"
        if scenario == "checkpoint" and point == "checkpoint.before_index":
            assert [s["file"].startswith("checkpoints/incomplete/ckpt_")
                    for s in answer["skipped"]] == [True]
        try:
            guard.begin_call("Bash", PUBLISH)
        except ReplayRefused:
            refused = True
        else:
            refused = False
        assert refused == (expected in ("uncertain", "succeeded")), "npm publish was replayed"
    git(repo, "fsck", "--no-progress", "--strict")


# A snapshot written as a pack (pack_writer: the daemon's incremental trees). No CLI verb
# takes this path in-process, so a small script does what the daemon does.
PACK_SCRIPT = """
import os, sys
from gitguard.api import Guard
from gitguard.git.tree_build import IncrementalTree
repo = sys.argv[1]
with Guard.open(repo) as guard, guard.store.writing():
    first = guard.snap.write_tree()
    inc = IncrementalTree(guard.snap.repo, repo, guard.settings.untracked_size_cap,
                          first.tree, first.skipped, store=guard.store)
    changed = []
    for n in range(40):
        rel = f"gen/d{n % 4}/f{n}.txt"
        os.makedirs(os.path.join(repo, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(repo, rel), "w") as fh:
            fh.write(f"{n}\\n")
        changed.append(rel.encode())
    guard.snap.commit(inc.advance(changed).tree, "s1", {"kind": "test"})
"""
PACK_MATRIX = ["snapshot.pack_before_publish", "snapshot.pack_between_renames"]


@pytest.mark.parametrize("point", PACK_MATRIX)
def test_kill_while_publishing_a_snapshot_pack(scratch: Path, point: str) -> None:
    repo = make_repo(scratch / f"pack-{point}")
    git_state = user_git_state(repo)
    with Guard.open(repo) as guard:
        setup_begin(guard, repo)
        head = guard.snap.session_head("s1")
    env = {k: v for k, v in os.environ.items() if k != "GITGUARD_FAULT"}
    killed = subprocess.run([sys.executable, "-c", PACK_SCRIPT, str(repo)], cwd=repo,
                            env={**env, "GITGUARD_FAULT": point}, capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, f"{point} never reached: {killed.stderr}"
    pack_dir = repo / ".git" / "objects" / "pack"
    with Guard.open(repo) as guard:
        recorded = [p["name"] for p in packing.read_state(guard.store)["packs"]]
        assert len(recorded) == 1, "the intent names the pack before it is visible"
        assert not (pack_dir / f"{recorded[0]}.idx").exists()
        assert guard.snap.session_head("s1") == head, "nothing names the pack's objects"
        guard.resume()
        assert verify.report(guard.store, guard.snap).problems == []
        packing.pack_gitguard_objects(guard.store)          # settles what the kill left
        names = os.listdir(pack_dir)
        assert not [n for n in names if n.startswith(packing.TMP_PREFIX)]
        assert not [n for n in names if n.endswith(".pack") and n[:-5] + ".idx" not in names]
        assert recorded[0] not in {p["name"] for p in packing.read_state(guard.store)["packs"]}
        assert {p["name"] for p in packing.read_state(guard.store)["packs"]} == \
            {p["name"] for p in packing.own_packs(guard.store)}
    assert user_git_state(repo) == git_state, "the user's git state changed"
    git(repo, "fsck", "--no-progress", "--strict")


def test_the_matrix_covers_every_fault_point_in_the_code() -> None:
    """A new fault point needs a row here; a row for a point the code lost fails too."""
    assert {point for point, _, _ in MATRIX} | set(PACK_MATRIX) == fault_points_in_source()
    assert set(KNOWN_POINTS) <= fault_points_in_source()
