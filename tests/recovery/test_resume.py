"""Resume, explain, reconcile and the replay guard through the real CLI, on real repositories."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitguard import verify
from gitguard.api import Guard
from gitguard.demo.resume import chapter_resume
from gitguard.errors import ReplayRefused
from gitguard.storage.durable import read_jsonl
from tests.helpers.commands import gg, git
from tests.helpers.crashkit import make_repo, scratch_root
from tests.helpers.gitstate import GitState, capture

PUBLISH = '{"command": "npm publish"}'


@pytest.fixture
def repo() -> Iterator[Path]:
    """The conftest repository's shape, on tmpfs: these tests make many fsynced writes."""
    root = scratch_root()
    yield make_repo(root / "repo")
    shutil.rmtree(root, ignore_errors=True)


def store(repo: Path) -> Path:
    return repo / ".git" / "gitguard"


def trace_names(repo: Path) -> list[str]:
    return [r["name"] for r in read_jsonl(store(repo) / "trace.jsonl").records]


def assert_refused(proc: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert proc.returncode == 4, proc.stdout + proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith("Error: ") and all(p in first for p in parts), proc.stderr
    assert proc.stderr.splitlines()[1].startswith("Hint: ")


def test_replay_guard_refuses_names_the_earlier_call_and_records_overrides(
        repo: Path, state_of: GitState) -> None:
    with Guard.open(repo) as guard:
        guard.start_session("s1")
        finished = guard.end_call(guard.begin_call("Bash", json.loads(PUBLISH)).call_id,
                                  "succeeded", "+ pkg@1.0.0").finished_at
    ledger_before = (store(repo) / "ledger.jsonl").read_bytes()

    again = gg(repo, "call", "begin", "--tool", "Bash", "--input", PUBLISH, check=False)
    assert_refused(again, "already ran as call_1", f"(succeeded at {finished})",
                   "replay policy is never")
    assert "--force-replay" in again.stderr
    # --confirm is not enough for `never`, and --replay auto cannot lower the earlier policy.
    assert_refused(gg(repo, "call", "begin", "--tool", "Bash", "--input", PUBLISH, "--confirm",
                      check=False), "call_1")
    assert_refused(gg(repo, "call", "begin", "--tool", "Bash", "--input", PUBLISH, "--replay",
                      "auto", check=False), "call_1", "replay policy is never")
    assert (store(repo) / "ledger.jsonl").read_bytes() == ledger_before, "a refusal writes nothing"
    assert trace_names(repo).count("recovery.replay_refused") == 3

    forced = json.loads(gg(repo, "call", "begin", "--tool", "Bash", "--input", PUBLISH,
                           "--force-replay", "--json").stdout)
    assert (forced["callId"], forced["replayOf"], forced["note"]) == (
        "call_2", "call_1", "forced replay of call_1")
    assert Guard.open(repo).ledger()[1].replay_of == "call_1"
    state_of.assert_unchanged(repo)


def test_ask_needs_confirm_auto_proceeds_and_sessions_are_separate(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    mcp = {"title": "bug"}
    guard.end_call(guard.begin_call("mcp__github__create_issue", mcp).call_id, "succeeded")
    refused = gg(repo, "call", "begin", "--tool", "mcp__github__create_issue", "--input",
                 json.dumps(mcp), check=False)
    assert_refused(refused, "already ran as call_1", "replay policy is ask")
    assert "--confirm" in refused.stderr
    confirmed = json.loads(gg(repo, "call", "begin", "--tool", "mcp__github__create_issue",
                              "--input", json.dumps(mcp), "--confirm", "--json").stdout)
    assert confirmed["replayOf"] == "call_1" and confirmed["note"] is None
    # Idempotent reads repeat freely; another agent session is not this session's replay.
    for _ in range(2):
        guard.end_call(guard.begin_call("Read", {"file_path": "README.md"}).call_id, "succeeded")
    guard.begin_call("mcp__github__create_issue", mcp, session_id="s2")
    # A started (not yet ended) non-idempotent call blocks its own twin, too.
    try:
        guard.begin_call("mcp__github__create_issue", mcp, session_id="s2")
    except ReplayRefused as exc:
        assert "(started at" in exc.message
    else:
        raise AssertionError("a started mcp call was replayed")


def crashed_run(repo: Path) -> Guard:
    """A session that wrote a file, saved its state, failed a test run, and died while a
    non-idempotent call was running (the call was never ended)."""
    guard = Guard.open(repo)
    guard.start_session("s1")
    with guard.tool_call("Write", {"file_path": "src/new.py"}, writes=["src/new.py"],
                         step_id="step_1"):
        (repo / "src" / "new.py").write_text("print('new')\n")
    guard.checkpoint("manual", "step_1", state={"plan": ["write", "test", "mail"], "next": 2},
                     messages=[{"role": "user", "content": "ship it"}])
    call = guard.begin_call("Bash", {"command": "pytest -q"}, step_id="step_2")
    guard.end_call(call.call_id, "failed", "collected 3 items\nFAILED test_x - assert 1 == 2\n"
                   "1 failed, 2 passed in 0.1s\n")
    guard.begin_call("send_email", {"to": "ops@example.com", "subject": "released"},
                     step_id="step_3")
    guard.close()
    return guard


def test_resume_marks_uncertain_returns_state_and_is_idempotent(repo: Path) -> None:
    crashed_run(repo)
    (repo / "src" / "new.py").write_text("print('edited while the mail was going out')\n")
    before = capture(repo)
    first = gg(repo, "resume", "--json")
    result = json.loads(first.stdout)
    assert result["uncertain"] == ["call_3"] and result["doNotRepeat"] == ["call_3"]
    assert result["runState"] == {"plan": ["write", "test", "mail"], "next": 2}
    assert result["messages"] == [{"role": "user", "content": "ship it"}]
    # call_3 began right after call_2 ended: call_2's post checkpoint is call_3's pre too.
    assert result["checkpointKind"] == "post" and result["lastCompletedStep"] == "step_2"
    assert result["checkpointId"] == Guard.open(repo).ledger()[-1].pre_checkpoint_id
    assert [c["callId"] for c in result["calls"]] == ["call_2", "call_3"]
    # The mail call was running: whose change this is cannot be known.
    assert result["workspace"]["changed"] == [
        {"path": "src/new.py", "change": "M", "owner": "call_3", "confidence": "ambiguous"}]
    assert result["conflicts"] == []
    note = result["recoveryNote"]
    assert note.startswith("System resumed from checkpoint.\nCheckpoint: " +
                           result["checkpointId"] + "\nLast completed step: step_2.\n")
    assert ("Tool Bash(call_2) ran `pytest -q`: failed. Error summary: collected 3 items | "
            "FAILED test_x - assert 1 == 2 | 1 failed, 2 passed in 0.1s.") in note
    assert ("Tool send_email(call_3) started but its outcome is unknown: it is not idempotent; "
            "check the recipient's mailbox before doing anything.") in note
    assert note.endswith("Do not repeat: send_email(call_3).\n"
                         "Plan the next step from these observations.\n")
    assert {e.call_id: e.status for e in Guard.open(repo).ledger()}["call_3"] == "uncertain"

    ledger_after_first = (store(repo) / "ledger.jsonl").read_bytes()
    again = gg(repo, "resume", "--json")
    assert again.stdout == first.stdout, "resuming twice gives the same answer"
    assert (store(repo) / "ledger.jsonl").read_bytes() == ledger_after_first
    human = gg(repo, "resume")
    assert human.stdout == note
    before.assert_unchanged(repo)
    assert (repo / "src" / "new.py").read_text().startswith("print('edited")
    names = trace_names(repo)
    for name in ("recovery.checkpoint", "checkpoint.resume", "recovery.mark", "recovery.verify",
                 "recovery.resume"):
        assert name in names
    assert names.count("recovery.mark") == 1, "only the first resume had calls to settle"
    with Guard.open(repo) as guard:
        assert verify.report(guard.store, guard.snap).problems == []

    mail = '{"to": "ops@example.com", "subject": "released"}'
    assert_refused(gg(repo, "call", "begin", "--tool", "send_email", "--input", mail,
                      check=False), "already ran as call_3", "(uncertain at")


def test_explain_and_reconcile(repo: Path) -> None:
    crashed_run(repo)
    explained = json.loads(gg(repo, "explain", "--json").stdout)
    assert explained["ran"] == ["call_1", "call_2", "call_3"]
    assert explained["doNotRepeat"] == ["call_3"]
    assert explained["wouldMarkUncertain"] == ["call_3"]
    views = {c["callId"]: c for c in explained["calls"]}
    assert views["call_3"]["why"] == ("it started and has not ended; `send_email` sends email "
                                      "(non_idempotent); replay policy never")
    assert views["call_2"]["replayable"] and "failed" in views["call_2"]["why"]
    assert explained["checkpoint"]["kind"] == "post"      # call_2's post, call_3's pre
    assert "newest complete checkpoint of session s1" in explained["checkpoint"]["why"]
    human = gg(repo, "explain").stdout
    assert "call_3     started    send_email   DO NOT REPEAT" in human
    assert f"resume would use {explained['checkpoint']['checkpointId']}" in human

    early = gg(repo, "reconcile", "call_3", "--status", "failed", check=False)
    assert early.returncode == 1 and "still started" in early.stderr and "resume" in early.stderr
    Guard.open(repo).resume()
    settled = json.loads(gg(repo, "reconcile", "call_3", "--status", "failed", "--note",
                            "no mail in the sent folder", "--json").stdout)
    assert (settled["status"], settled["note"]) == ("failed", "no mail in the sent folder")
    assert settled["errorSummary"] == "no mail in the sent folder"
    twice = gg(repo, "reconcile", "call_3", "--status", "succeeded", check=False)
    assert twice.returncode == 1
    assert twice.stderr.startswith("Error: call call_3 is failed, not uncertain")
    assert "recovery.reconcile" in trace_names(repo)
    # Settled as failed, the mail may be sent again; nothing is left to avoid.
    with Guard.open(repo) as guard:
        assert guard.explain().to_json()["doNotRepeat"] == []
        guard.begin_call("send_email", {"to": "ops@example.com", "subject": "released"})
    assert gg(repo, "reconcile", "call_9", "--status", "failed", check=False).returncode == 1


def test_a_user_edit_of_the_agents_file_is_a_conflict(repo: Path, state_of: GitState) -> None:
    guard = Guard.open(repo)
    with guard.tool_call("Edit", {"file_path": "src/app.py"}, writes=["src/app.py"]):
        (repo / "src" / "app.py").write_text("def main():\n    return 2\n")
    # The user changed the agent's file after the agent's last checkpoint, and committed.
    (repo / "src" / "app.py").write_text("def main():\n    return 3\n")
    git(repo, "commit", "-qam", "user's fix")
    head = git(repo, "rev-parse", "HEAD").strip()
    after_commit = capture(repo)
    proc = gg(repo, "resume", "--json", check=False)
    assert proc.returncode == 5, proc.stderr
    assert "Conflicts pending: src/app.py" in proc.stderr
    result = json.loads(proc.stdout)
    conflict = result["conflicts"][0]
    assert (conflict["path"], conflict["resolution"]) == ("src/app.py", "pending")
    assert conflict["expectedHash"] != conflict["actualHash"]
    assert conflict["agentPatchRef"] == "artifacts/patch_call_1.diff"
    assert result["workspace"]["headMoved"] and result["workspace"]["headNow"] == head
    note = result["recoveryNote"]
    assert f"HEAD moved since the checkpoint: {state_of.head[:12]} -> {head[:12]}." in note
    assert "Conflict: src/app.py no longer holds what call_1 wrote" in note
    assert (repo / "src" / "app.py").read_text() == "def main():\n    return 3\n"
    after_commit.assert_unchanged(repo)


def test_corrupt_and_incomplete_checkpoints_are_skipped_and_reported(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    good = guard.checkpoint("manual", "step_1", state={"step": 1})
    bad = guard.checkpoint("manual", "step_2", state={"step": 2})
    path = store(repo) / "checkpoints" / f"{bad.checkpoint_id}.json"
    path.write_bytes(path.read_bytes().replace(b'"step":2', b'"step":9'))
    killed = gg(repo, "checkpoint", "--step", "step_3", check=False,
                env={"GITGUARD_FAULT": "checkpoint.before_index"})
    assert killed.returncode == -9
    orphan = sorted(p.name for p in (store(repo) / "checkpoints").glob("ckpt_*.json"))[-1]

    first = gg(repo, "resume", "--json")
    result = json.loads(first.stdout)
    assert result["checkpointId"] == good.checkpoint_id and result["runState"] == {"step": 1}
    aside = f"checkpoints/incomplete/{orphan}"
    assert result["skipped"] == [
        {"checkpointId": orphan.removesuffix(".json"), "file": aside,
         "reason": "is incomplete: it has no index row (a crash came between file and index)"},
        {"checkpointId": bad.checkpoint_id, "file": None,
         "reason": "is corrupt: sha256 mismatch"}]
    note = result["recoveryNote"]
    assert f"Skipped checkpoint file {aside}: it is incomplete: it has no index row" in note
    assert f"Skipped checkpoint {bad.checkpoint_id}: it is corrupt: sha256 mismatch." in note
    assert (store(repo) / aside).is_file(), "moved aside, never deleted"
    assert Guard.open(repo).resume().to_json() == result
    # A complete checkpoint after the crash (it reuses the id) makes the old tear moot.
    newer = guard.checkpoint("manual", "step_4")
    assert newer.checkpoint_id == orphan.removesuffix(".json")
    again = Guard.open(repo).resume()
    assert again.checkpoint_id == newer.checkpoint_id and "incomplete" not in again.note
    assert (store(repo) / aside).is_file()

    refused = gg(repo, "resume", "--checkpoint", bad.checkpoint_id, check=False)
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"Error: checkpoint {bad.checkpoint_id} cannot be used")
    unknown = gg(repo, "resume", "--checkpoint", "ckpt_nope", check=False)
    assert unknown.returncode == 1 and "no checkpoint 'ckpt_nope'" in unknown.stderr
    assert Guard.open(repo).resume(good.checkpoint_id).choice.why == "requested with --checkpoint"
    verified = json.loads(gg(repo, "verify", "--json", check=False).stdout)
    assert verified["problems"] == [f"checkpoint {bad.checkpoint_id} is corrupt: sha256 mismatch"]
    assert any("moved aside by resume" in n for n in verified["notes"])


def test_resume_with_nothing_recorded_is_a_user_error(repo: Path, tmp_path: Path) -> None:
    proc = gg(repo, "resume", check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: there is nothing to resume")
    assert "Traceback" not in proc.stderr


def test_resume_in_a_plain_directory(tmp_path: Path) -> None:
    work = tmp_path / "plain"
    work.mkdir()
    guard = Guard.open(work)
    guard.begin_call("Bash", {"command": "git push origin main"})
    guard.close()
    result = json.loads(gg(work, "resume", "--json").stdout)
    assert result["uncertain"] == ["call_1"] and result["workspace"]["headMoved"] is False
    assert "check the remote repository (`git ls-remote`)" in result["recoveryNote"]
    gg(work, "verify")


def test_classification_and_project_overrides_drive_the_guard(repo: Path) -> None:
    (repo / ".gitguard.toml").write_text(
        '[tools.deploy]\nidempotency = "non_idempotent"\nreplayPolicy = "never"\n'
        '[tools.Read]\nreplayPolicy = "ask"\n')
    guard = Guard.open(repo)
    for tool, tool_input in (("Bash", {"command": "ls && npm publish"}),
                             ("Bash", {"command": 'FOO=1 sudo sh -c "git push origin main"'}),
                             ("deploy", {"env": "prod"}), ("Read", {"file_path": "README.md"})):
        first = guard.begin_call(tool, tool_input)
        guard.end_call(first.call_id, "succeeded")
        try:
            guard.begin_call(tool, tool_input)
        except ReplayRefused as exc:
            assert f"already ran as {first.call_id}" in exc.message
        else:
            raise AssertionError(f"{tool} {tool_input} was replayed")
    entries = {e.call_id: e for e in guard.ledger()}
    assert "`npm publish` publishes a package" in entries["call_1"].classification_reason
    assert (entries["call_2"].idempotency, entries["call_2"].replay_policy) == (
        "non_idempotent", "never")
    assert "git push" in entries["call_2"].classification_reason
    assert entries["call_3"].classification_reason.startswith(
        "project override in .gitguard.toml for `deploy`")
    assert (entries["call_4"].idempotency, entries["call_4"].replay_policy) == (
        "idempotent", "ask")
    result = guard.resume()
    assert list(result.to_json()["doNotRepeat"]) == ["call_1", "call_2", "call_3", "call_4"]


def test_demo_chapter_kills_resumes_and_refuses(repo: Path) -> None:
    lines: list[str] = []
    with Guard.open(repo) as guard:
        guard.start_session("demo-session")
        chapter_resume(lines.append, repo, guard)
    text = "\n".join(lines)
    assert "then got kill -9 (exit -9)" in text
    assert "call_1 is started (durable before the tool ran)" in text
    assert "| Tool Bash(call_1) started but its outcome is unknown: it is not idempotent" in text
    assert "resume again: same answer: True" in text
    assert "Error: Bash with this input already ran as call_1 (uncertain at" in text
    assert "(exit code 4)" in text
    assert "-> succeeded; it stays on the do-not-repeat list" in text


def test_a_step_whose_post_checkpoint_was_written_is_completed_without_calls(
        repo: Path) -> None:
    """Issue 30 item 3: `checkpoint --kind post --step step_1` (no call), then two calls of
    step_2 interrupted: the last completed step is step_1, not "none yet"."""
    gg(repo, "init", "--no-hooks", "--no-daemon")
    gg(repo, "session", "start")
    gg(repo, "checkpoint", "--kind", "post", "--step", "step_1")
    for n in (1, 2):
        gg(repo, "call", "begin", "--tool", "Bash", "--step", "step_2",
           "--input", json.dumps({"command": f"make part{n}"}))
    note = json.loads(gg(repo, "resume", "--json").stdout)["recoveryNote"]
    assert "Last completed step: step_1.\n" in note
    assert note.count("started but its outcome is unknown") == 2
