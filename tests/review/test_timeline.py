"""`gitguard timeline`: the page and its --json, from a real store written by the real CLI.

The page is checked as a file here (self-contained, the data it embeds, secrets, bad
input); e2e/test_timeline_browser.py opens it in a real headless Chromium.
"""

from __future__ import annotations

import base64
import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.commands import gg, git
from tests.test_import_graph import graph

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def _call(repo: Path, tool: str, tool_input: dict[str, Any], *, writes: tuple[str, ...] = (),
          files: dict[str, bytes] | None = None, status: str = "succeeded",
          result: str | None = None, session: str | None = None) -> str:
    args = ["call", "begin", "--tool", tool, "--input", json.dumps(tool_input), "--json"]
    args += [a for w in writes for a in ("--writes", w)]
    args += ["--session", session] if session else []
    call_id = json.loads(gg(repo, *args).stdout)["callId"]
    for rel, data in (files or {}).items():
        (repo / rel).write_bytes(data)
    end = ["call", "end", call_id, "--status", status]
    gg(repo, *end, *(["--result", result] if result is not None else []))
    return str(call_id)


@pytest.fixture
def worked(repo: Path) -> Path:
    """Three calls of two sessions, a user edit between calls, a secret in an input."""
    gg(repo, "init", "--no-daemon")
    gg(repo, "session", "start", "--id", "s1", "--agent", "claude-code")
    _call(repo, "Edit", {"file_path": "src/app.py"}, writes=("src/app.py",),
          files={"src/app.py": b"def main():\n    return 2\n"}, session="s1")
    (repo / "notes.txt").write_text("the user's note\n")
    _call(repo, "Bash", {"command": f"export AWS_SECRET_ACCESS_KEY={SECRET}; make gen"},
          files={"gen.txt": b"generated\n"}, status="failed",
          result=f"error: AWS_SECRET_ACCESS_KEY={SECRET} refused", session="s1")
    gg(repo, "session", "start", "--id", "s2")
    _call(repo, "Write", {"file_path": "b.bin"}, writes=("b.bin",),
          files={"b.bin": b"\xff\xfe not utf-8 \x80\n"}, session="s2")
    return repo


def _document(repo: Path, *args: str) -> dict[str, Any]:
    value = json.loads(gg(repo, "timeline", "--json", *args).stdout)
    assert isinstance(value, dict)
    return value


def _embedded(page: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="timeline-data">(.*?)</script>',
                      page, re.S)
    assert found is not None
    value = json.loads(found.group(1))
    assert isinstance(value, dict)
    return value


def test_every_call_is_in_the_document_with_the_diff_gitguard_diff_prints(worked: Path) -> None:
    doc = _document(worked)
    assert doc["schema"] == "gitguard.timeline/1"
    ledger = json.loads(gg(worked, "ledger", "--json").stdout)
    assert [c["callId"] for c in doc["calls"]] == [e["callId"] for e in ledger]
    for call in doc["calls"]:
        shown = (base64.b64decode(call["diff"]) if call["diffEncoding"] == "base64"
                 else call["diff"].encode())
        raw = _diff_bytes(worked, call["callId"])      # what `gitguard diff CALL` prints
        assert raw and shown == raw and call["diffBytes"] == len(raw), call["callId"]
        entry = next(e for e in ledger if e["callId"] == call["callId"])
        assert call["undo"] == (f"gitguard -C {worked} rollback-files --to "
                                f"{entry['preCheckpointId']}")
        assert [f["path"] for f in call["files"]] == [p["path"] for p in entry["filePatches"]]
    binary = next(c for c in doc["calls"] if c["tool"] == "Write")
    assert binary["diffEncoding"] == "base64"      # not UTF-8: the bytes, not a guess
    failed = next(c for c in doc["calls"] if c["tool"] == "Bash")
    assert failed["status"] == "failed" and failed["durationMs"] is not None
    assert failed["idempotency"] and failed["replayPolicy"] and failed["classificationReason"]


def _diff_bytes(repo: Path, call_id: str) -> bytes:
    return subprocess.run([sys.executable, "-m", "gitguard", "diff", call_id], cwd=repo,
                          capture_output=True, check=True).stdout


def test_sessions_checkpoints_user_edits_and_the_working_tree_now(worked: Path) -> None:
    doc = _document(worked)
    sessions = {s["sessionId"]: s for s in doc["sessions"]}
    assert sessions["s1"]["calls"] == 2 and sessions["s1"]["agent"] == "claude-code"
    assert sessions["s1"]["statuses"] == {"succeeded": 1, "failed": 1}
    assert sessions["s2"]["calls"] == 1
    index = json.loads(gg(worked, "checkpoints", "--json").stdout)
    assert [k["checkpointId"] for k in doc["checkpoints"]] == [r["checkpointId"] for r in index]
    # each checkpoint's undo goes back to the one before it in its session's chain
    for earlier, later in zip(doc["checkpoints"], doc["checkpoints"][1:], strict=False):
        if earlier["sessionId"] == later["sessionId"]:
            assert later["undo"].endswith(f"--to {earlier['checkpointId']}")
    # the user's note, written between the two calls of s1, is an edit between them
    edits = [e for e in doc["userEdits"] if e["sessionId"] == "s1"]
    assert [(e["afterCallId"], [p["path"] for p in e["paths"]]) for e in edits] == [
        (doc["calls"][0]["callId"], ["notes.txt"])]
    status = json.loads(gg(worked, "status", "--json").stdout)
    assert [(d["path"], d["owner"]) for d in doc["workingTree"]] == [
        (d["path"], d["owner"]) for d in status["dirty"]]
    assert {d["path"]: d["ownerWords"] for d in doc["workingTree"]}["notes.txt"] == "the user"


def test_secrets_stay_redacted_as_in_the_ledger(worked: Path, tmp_path: Path) -> None:
    ledger = gg(worked, "ledger", "--json").stdout
    assert SECRET not in ledger and "[REDACTED:" in ledger
    text = gg(worked, "timeline", "--json").stdout
    page = (tmp_path / "page.html")
    gg(worked, "timeline", "-o", str(page))
    html = page.read_text()
    assert SECRET not in text and SECRET not in html
    entry = next(e for e in json.loads(ledger) if e["toolName"] == "Bash")
    shown = next(c for c in _document(worked)["calls"] if c["tool"] == "Bash")
    assert shown["summary"] == entry["summary"]                  # exactly as in the ledger
    assert shown["errorSummary"] == entry["errorSummary"] and "[REDACTED:" in shown["summary"]


def test_the_page_is_one_file_that_fetches_nothing_and_embeds_the_json(worked: Path,
                                                                     tmp_path: Path) -> None:
    out = gg(worked, "timeline", "-o", str(tmp_path / "t.html")).stdout.strip()
    assert out == str(tmp_path / "t.html")
    html = Path(out).read_text()
    assert "default-src 'none'" in html                     # the browser refuses any fetch
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:|//)""", html)
    assert "@import" not in html and "url(" not in html and "<link" not in html
    embedded = _embedded(html)
    printed = _document(worked)
    for doc in (embedded, printed):
        doc.pop("generatedAt")
    assert embedded == printed
    assert stat.S_IMODE(os.stat(out).st_mode) & 0o077 == 0      # it holds the session


def test_a_summary_holding_a_script_end_stays_data(repo: Path, tmp_path: Path) -> None:
    gg(repo, "init", "--no-daemon")
    nasty = "</script><script>document.title='owned'</script><!--"
    _call(repo, "Bash", {"command": f"echo '{nasty}'"})
    gg(repo, "timeline", "-o", str(tmp_path / "t.html"))
    html = (tmp_path / "t.html").read_text()
    assert html.count("<script") == 2 and nasty not in html
    assert nasty in _embedded(html)["calls"][0]["summary"]


def test_since_and_session_narrow_it(worked: Path) -> None:
    doc = _document(worked)
    assert {c["sessionId"] for c in _document(worked, "--session", "s2")["calls"]} == {"s2"}
    narrowed = _document(worked, "--session", "s2")
    assert [s["sessionId"] for s in narrowed["sessions"]] == ["s2"]
    assert {k["sessionId"] for k in narrowed["checkpoints"]} == {"s2"}
    third = doc["calls"][2]
    since = _document(worked, "--since", third["preCheckpointId"])
    assert [c["callId"] for c in since["calls"]] == [third["callId"]]
    assert since["narrowing"] == {"since": third["preCheckpointId"], "session": None}
    assert since["checkpoints"][0]["checkpointId"] == third["preCheckpointId"]


def _user_error(proc: Any, message: str) -> None:
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stderr.startswith(f"Error: {message}"), proc.stderr
    assert "\nHint: " in proc.stderr and "Traceback" not in proc.stderr


def test_bad_input_is_an_error_with_a_hint(worked: Path, tmp_path: Path) -> None:
    before = sorted((worked / ".git" / "gitguard").rglob("*"))
    _user_error(gg(worked, "timeline", "--since", "ckpt_nope", check=False),
                "no checkpoint 'ckpt_nope'")
    _user_error(gg(worked, "timeline", "--session", "nobody", check=False),
                "no session 'nobody'")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):      # root writes anywhere: a file in the way instead
            (tmp_path / "file").write_text("")
            target = tmp_path / "file" / "t.html"
        else:
            target = locked / "t.html"
        _user_error(gg(worked, "timeline", "-o", str(target), check=False),
                    f"cannot write the timeline to {target}")
    finally:
        locked.chmod(0o700)
    usage = gg(worked, "timeline", "-o", str(tmp_path), check=False)
    assert usage.returncode == 2 and "is a directory" in usage.stderr      # click's usage error
    _user_error(gg(worked, "timeline", "--json", "--open", check=False),
                "--json prints the data")
    empty = tmp_path / "bin"
    empty.mkdir()
    _user_error(gg(worked, "timeline", "--open", check=False, env={"PATH": str(empty)}),
                "no program to open the page with")
    assert sorted((worked / ".git" / "gitguard").rglob("*")) == before   # nothing written
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    git(fresh, "init", "-q")
    _user_error(gg(fresh, "timeline", check=False), "nothing is recorded for")


def test_open_hands_the_page_to_the_system_opener(worked: Path, tmp_path: Path) -> None:
    bin_dir, seen = tmp_path / "bin", tmp_path / "opened"
    bin_dir.mkdir()
    opener = bin_dir / "xdg-open"
    opener.write_text(f'#!/bin/sh\nprintf "%s" "$1" > {seen}.tmp && mv {seen}.tmp {seen}\n')
    opener.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    page = gg(worked, "timeline", "--open", env=env).stdout.strip()
    deadline = time.monotonic() + 30
    while not seen.exists() and time.monotonic() < deadline:    # the opener runs detached
        time.sleep(0.05)
    assert seen.read_text() == page and Path(page).is_file()
    assert Path(page).parent == worked / ".git" / "gitguard" / "timeline"


def test_nothing_on_the_hook_path_imports_the_timeline() -> None:
    edges = graph()
    seen: set[str] = set()
    todo = ["gitguard.hookmain", "gitguard.cli.entry", "gitguard.integrations.hookcli",
            "gitguard.integrations.claude_code", "gitguard.daemon.daemon", "gitguard.api"]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(edges.get(name, ()))
    assert not {m for m in seen if m.startswith("gitguard.review")}
    assert "gitguard.cli.commands.timeline" not in seen


def test_an_interrupted_call_is_uncertain_and_other_worktrees_are_named(repo: Path,
                                                                       tmp_path: Path) -> None:
    gg(repo, "init", "--no-daemon")
    _call(repo, "Write", {"file_path": "a.txt"}, writes=("a.txt",), files={"a.txt": b"a\n"})
    open_call = json.loads(gg(repo, "call", "begin", "--tool", "send_email", "--input",
                              '{"to": "ops@example.com"}', "--json").stdout)["callId"]
    gg(repo, "resume", "--json", check=False)         # the crash: the open call is uncertain
    other = tmp_path / "other"
    git(repo, "worktree", "add", "-q", str(other))
    calls = {c["callId"]: c for c in _document(repo)["calls"]}
    assert calls[open_call]["status"] == "uncertain" and calls[open_call]["marks"] == [
        "uncertain"]
    assert calls[open_call]["undo"] is not None       # its pre checkpoint was taken
    worktrees = _document(repo)["worktrees"]
    assert [(w["path"], w["current"], w["store"]) for w in worktrees] == [
        (str(repo), True, True), (str(other), False, False)]
    assert worktrees[1]["command"] == f"gitguard -C {other} timeline"
    gg(other, "init", "--no-daemon")
    seen = _document(other)["worktrees"]
    assert [(w["path"], w["current"], w["store"]) for w in seen] == [
        (str(other), True, True), (str(repo), False, True)]


def test_a_call_a_probe_settled_is_marked_probed(repo: Path) -> None:
    (repo / ".gitguard.toml").write_text('[tools.deploy]\nidempotency = "non_idempotent"\n'
                                         'replayPolicy = "never"\n'
                                         'probe = ["test", "-e", "deployed.flag"]\n')
    gg(repo, "init", "--no-daemon")
    call_id = json.loads(gg(repo, "call", "begin", "--tool", "deploy", "--input", "{}",
                            "--json").stdout)["callId"]
    (repo / "deployed.flag").write_text("")
    gg(repo, "resume", "--json", check=False)     # the crash; resume runs the probe
    call = next(c for c in _document(repo)["calls"] if c["callId"] == call_id)
    assert call["marks"] == ["probed"] and call["probeResult"] == "happened"
    assert call["status"] == "succeeded" and call["probedAt"]


def test_a_pending_conflict_comes_with_its_three_way_view(repo: Path) -> None:
    gg(repo, "init", "--no-daemon")
    _call(repo, "Edit", {"file_path": "src/app.py"}, writes=("src/app.py",),
          files={"src/app.py": b"def main():\n    return 2\n"})
    with (repo / "src" / "app.py").open("a") as fh:
        fh.write("# the user's line\n")
    pre = json.loads(gg(repo, "ledger", "--json").stdout)[0]["preCheckpointId"]
    assert gg(repo, "rollback-files", "--to", pre, check=False).returncode == 5
    [conflict] = _document(repo)["conflicts"]
    assert conflict["path"] == "src/app.py" and conflict["conflict"]["resolution"] == "pending"
    assert conflict["view"] == gg(repo, "conflicts", "show", "src/app.py").stdout
    assert conflict["current"] == (repo / "src" / "app.py").read_text()
    assert conflict["resolve"] == [f"gitguard -C {repo} conflicts resolve src/app.py {flag}"
                                   for flag in ("--keep-user", "--take-checkpoint", "--merge")]
