"""rollback-files on real repositories: the CLI contract, modes and symlinks, files the agent
never touched, path safety, a crash inside the apply, the watcher's attribution records."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gitguard import fileops
from gitguard.api import Guard
from gitguard.errors import UnsafePath
from gitguard.git import objects, tree_edit
from gitguard.git.objects import TreeResult
from gitguard.models import Attribution
from gitguard.rollback import rollback_files as rollback
from gitguard.rollback.rollback_files import rollback_files
from gitguard.settings import Settings
from gitguard.snapshot import checkpoints
from gitguard.storage import durable, trace_log
from gitguard.workspace import discover, safe_relpath
from tests.helpers.commands import gg
from tests.helpers.gitstate import GitState, fsck_clean
from tests.helpers.rollback import put, tree_state


def agent_call(guard: Guard, tool: str, changes: dict[str, tuple[str, bytes, bool] | None],
               writes: list[str] | None = None) -> str:
    entry = guard.begin_call(tool, {"changes": sorted(changes)}, writes=writes or [])
    for path, value in changes.items():
        put(guard.ws.root, path, value)
    return guard.end_call(entry.call_id, "succeeded").call_id


def store_files(repo: Path) -> dict[str, bytes]:
    root = repo / ".git" / "gitguard"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "lock"}


def test_cli_restores_the_agent_files_reports_the_users_and_undoes_itself(
        repo: Path, state_of: GitState) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    ckpt = guard.checkpoint("manual").checkpoint_id
    agent_call(guard, "Write", {"src/new.py": ("file", b"print('new')\n", False)},
               ["src/new.py"])
    agent_call(guard, "Edit", {"src/app.py": ("file", b"def main():\n    return 2\n", False)},
               ["src/app.py"])
    agent_call(guard, "Bash", {"README.md": None, "run.sh": ("file", b"#!/bin/sh\n", True)})
    (repo / "src" / "app.py").write_text("def main():\n    return 3  # mine\n")
    (repo / "notes.txt").write_text("the user's own file\n")
    guard.close()
    before = tree_state(repo)

    dry = gg(repo, "rollback-files", "--to", ckpt, "--dry-run", "--json", check=False)
    assert dry.returncode == 5, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["dryRun"] and plan["safetyCheckpointId"] is None
    assert tree_state(repo) == before, "a dry run writes nothing"

    proc = gg(repo, "rollback-files", "--to", ckpt, "--json", check=False)
    assert proc.returncode == 5, proc.stderr
    result = json.loads(proc.stdout)
    assert result["restored"] == ["README.md"] == plan["restored"]
    assert result["deleted"] == ["run.sh", "src/new.py"] == plan["deleted"]
    [conflict] = result["conflicts"]
    assert conflict["path"] == "src/app.py" and conflict["resolution"] == "pending"
    assert conflict["agentPatchRef"] == "artifacts/patch_call_2.diff"
    assert conflict["actualHash"] != conflict["expectedHash"]
    assert (repo / "README.md").read_text() == "# project\n"
    assert (repo / "src" / "app.py").read_text() == "def main():\n    return 3  # mine\n"
    assert (repo / "notes.txt").exists() and (repo / ".env").exists()
    state_of.assert_unchanged(repo)

    patch = gg(repo, "diff", result["entryId"]).stdout.encode()
    subprocess.run(["git", "apply", "-R", "--check"], cwd=repo, input=patch, check=True)
    listed = json.loads(gg(repo, "conflicts", "--json").stdout)
    assert [c["path"] for c in listed] == ["src/app.py"]
    ledger = [json.loads(line)["data"] for line in
              (repo / ".git" / "gitguard" / "ledger.jsonl").read_bytes().splitlines()]
    actions = [e["action"] for e in ledger if e.get("action")]
    assert actions == [{"type": "rollback_files", "checkpointId": ckpt}]
    events = [e.name for e in trace_log.read(Guard.open(repo).store)]
    assert "rollback.files" in events
    assert "conflict.pending" in events

    undo = json.loads(gg(repo, "rollback-files", "--to", result["safetyCheckpointId"],
                         "--json", check=False).stdout)
    assert undo["conflicts"] == []
    assert tree_state(repo) == before, "the rollback of the rollback gives back every byte"
    state_of.assert_unchanged(repo)
    fsck_clean(repo)


def test_modes_symlinks_and_deletions_come_back_exactly(repo: Path) -> None:
    guard = Guard.open(repo)
    (repo / "tool.sh").write_text("echo hi\n")
    (repo / "link").symlink_to("src/app.py")
    weird = os.fsdecode(b"caf\xe9.txt")
    (repo / weird).write_bytes(b"latin-1 name\n")
    ckpt = guard.checkpoint("manual")
    base = tree_state(repo)
    os.chmod(repo / "tool.sh", 0o755)
    agent_call(guard, "Bash", {"link": ("link", b"elsewhere", False),
                               "src/app.py": ("link", b"../README.md", False),
                               weird: None, "deep/er/x.bin": ("file", b"\x00\xff", False)})
    # the chmod above happened outside a call: the user's, so it stays
    result = rollback_files(guard, ckpt.checkpoint_id)
    assert not result.conflicts
    after = tree_state(repo)
    assert after["link"] == base["link"] and after["src/app.py"] == base["src/app.py"]
    assert after[weird] == base[weird]
    assert "deep/er/x.bin" not in after and not (repo / "deep").exists()
    assert after["tool.sh"] == ("file", b"echo hi\n", True)


def test_files_the_agent_never_touched_survive(repo: Path, state_of: GitState) -> None:
    guard = Guard(discover(repo), Settings(untracked_size_cap=1000))
    (repo / "big.dat").write_bytes(b"B" * 5000)          # stands in for a 1 GB file
    (repo / "build" / "more.o").write_bytes(b"\x7fELF")
    ckpt = guard.checkpoint("manual").checkpoint_id
    agent_call(guard, "Bash", {"gen/a.py": ("file", b"a\n", False),
                               "src/app.py": ("file", b"changed\n", False)})
    (repo / "gen" / "cache.pyc").write_bytes(b"the user's untracked build output")
    (repo / "build" / "late.log").write_text("after the call\n")
    survivors = {p: v for p, v in tree_state(repo).items()
                 if p not in ("gen/a.py", "src/app.py")}
    result = rollback_files(guard, ckpt)
    assert result.deleted == ["gen/a.py"] and result.restored == ["src/app.py"]
    after = tree_state(repo)
    assert {p: v for p, v in after.items() if p in survivors} == survivors
    assert (repo / "gen").is_dir(), "a directory is removed only when empty"
    undo = rollback_files(guard, result.applied.safety.checkpoint_id)  # type: ignore[union-attr]
    assert not undo.conflicts and tree_state(repo)["src/app.py"][1] == b"changed\n"
    state_of.assert_unchanged(repo)


def forge_entry(repo: Path, path: str) -> None:
    """Append a call to the ledger whose file patch names `path`, as a hand edit would."""
    guard = Guard.open(repo)
    call_id = agent_call(guard, "Write", {"ok.txt": ("file", b"ok\n", False)})
    entry = guard.ledger()[-1]
    assert entry.call_id == call_id
    bad = entry.file_patches[0].model_copy(update={"path": path})
    forged = entry.model_copy(update={"call_id": "call_forged", "file_patches": (bad,)})
    record = {"schemaVersion": 1, "seq": 999, "recordedAt": "2026-01-01T00:00:00.000Z",
              "entry": forged.to_json(), "sessionId": forged.session_id}
    durable.append_jsonl(guard.store.ledger_path, [record])


@pytest.mark.parametrize("name", ["../x", "/tmp/gitguard-abs-x", "src/../../x"])
def test_a_ledger_path_outside_the_workspace_is_refused(repo: Path, name: str) -> None:
    ckpt = Guard.open(repo).checkpoint("manual").checkpoint_id
    forge_entry(repo, name)
    outside = (repo / name) if not name.startswith("/") else Path(name)
    before = store_files(repo)
    proc = gg(repo, "rollback-files", "--to", ckpt, check=False)
    assert proc.returncode == 1 and proc.stderr.startswith("Error: ledger entry call_forged")
    assert "Hint: " in proc.stderr
    assert not outside.resolve().exists()
    assert (repo / "ok.txt").exists(), "nothing was rolled back"
    assert store_files(repo) == before


def test_a_path_through_a_symlink_out_of_the_workspace_is_never_followed(
        repo: Path, tmp_path: Path) -> None:
    """The link is the working tree's state, not an edited store: the rollback goes on,
    and what lies beyond the link is neither read as the agent's file nor deleted."""
    guard = Guard.open(repo)
    ckpt = guard.checkpoint("manual").checkpoint_id
    agent_call(guard, "Write", {"out/x.txt": ("file", b"agent\n", False)})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.txt").write_bytes(b"agent\n")       # the same bytes, outside
    (repo / "out" / "x.txt").unlink()
    (repo / "out").rmdir()
    (repo / "out").symlink_to(elsewhere)
    result = rollback_files(guard, ckpt)
    assert result.plan.unchanged == ["out/x.txt"], "absent here, as at the checkpoint"
    assert (result.restored, result.deleted, result.conflicts) == ([], [], [])
    assert (elsewhere / "x.txt").read_bytes() == b"agent\n"
    assert not (guard.store.conflicts_path).exists()


def test_the_quick_path_check_accepts_only_what_safe_relpath_returns_as_is(
        repo: Path, tmp_path: Path) -> None:
    """check_path's string-and-lstat shortcut never accepts a path safe_relpath would
    refuse or rewrite; each path is checked with the shared cache and without it."""
    guard = Guard.open(repo)
    (tmp_path / "elsewhere").mkdir()
    (repo / "out").symlink_to(tmp_path / "elsewhere")
    (repo / "in").symlink_to(repo / "src")
    (repo / "plainfile").write_bytes(b"x")
    names = ["src/app.py", "new/dir/x", "out/x.txt", "in/app.py", "../x", "src/../../x",
             "/tmp/gitguard-abs-x", "./src/app.py", "src//app.py", "src/", "src/./app.py",
             ".git/config", ".agent-runtime/ledger.jsonl", ".gitx/y", "plainfile/below",
             "caf\udce9/x", "a b/c\\d", ""]
    shared: dict[str, bool] = {}
    for name in names:
        outcomes = []
        for cache in (shared, {}, None):
            try:
                rollback.check_path(guard, name, "test", cache)
                outcomes.append("ok")
            except UnsafePath as exc:
                outcomes.append(exc.message)
        assert len(set(outcomes)) == 1, (name, outcomes)
        if rollback._plain(repo, name, {}):
            assert safe_relpath(guard.ws, name) == name
    assert rollback._plain(repo, "src/app.py", {}) and not rollback._plain(repo, "out/x", {})
    assert shared["out"] is False and shared["src"] is True


def test_the_watchers_user_record_makes_a_conflict(repo: Path) -> None:
    guard = Guard.open(repo)
    ckpt = guard.checkpoint("manual")
    agent_call(guard, "Edit", {"src/app.py": ("file", b"agent\n", False)}, ["src/app.py"])
    record = Attribution(path="src/app.py", owner="user", confidence="window",
                         at="2999-01-01T00:00:00.000Z")
    durable.append_jsonl(guard.store.root / "attribution.jsonl", [record.to_json()])
    result = rollback_files(guard, ckpt.checkpoint_id)
    assert [c.path for c in result.conflicts] == ["src/app.py"]
    assert "watcher" in (result.conflicts[0].reason or "")
    assert (repo / "src" / "app.py").read_bytes() == b"agent\n"


def test_a_crash_inside_the_apply_is_undone_by_rolling_back_to_the_safety(repo: Path) -> None:
    guard = Guard.open(repo)
    ckpt = guard.checkpoint("manual").checkpoint_id
    agent_call(guard, "Bash", {f"f{i}.txt": ("file", b"agent %d\n" % i, False)
                               for i in range(4)} | {"src/app.py": None})
    guard.close()
    before = tree_state(repo)
    proc = gg(repo, "rollback-files", "--to", ckpt, check=False,
              env={"GITGUARD_FAULT": "rollback.mid_apply"})
    assert proc.returncode == -signal.SIGKILL
    middle = tree_state(repo)
    assert middle != before and len(before) - len(middle) == 1, "killed after one write"
    rows = json.loads(gg(repo, "checkpoints", "--json").stdout)
    safety = [r["checkpointId"] for r in rows if r["kind"] == "pre_rollback"][-1]
    ledger = json.loads(gg(repo, "ledger", "--json").stdout)
    assert ledger[-1]["status"] == "started" and ledger[-1]["toolName"] == \
        "gitguard.rollback_files"
    gg(repo, "rollback-files", "--to", safety)
    assert tree_state(repo) == before


def test_a_crash_right_after_the_safety_checkpoint_writes_nothing(repo: Path) -> None:
    guard = Guard.open(repo)
    ckpt = guard.checkpoint("manual").checkpoint_id
    agent_call(guard, "Write", {"x.txt": ("file", b"agent\n", False)})
    guard.close()
    before = tree_state(repo)
    proc = gg(repo, "rollback-files", "--to", ckpt, check=False,
              env={"GITGUARD_FAULT": "rollback.after_safety"})
    assert proc.returncode == -signal.SIGKILL
    assert tree_state(repo) == before
    kinds = [r["kind"] for r in json.loads(gg(repo, "checkpoints", "--json").stdout)]
    assert kinds[-1] == "pre_rollback"
    done = json.loads(gg(repo, "rollback-files", "--to", ckpt, "--json").stdout)
    assert done["deleted"] == ["x.txt"] and not (repo / "x.txt").exists()


def test_a_plain_directory_rolls_back_too(tmp_path: Path) -> None:
    work = tmp_path / "plain"
    work.mkdir()
    (work / "mine.txt").write_text("mine\n")
    guard = Guard.open(work)
    ckpt = guard.checkpoint("manual").checkpoint_id
    agent_call(guard, "Write", {"out.txt": ("file", b"agent\n", False), "mine.txt": None})
    result = rollback_files(guard, ckpt)
    assert result.deleted == ["out.txt"] and result.restored == ["mine.txt"]
    assert tree_state(work) == {"mine.txt": ("file", b"mine\n", False)} | {
        p: v for p, v in tree_state(work).items() if p.startswith(".agent-runtime/")}


def test_unknown_checkpoint_is_a_user_error(repo: Path) -> None:
    gg(repo, "init")
    proc = gg(repo, "rollback-files", "--to", "ckpt_nope", check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: no checkpoint 'ckpt_nope'") and "Hint:" in proc.stderr


def test_python_api_runs_in_a_subprocess_without_the_cli(repo: Path) -> None:
    """The library never prints: a rollback from Python writes nothing to stdout."""
    guard = Guard.open(repo)
    ckpt = guard.checkpoint("manual").checkpoint_id
    agent_call(guard, "Write", {"x.txt": ("file", b"x\n", False)})
    script = ("import sys\nfrom gitguard.api import Guard\n"
              "from gitguard.rollback.rollback_files import "
              "rollback_files\nrollback_files(Guard.open(sys.argv[1]), sys.argv[2])\n")
    proc = subprocess.run([sys.executable, "-c", script, str(repo), ckpt], capture_output=True,
                          text=True, check=True)
    assert proc.stdout == "" and not (repo / "x.txt").exists()


def test_the_demo_chapter_rolls_back_and_merges(tmp_path: Path) -> None:
    out = gg(tmp_path, "demo", "--keep").stdout
    kept = Path(out.rsplit("kept ", 1)[1].strip())
    try:
        # The clone's git hooks autostart a daemon: the demo stops it before it ends.
        assert not list(kept.glob("*/.git/gitguard/daemon.pid")), "a daemon outlived the demo"
    finally:
        shutil.rmtree(kept, ignore_errors=True)
    assert "conflict: app.py (the user changed it after call_5 wrote it)" in out
    assert "deleted:  CHANGELOG.md, helpers.py" in out and "restored: VERSION" in out
    assert "|     return greet(name).lower()  # the user's tweak" in out
    assert "HEAD, index, branches, tags: unchanged" in out and "git fsck: clean" in out


def test_a_checkpoint_tree_naming_a_path_outside_is_refused(repo: Path) -> None:
    """A crashed call's changes come from its checkpoints' trees; a forged `..` entry there
    names a path outside the workspace and stops the rollback before anything is written."""
    guard = Guard.open(repo)
    target = guard.checkpoint("manual").checkpoint_id
    entry = guard.begin_call("Bash", {"command": "crashes"})          # never ended
    pre = guard.load_checkpoint(entry.pre_checkpoint_id or "")
    git_repo = guard.snap.repo
    escape = tree_edit.tree_with(git_repo, objects.EMPTY_TREE,
                               {"x": fileops.FileState(str(git_repo.create_blob(b"x")),
                                                       objects.REGULAR)})
    forged = guard.snap.tree_of(pre.snapshot_commit)
    body = git_repo.odb.read(forged)[1] + b"40000 ..\0" + bytes.fromhex(escape)
    tree = str(git_repo.odb.write(2, body))
    with guard.store.writing():
        checkpoints.write(guard.store, guard.snap, checkpoints.read_index(guard.store),
                          session_id=pre.session_id, kind="manual",
                          tree=TreeResult(tree, (), ()), ledger_seq=0)
    before = store_files(repo)
    with pytest.raises(UnsafePath, match=r"checkpoint ckpt_\w+ names '\.\./x'"):
        rollback_files(guard, target)
    assert store_files(repo) == before and not (repo.parent / "x").exists()


def test_a_call_a_crash_interrupted_is_seen_by_rollback_after_resume(repo: Path) -> None:
    """Resume closes the interrupted call's window with its own checkpoint; the call never
    recorded its patches, so what changed inside the window is read from the snapshots
    (and, being unprovable, is a conflict), not silently skipped."""
    target = gg(repo, "checkpoint", "--kind", "manual", "--step", "before").stdout.split()[0]
    gg(repo, "call", "begin", "--tool", "Bash", "--input", '{"command": "sed -i s/1/2/ src/*"}')
    (repo / "src" / "app.py").write_text("def main():\n    return 2  # half done\n")
    (repo / "made.txt").write_text("by the crashed call\n")
    gg(repo, "resume", "--json")        # the agent's process died before `call end`
    plan = json.loads(gg(repo, "rollback-files", "--to", target, "--dry-run", "--json",
                         check=False).stdout)
    assert sorted(c["path"] for c in plan["conflicts"]) == ["made.txt", "src/app.py"]
    assert (repo / "src" / "app.py").read_text() == "def main():\n    return 2  # half done\n"
