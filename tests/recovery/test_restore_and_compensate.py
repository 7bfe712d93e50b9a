"""restore-session and compensate through the real CLI: ledger records, argv never a shell."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from gitguard.api import Guard
from gitguard.storage import trace_log
from tests.helpers.commands import gg
from tests.helpers.gitstate import GitState
from tests.helpers.rollback import tree_state


def ledger_actions(repo: Path) -> list[dict[str, object]]:
    lines = (repo / ".git" / "gitguard" / "ledger.jsonl").read_bytes().splitlines()
    return [json.loads(line)["data"] for line in lines if b'"action":{' in line]


def test_restore_session_returns_state_and_messages_and_touches_no_file(
        repo: Path, state_of: GitState) -> None:
    (repo / "state.json").write_text('{"plan": ["a", "b"], "step": 2}')
    (repo / "msgs.json").write_text('[{"role": "user", "content": "caf\\u00e9"}]')
    ckpt = json.loads(gg(repo, "checkpoint", "--step", "step_2", "--state-file", "state.json",
                         "--messages-file", "msgs.json", "--json").stdout)["checkpointId"]
    gg(repo, "call", "begin", "--tool", "Write", "--input", "{}", "--writes", "x.txt")
    (repo / "x.txt").write_text("later work\n")
    gg(repo, "call", "end", "call_1", "--status", "succeeded")
    before = tree_state(repo)

    out = json.loads(gg(repo, "restore-session", "--to", ckpt, "--json").stdout)
    assert out["runState"] == {"plan": ["a", "b"], "step": 2}
    assert out["messages"] == [{"role": "user", "content": "caf\u00e9"}]
    assert out["branchPoint"]["checkpointId"] == ckpt and out["stepId"] == "step_2"
    assert [c["callId"] for c in out["callsAfter"]] == ["call_1"]
    assert tree_state(repo) == before
    state_of.assert_unchanged(repo)
    [action] = ledger_actions(repo)
    assert action["action"] == {"type": "restore_session", "checkpointId": ckpt}
    assert action["detail"]["branchPoint"]["ledgerSeq"] == out["branchPoint"]["ledgerSeq"]
    names = [e.name for e in trace_log.read(Guard.open(repo).store)]
    assert "recovery.restore_session" in names


RECORDER = """import json, sys
with open("compensated.json", "w") as fh:
    json.dump(sys.argv[1:], fh)
"""


def test_compensate_shows_then_runs_the_declared_argv_once(repo: Path,
                                                           state_of: GitState) -> None:
    (repo / "close_issue.py").write_text(RECORDER)
    (repo / ".gitguard.toml").write_text(
        "[tools.create_issue]\nidempotency = \"non_idempotent\"\nreplayPolicy = \"never\"\n"
        f"compensation = [{json.dumps(sys.executable)}, \"close_issue.py\", \"{{number}}\", "
        "\"--comment\", \"closing {title}\"]\n"
        "[tools.send_email]\nidempotency = \"non_idempotent\"\n"
        "cannotUndo = \"the email was delivered to the recipient\"\n")
    title = "x'; touch pwned; echo \"$(id)\" `id` && rm -rf ~"
    gg(repo, "call", "begin", "--tool", "create_issue", "--input", json.dumps({"title": title}))
    gg(repo, "call", "end", "call_1", "--status", "succeeded", "--result", '{"number": 42}')

    shown = gg(repo, "compensate", "call_1")
    assert "would run:" in shown.stdout and "close_issue.py 42 --comment" in shown.stdout
    assert not (repo / "compensated.json").exists(), "nothing runs without --yes"

    ran = json.loads(gg(repo, "compensate", "call_1", "--yes", "--json").stdout)
    assert ran["ran"] and ran["status"] == "succeeded"
    argv = json.loads((repo / "compensated.json").read_text())
    assert argv == ["42", "--comment", f"closing {title}"], "each value is one argument"
    assert not (repo / "pwned").exists()
    entries = {e["callId"]: e for e in json.loads(gg(repo, "ledger", "--json").stdout)}
    comp = entries[ran["compensationCallId"]]
    assert comp["compensates"] == "call_1" and comp["toolName"] == "gitguard.recovery.compensate"
    assert comp["idempotency"] == "non_idempotent" and comp["replayPolicy"] == "never"
    [action] = ledger_actions(repo)
    assert action["action"] == {"type": "compensate_external_action", "ledgerEntryId": "call_1"}
    assert action["detail"]["exitCode"] == 0

    again = gg(repo, "compensate", "call_1", "--yes", check=False)
    assert again.returncode == 4 and "already compensated" in again.stderr

    gg(repo, "call", "begin", "--tool", "send_email", "--input", '{"to": "a@b.c"}')
    gg(repo, "call", "end", "call_3", "--status", "succeeded")
    none = gg(repo, "compensate", "call_3", "--yes", check=False)
    assert none.returncode == 1
    assert none.stderr.startswith("Error: send_email (call_3) has no compensation: the email "
                                  "was delivered to the recipient")
    assert "Hint: undo it by hand where it happened" in none.stderr
    state_of.assert_unchanged(repo)


def test_a_placeholder_the_call_did_not_record_is_refused(repo: Path) -> None:
    (repo / ".gitguard.toml").write_text(
        "[tools.deploy]\ncompensation = [\"echo\", \"rollback\", \"{release}\"]\n")
    gg(repo, "call", "begin", "--tool", "deploy", "--input", '{"env": "prod"}')
    gg(repo, "call", "end", "call_1", "--status", "succeeded", "--result", "deployed")
    proc = gg(repo, "compensate", "call_1", check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("Error: the compensation needs {release}")
    assert "Hint: available: env" in proc.stderr
