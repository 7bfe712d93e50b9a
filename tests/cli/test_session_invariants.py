"""A scripted agent session through the real CLI; DESIGN.md invariants after every command."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gitguard.workspace import discover
from tests.helpers.commands import gg, git
from tests.helpers.gitstate import GitState, capture, fsck_clean


def porcelain(repo: Path) -> set[str]:
    out = subprocess.run(["git", "status", "--porcelain", "-uall"], cwd=repo, capture_output=True,
                         text=True, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"}).stdout
    return set(out.splitlines())


def test_scripted_session_keeps_every_invariant(repo: Path, state_of: GitState) -> None:
    before = porcelain(repo)
    agent_lines: set[str] = set()

    def step(*args: str) -> subprocess.CompletedProcess[str]:
        proc = gg(repo, *args)
        state_of.assert_unchanged(repo)
        assert porcelain(repo) - before <= agent_lines, "only the agent's own changes appear"
        return proc

    step("init")
    step("session", "start", "--id", "s1")
    begin = json.loads(step("call", "begin", "--tool", "Write", "--input",
                            '{"file_path": "src/new.py"}', "--writes", "src/new.py",
                            "--json").stdout)
    assert begin["status"] == "started" and begin["callId"] == "call_1"
    (repo / "src" / "new.py").write_text("print('new')\n")
    agent_lines.add("?? src/new.py")
    end = json.loads(step("call", "end", "call_1", "--status", "succeeded", "--json").stdout)
    assert [p["path"] for p in end["filePatches"]] == ["src/new.py"]
    assert end["filePatches"][0]["beforeHash"] is None

    step("call", "begin", "--tool", "Edit", "--input", '{"file_path": "src/app.py"}',
         "--writes", "src/app.py")
    (repo / "src" / "app.py").write_text("def main():\n    return 2\n")
    agent_lines.add(" M src/app.py")
    step("call", "end", "call_2", "--status", "succeeded", "--result", "edited")

    (repo / "state.json").write_text('{"plan": ["a", "b"], "step": 2}')
    agent_lines.add("?? state.json")
    (repo / "msgs.json").write_text('[{"role": "user", "content": "hi"}]')
    agent_lines.add("?? msgs.json")
    ckpt = json.loads(step("checkpoint", "--step", "step_2", "--state-file", "state.json",
                           "--messages-file", "msgs.json", "--json").stdout)
    assert ckpt["checkpointId"].startswith("ckpt_") and ckpt["runState"]["step"] == 2

    status = json.loads(step("status", "--json").stdout)
    owners = {d["path"]: (d["owner"], d["confidence"]) for d in status["dirty"]}
    assert owners["src/new.py"] == ("call_1", "exact")
    assert owners["src/app.py"] == ("call_2", "exact")
    assert owners["state.json"][0] == "user"

    ledger = json.loads(step("ledger", "--json").stdout)
    assert [(e["callId"], e["status"]) for e in ledger] == [("call_1", "succeeded"),
                                                            ("call_2", "succeeded")]
    checkpoints = json.loads(step("checkpoints", "--json").stdout)
    # call_2 began right after call_1 ended with nothing changed in between: call_1's post
    # checkpoint is call_2's pre (gitguard.snapshot.shared_checkpoint), named in the ledger like a
    # fresh one.
    assert [c["kind"] for c in checkpoints] == ["pre", "post", "post", "manual"]
    assert ledger[1]["preCheckpointId"] == ledger[0]["postCheckpointId"] == \
        checkpoints[1]["checkpointId"]
    step("verify")
    fsck_clean(repo)

    # The call's diff reverses cleanly with git apply -R.
    patch = gg(repo, "diff", "call_2").stdout
    subprocess.run(["git", "apply", "-R", "--check"], cwd=repo, input=patch.encode(), check=True)

    # Hidden refs point at commits and survive gc --prune=now.
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objecttype)", "refs/gitguard/")
    assert refs.strip() and all(line.endswith(" commit") for line in refs.splitlines())
    git(repo, "gc", "--prune=now", "-q")
    git(repo, "pack-refs", "--all")
    fsck_clean(repo)
    step("verify")
    for row in checkpoints:
        tree = git(repo, "ls-tree", "-r", row["snapshotCommit"])
        assert "src/app.py" in tree
    last = checkpoints[-1]["snapshotCommit"]
    assert git(repo, "show", f"{last}:src/app.py") == "def main():\n    return 2\n"


def test_push_and_clone_carry_no_gitguard_refs(repo: Path, tmp_path: Path) -> None:
    gg(repo, "call", "begin", "--tool", "Write", "--input", "{}", "--writes", "x.txt")
    (repo / "x.txt").write_text("x")
    gg(repo, "call", "end", "call_1", "--status", "succeeded")
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "push", "-q", str(remote), "main")
    git(repo, "push", "-q", "--all", str(remote))
    git(repo, "push", "-q", "--tags", str(remote))
    assert "refs/gitguard" not in git(remote, "for-each-ref")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    assert "refs/gitguard" not in git(clone, "for-each-ref")


def test_started_is_on_disk_when_begin_returns(repo: Path) -> None:
    """kill -9 right after `call begin` returns; a new process reads the started event."""
    script = (
        "import os, signal, sys\n"
        "from gitguard.api import Guard\n"
        "g = Guard.open(sys.argv[1])\n"
        "e = g.begin_call('send_email', {'to': 'a@b.c'})\n"
        "print(e.call_id, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(repo)], capture_output=True,
                          text=True)
    assert proc.returncode == -signal.SIGKILL
    call_id = proc.stdout.strip()
    ledger = json.loads(gg(repo, "ledger", "--json").stdout)
    assert [(e["callId"], e["status"]) for e in ledger] == [(call_id, "started")]


def test_plain_directory_uses_agent_runtime(tmp_path: Path) -> None:
    work = tmp_path / "plain"
    work.mkdir()
    (work / "notes.txt").write_text("mine\n")
    gg(work, "init")
    assert (work / ".agent-runtime" / "objects.git" / "HEAD").exists()
    gg(work, "call", "begin", "--tool", "Write", "--input", '{"file_path": "out.txt"}',
       "--writes", "out.txt")
    (work / "out.txt").write_text("agent\n")
    end = json.loads(gg(work, "call", "end", "call_1", "--status", "succeeded", "--json").stdout)
    assert [p["path"] for p in end["filePatches"]] == ["out.txt"]
    status = json.loads(gg(work, "status", "--json").stdout)
    assert status["git"] is False
    assert {d["path"]: d["owner"] for d in status["dirty"]} == {"out.txt": "call_1"}
    assert ".agent-runtime" not in gg(work, "diff", "call_1").stdout
    gg(work, "verify")


def test_session_resolution_prefers_flag_then_env_then_open(repo: Path) -> None:
    gg(repo, "session", "start", "--id", "open1")
    gg(repo, "call", "begin", "--tool", "Read", "--input", '{"file_path": "a"}')
    gg(repo, "call", "begin", "--tool", "Read", "--input", '{"file_path": "b"}',
       env={"GITGUARD_SESSION": "envsess"})
    gg(repo, "call", "begin", "--tool", "Read", "--input", '{"file_path": "c"}',
       "--session", "flagsess", env={"GITGUARD_SESSION": "envsess"})
    ledger = json.loads(gg(repo, "ledger", "--json").stdout)
    assert [e["sessionId"] for e in ledger] == ["open1", "envsess", "flagsess"]
    for sid in ("open1", "envsess", "flagsess"):
        assert git(repo, "rev-parse", f"refs/gitguard/sessions/{sid}").strip()


def test_messages_are_stored_once(repo: Path) -> None:
    from gitguard.api import Guard

    guard = Guard.open(repo)
    messages = [{"role": "user", "content": "same " * 50}]
    first = guard.checkpoint(messages=messages)
    for i in range(5):
        made = guard.checkpoint(messages=[*messages, {"role": "assistant", "content": str(i)}])
        assert made.message_refs[0] == first.message_refs[0]
    assert guard.messages(guard.load_checkpoint(first.checkpoint_id)) == messages
    git(repo, "gc", "--prune=now", "-q")
    assert guard.messages(guard.load_checkpoint(first.checkpoint_id)) == messages


def test_capture_sees_index_changes(repo: Path) -> None:
    """Guard against a vacuous invariant check: a real `git add` is detected."""
    before = capture(repo)
    (repo / "README.md").write_text("changed\n")
    git(repo, "add", "README.md")
    try:
        before.assert_unchanged(repo)
    except AssertionError as exc:
        assert "index" in str(exc)
    else:
        raise AssertionError("capture() missed a change of .git/index")


def test_a_store_above_a_ceiling_directory_is_not_found(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Discovery climbs to the nearest `.agent-runtime` as git climbs to `.git`, and stops
    where git does: it never enters a directory of GIT_CEILING_DIRECTORIES."""
    outer = tmp_path / "outer"
    work = outer / "shared" / "project"
    work.mkdir(parents=True)
    (outer / ".agent-runtime").mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", "")
    assert discover(work).root == outer
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(outer))
    assert discover(work).root == work
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(outer / "shared"))
    assert discover(work).root == work
