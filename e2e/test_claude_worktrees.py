"""Today's Claude Code (2.1.332) across worktrees, and two sessions at once (issue 29).

* `claude --worktree NAME` works in `.claude/worktrees/NAME`, a linked worktree inside
  the project: its calls are ledgered in that worktree's store, rollback there undoes
  them, and the project's own store and files are untouched.
* A subagent with `isolation: "worktree"` works in `.claude/worktrees/agent-...`: its
  calls go to that worktree (payload `cwd`; `CLAUDE_PROJECT_DIR` stays the project), and
  the project's snapshots and rollback never include its files, while the user edits the
  project meanwhile.
* Two sessions in one worktree, each running a long shell command while the other
  writes: one's rollback never lists or reverts the other's files.

Every test checks the ledger, the owners and the rollback result byte for byte.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.harness import VENV_BIN, Live, Repo, Run, bash, claude, claude_start, script_prompt

USER_LINE = "the user's line, written while the subagent worked\n"
ORIGINAL = {"app.py": "def main():\n    return 1\n", "NOTES.md": "# Notes\n\nfirst line\n",
            "README.md": "demo project\n"}


def gitguard_in(repo: Repo, where: Path, *args: str, check: bool = True
                ) -> subprocess.CompletedProcess[str]:
    """gitguard run in another worktree of the repository, with the repository's env."""
    proc = subprocess.run([str(VENV_BIN / "gitguard"), *args], cwd=where, env=repo.env,
                          text=True, capture_output=True, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"gitguard {' '.join(args)} in {where} -> {proc.returncode}\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def json_in(repo: Repo, where: Path, *args: str) -> Any:
    return json.loads(gitguard_in(repo, where, *args, "--json").stdout)


@pytest.fixture
def worktrees() -> Iterator[list[tuple[Repo, Path]]]:
    """Worktrees a test made (or Claude Code did): their daemons are stopped at the end."""
    made: list[tuple[Repo, Path]] = []
    yield made
    for repo, where in made:
        if where.is_dir():
            gitguard_in(repo, where, "daemon", "stop", check=False)


def _clean(repo: Repo, run: Run) -> None:
    assert run.returncode == 0, (run.returncode, run.stderr[-3000:])
    assert not run.hook_failures(), run.hook_failures()
    assert repo.hook_errors() == ""


def _files(root: Path) -> dict[str, bytes]:
    """Every file of the worktree at `root` but `.git` and the worktrees nested in it."""
    found: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel == ".git" or rel.startswith((".git/", ".claude/worktrees/")):
            continue
        if path.is_file() and not path.is_symlink():
            found[rel] = path.read_bytes()
    return found


def _attributed(where: Path) -> set[str]:
    """The paths the store of the worktree at `where` recorded an owner for
    (attribution.jsonl, one checksummed row each)."""
    git_dir = subprocess.run(["git", "rev-parse", "--absolute-git-dir"], cwd=where, text=True,
                             capture_output=True, check=True).stdout.strip()
    path = Path(git_dir) / "gitguard" / "attribution.jsonl"
    if not path.exists():
        return set()
    return {json.loads(line)["data"]["path"] for line in path.read_text().splitlines()}


def _owners(repo: Repo, where: Path) -> dict[str, tuple[str, str]]:
    return {d["path"]: (d["owner"], d["confidence"])
            for d in json_in(repo, where, "status")["dirty"]}


def _first_checkpoint(repo: Repo, where: Path, session: str | None = None) -> str:
    rows = json_in(repo, where, "checkpoints")
    return str(next(r["checkpointId"] for r in rows
                    if session is None or r.get("sessionId") == session))


def _rollback(repo: Repo, where: Path, checkpoint: str) -> dict[str, Any]:
    done = gitguard_in(repo, where, "rollback-files", "--to", checkpoint, "--json", check=False)
    assert done.returncode in (0, 5), (done.stdout, done.stderr)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


# --- claude --worktree NAME ---------------------------------------------------------------

def test_claude_worktree_is_guarded_in_its_own_store(make_repo: Any,
                                                     worktrees: list[tuple[Repo, Path]]
                                                     ) -> None:
    repo: Repo = make_repo(daemon=True)
    wt = repo.root / ".claude" / "worktrees" / "feat"
    worktrees.append((repo, wt))
    main_before = _files(repo.root)
    run = claude(repo, "work in a worktree", [
        {"tools": [bash("echo there > there.txt")]},
        {"tools": [{"name": "Write", "input": {"file_path": str(wt / "w.txt"),
                                               "content": "written\n"}}]},
        {"tools": [bash("echo appended >> NOTES.md; python3 -c \"open('made.txt', 'w')"
                        ".write('made\\n')\"")]},
        {"text": "done"}], "--worktree", "feat")
    _clean(repo, run)
    assert (wt / ".git").is_file(), "Claude Code made a linked worktree"

    ledger = {e["summary"]: e for e in json_in(repo, wt, "ledger")}
    assert set(ledger) == {"echo there > there.txt", str(wt / "w.txt"),
                           "echo appended >> NOTES.md; python3 -c \"open('made.txt', 'w')"
                           ".write('made\\n')\""}, ledger
    assert all(e["status"] == "succeeded" and e["sessionId"] == run.session_id
               for e in ledger.values()), ledger
    patches = {s: sorted(p["path"] for p in e["filePatches"]) for s, e in ledger.items()}
    assert sorted(patches.values()) == [["NOTES.md", "made.txt"], ["there.txt"], ["w.txt"]]
    ids = {s: e["callId"] for s, e in ledger.items()}
    owners = _owners(repo, wt)
    write_id = ids[str(wt / "w.txt")]
    shell_id = next(i for s, i in ids.items() if s.startswith("echo appended"))
    assert owners == {"there.txt": (ids["echo there > there.txt"], "window"),
                      "w.txt": (write_id, "exact"), "NOTES.md": (shell_id, "window"),
                      "made.txt": (shell_id, "window")}, owners

    # The project's own store saw nothing: no call, no owner, its files as they were.
    assert repo.ledger() == []
    assert not any(p.startswith(".claude/worktrees/") for p in _attributed(repo.root))
    assert {d["path"] for d in repo.gg_json("status")["dirty"]} == {
        ".claude/settings.local.json"}
    assert _files(repo.root) == main_before

    # The session, asked for from the project, is shown where it worked.
    across = json_in(repo, repo.root, "ledger", "--session", run.session_id)
    assert {(e["summary"], e["worktree"]) for e in across} == {(s, str(wt)) for s in ledger}
    [touched] = json_in(repo, repo.root, "status", "--session",
                        run.session_id)["sessionWorktrees"]
    assert (touched["worktree"], touched["current"], touched["calls"]) == (str(wt), False, 3)
    assert {d["path"]: d["owner"] for d in touched["dirty"]} == {
        p: o for p, (o, _c) in owners.items()}

    result = _rollback(repo, wt, _first_checkpoint(repo, wt))
    assert result["conflicts"] == [], result
    assert sorted(result["deleted"]) == ["made.txt", "there.txt", "w.txt"], result
    assert sorted(result["restored"]) == ["NOTES.md"], result
    assert _files(wt) == {k: v.encode() for k, v in ORIGINAL.items()}
    assert _files(repo.root) == main_before


# --- a subagent with isolation: "worktree" ------------------------------------------------

def test_an_isolated_subagent_works_in_its_own_nested_worktree(
        make_repo: Any, worktrees: list[tuple[Repo, Path]]) -> None:
    repo: Repo = make_repo(daemon=True)
    unpredictable = "python3 -c \"open('made.txt', 'w').write('made by a script\\n')\""
    sub = [{"tools": [bash("echo from the subagent > sub.txt; pwd")]},
           {"pause": "user-edits", "tools": [bash("echo appended >> NOTES.md")]},
           {"tools": [bash(unpredictable)]},
           {"text": "sub done"}]
    agent = {"name": "Agent", "input": {
        "description": "Isolated helper", "subagent_type": "general-purpose",
        "isolation": "worktree", "run_in_background": False,
        "prompt": script_prompt("Do the work.", sub)}}
    live = claude_start(repo, "delegate", [{"tools": [agent]}, {"text": "main done"}])
    repo.server.wait_paused("user-edits")
    # The user edits the project while the subagent works in its nested worktree.
    repo.write("README.md", repo.read("README.md") + USER_LINE)
    repo.write("mine.txt", USER_LINE)
    repo.server.release("user-edits")
    run = live.finish(timeout=240)
    _clean(repo, run)

    pwd = next(r for r in run.tool_results() if "/.claude/worktrees/" in str(r.get("content")))
    nested = Path(str(pwd["content"]).strip().splitlines()[-1])
    worktrees.append((repo, nested))
    assert nested.parent == repo.root / ".claude" / "worktrees", nested
    assert nested.name.startswith("agent-") and (nested / ".git").is_file(), nested

    # The subagent's calls are its worktree's: ledgered there, with its agent id.
    there = {e["summary"]: e for e in json_in(repo, nested, "ledger")}
    assert set(there) == {"echo from the subagent > sub.txt; pwd", "echo appended >> NOTES.md",
                          unpredictable}, there
    assert all(e["agentId"] and e["agentType"] == "general-purpose"
               and e["status"] == "succeeded" and e["sessionId"] == run.session_id
               for e in there.values()), there
    assert {s: sorted(p["path"] for p in e["filePatches"]) for s, e in there.items()} == {
        "echo from the subagent > sub.txt; pwd": ["sub.txt"],
        "echo appended >> NOTES.md": ["NOTES.md"], unpredictable: ["made.txt"]}
    ids = {s: e["callId"] for s, e in there.items()}
    assert _owners(repo, nested) == {
        "sub.txt": (ids["echo from the subagent > sub.txt; pwd"], "window"),
        "NOTES.md": (ids["echo appended >> NOTES.md"], "window"),
        "made.txt": (ids[unpredictable], "window")}

    # The project's store has the delegation (owning nothing) and the user's edits only.
    here = repo.ledger()
    assert [e["toolName"] for e in here] == ["Agent"] and here[0]["filePatches"] == [], here
    assert not any(p.startswith(".claude/worktrees/") for p in _attributed(repo.root))
    owners = _owners(repo, repo.root)
    assert {p: o for p, (o, _c) in owners.items()} == {
        ".claude/settings.local.json": "user", "README.md": "user", "mine.txt": "user"}, owners
    # SubagentStart and SubagentStop come from the nested worktree (their cwd): the
    # subagent is listed, ended, in the store that holds its calls.
    assert [s.get("subagents") for s in repo.gg_json("session", "list")] == [[]]
    [subagent] = [a for s in json_in(repo, nested, "session", "list")
                  for a in s.get("subagents", [])]
    assert subagent["agentId"] == next(iter(there.values()))["agentId"], subagent
    assert subagent["endedAt"] is not None, subagent

    # One session across both worktrees: the delegation here, its subagent's calls there.
    across = json_in(repo, repo.root, "ledger", "--session", run.session_id)
    assert [(e["toolName"], e["worktree"]) for e in across] == [
        ("Agent", str(repo.root)), *[("Bash", str(nested))] * 3], across
    touched = json_in(repo, nested, "status", "--session", run.session_id)["sessionWorktrees"]
    assert [(t["worktree"], t["current"], t["calls"]) for t in touched] == [
        (str(repo.root), False, 1), (str(nested), True, 3)], touched
    assert touched[0]["dirty"] == [], "the user's edits in the project are not the session's"
    assert [a["agentId"] for a in touched[1]["subagents"]] == [subagent["agentId"]]
    # SessionEnd came to the project; the session is ended in the nested worktree too.
    assert [t["endedAt"] is not None for t in touched] == [True, True], touched
    assert {d["path"] for d in touched[1]["dirty"]} == {"sub.txt", "NOTES.md", "made.txt"}

    # Rolling the project back touches neither the user's edits nor the nested worktree.
    nested_before = _files(nested)
    result = _rollback(repo, repo.root, _first_checkpoint(repo, repo.root))
    assert result["conflicts"] == [] and result["restored"] == [] \
        and result["deleted"] == [], result
    assert repo.read("README.md") == "demo project\n" + USER_LINE
    assert repo.read("mine.txt") == USER_LINE
    assert _files(nested) == nested_before

    # Rolling the nested worktree back undoes the subagent's work there, all of it.
    result = _rollback(repo, nested, _first_checkpoint(repo, nested))
    assert result["conflicts"] == [], result
    assert sorted(result["deleted"]) == ["made.txt", "sub.txt"], result
    assert result["restored"] == ["NOTES.md"], result
    assert _files(nested) == {k: v.encode() for k, v in ORIGINAL.items()}
    assert repo.read("README.md") == "demo project\n" + USER_LINE
    assert repo.read("mine.txt") == USER_LINE


# --- two sessions at once -----------------------------------------------------------------

def _until(what: str, check: Any, lives: list[Live], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        for live in lives:
            assert live.proc.poll() is None, (what, live.run.stderr, live.err)
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


SCRIPT = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text(sys.argv[2] + chr(10))"


def _two_sessions(repo: Repo, a_first: str, a_then: str, b_first: str, b_then: str
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Session A runs `a_first`, waits, runs `a_then`; B starts once A's first write is
    there, runs `b_first` (while A's command still runs), waits, runs `b_then` (after A
    ended). Returns the ledger entries of A's and B's command."""
    gates = repo.home / "gates"
    gates.mkdir()

    def wait_gate(name: str) -> str:
        return f"while [ ! -e {gates / name} ]; do sleep 0.05; done"

    a = claude_start(repo, "session A", [{"tools": [bash(f"{a_first}; {wait_gate('a')}; "
                                                         f"{a_then}")]}, {"text": "A done"}])
    _until("A wrote a1.txt", lambda: (repo.root / "a1.txt").exists(), [a])
    b = claude_start(repo, "session B", [{"tools": [bash(f"{b_first}; {wait_gate('b')}; "
                                                         f"{b_then}")]}, {"text": "B done"}])
    _until("B wrote b1.txt", lambda: (repo.root / "b1.txt").exists(), [a, b])
    (gates / "a").touch()                 # A writes again while B's command still runs
    run_a = a.finish(timeout=240)
    _clean(repo, run_a)
    (gates / "b").touch()                 # B writes once more, alone
    run_b = b.finish(timeout=240)
    _clean(repo, run_b)
    assert run_a.session_id != run_b.session_id
    ledger = {e["sessionId"]: e for e in repo.ledger()}
    assert set(ledger) == {run_a.session_id, run_b.session_id}, ledger
    assert all(e["status"] == "succeeded" for e in ledger.values()), ledger
    return ledger[run_a.session_id], ledger[run_b.session_id]


def _session_rollback(repo: Repo, call: dict[str, Any]) -> dict[str, Any]:
    """Roll back to the first checkpoint of the call's session (undoing that session's
    calls only)."""
    return _rollback(repo, repo.root, _first_checkpoint(repo, repo.root, call["sessionId"]))


def _listed(result: dict[str, Any]) -> set[str]:
    return ({c["path"] for c in result["conflicts"]} | set(result["restored"])
            | set(result["deleted"]))


def test_two_sessions_running_long_commands_each_roll_back_only_their_own(
        make_repo: Any, daemon: bool) -> None:
    """A runs a predictable command (its redirections name what it writes); B runs an
    unpredictable one (a script). Each writes while the other's command runs; then each
    session's rollback undoes its own writes and never lists or reverts the other's."""
    repo: Repo = make_repo(daemon=daemon)
    call_a, call_b = _two_sessions(
        repo, "echo A1 > a1.txt", "echo A2 > a2.txt; echo A >> NOTES.md",
        f"python3 -c '{SCRIPT}' b1.txt B1", f"python3 -c '{SCRIPT}' b2.txt B2")
    # A call's patches hold only its own writes, never the other session's.
    assert sorted(p["path"] for p in call_a["filePatches"]) == ["NOTES.md", "a1.txt",
                                                                "a2.txt"], call_a
    assert sorted(p["path"] for p in call_b["filePatches"]) == ["b1.txt", "b2.txt"], call_b
    a_id, b_id = call_a["callId"], call_b["callId"]
    # b1.txt changed while both commands ran: only B's script can have written it (A's
    # words name its files), but with the daemon a change in overlapping windows that no
    # call declared is never a `window` guess: B's, ambiguous.
    b1 = (b_id, "ambiguous") if daemon else (b_id, "window")
    assert _owners(repo, repo.root) == {
        ".claude/settings.local.json": ("user", "window"),
        "a1.txt": (a_id, "window"), "a2.txt": (a_id, "window"), "NOTES.md": (a_id, "window"),
        "b1.txt": b1, "b2.txt": (b_id, "window")}

    # A's rollback: its own files back, B's neither listed nor touched.
    result_a = _session_rollback(repo, call_a)
    assert result_a["conflicts"] == [], result_a
    assert sorted(result_a["deleted"]) == ["a1.txt", "a2.txt"], result_a
    assert result_a["restored"] == ["NOTES.md"], result_a
    assert repo.read("NOTES.md") == ORIGINAL["NOTES.md"]
    assert repo.read("b1.txt") == "B1\n" and repo.read("b2.txt") == "B2\n"

    # B's rollback: its files, never A's; b1.txt, ambiguous, is its conflict to decide.
    result_b = _session_rollback(repo, call_b)
    assert not _listed(result_b) & {"a1.txt", "a2.txt", "NOTES.md"}, result_b
    if daemon:
        assert result_b["deleted"] == ["b2.txt"], result_b
        assert [(c["path"], c["callId"]) for c in result_b["conflicts"]] == [
            ("b1.txt", b_id)], result_b
        repo.gitguard("conflicts", "resolve", "b1.txt", "--take-checkpoint")
    else:
        assert sorted(result_b["deleted"]) == ["b1.txt", "b2.txt"], result_b
        assert result_b["conflicts"] == [], result_b
    assert _files(repo.root) == {**{k: v.encode() for k, v in ORIGINAL.items()},
                                 ".claude/settings.local.json":
                                 (repo.root / ".claude/settings.local.json").read_bytes()}


def test_two_unpredictable_commands_at_once_own_their_overlap_together(make_repo: Any) -> None:
    """Two sessions' scripts run at once: a write made while both ran is one neither can
    account for alone, so it is `ambiguous` for both (never "the last one's"); each
    session's rollback reverts what only it can have written, and leaves the shared writes
    as conflicts, never restored. What one wrote alone the other never lists."""
    repo: Repo = make_repo(daemon=True)
    call_a, call_b = _two_sessions(
        repo, f"python3 -c '{SCRIPT}' a1.txt A1", f"python3 -c '{SCRIPT}' a2.txt A2",
        f"python3 -c '{SCRIPT}' b1.txt B1", f"python3 -c '{SCRIPT}' b2.txt B2")
    a_id, b_id = call_a["callId"], call_b["callId"]
    assert sorted(p["path"] for p in call_a["filePatches"]) == ["a1.txt", "a2.txt",
                                                                "b1.txt"], call_a
    assert sorted(p["path"] for p in call_b["filePatches"]) == ["a2.txt", "b1.txt",
                                                                "b2.txt"], call_b
    owners = _owners(repo, repo.root)
    assert owners["a1.txt"] == (a_id, "window") and owners["b2.txt"] == (b_id, "window")
    assert {owners["a2.txt"][1], owners["b1.txt"][1]} == {"ambiguous"}, owners

    before = _files(repo.root)
    result_a = _session_rollback(repo, call_a)
    assert result_a["deleted"] == ["a1.txt"] and result_a["restored"] == [], result_a
    assert sorted(c["path"] for c in result_a["conflicts"]) == ["a2.txt", "b1.txt"]
    assert "b2.txt" not in _listed(result_a), result_a
    assert _files(repo.root) == {k: v for k, v in before.items() if k != "a1.txt"}
    result_b = _session_rollback(repo, call_b)
    assert result_b["deleted"] == ["b2.txt"] and result_b["restored"] == [], result_b
    assert sorted(c["path"] for c in result_b["conflicts"]) == ["a2.txt", "b1.txt"]
    assert "a1.txt" not in _listed(result_b), result_b
    assert _files(repo.root) == {k: v for k, v in before.items()
                                 if k not in ("a1.txt", "b2.txt")}


# --- CwdChanged's cost ---------------------------------------------------------------------

def test_cwd_changed_through_the_integrated_hook_command(make_repo: Any,
                                                         worktrees: list[tuple[Repo, Path]]
                                                         ) -> None:
    """Claude Code reports no hook_started/hook_response for CwdChanged in its stream, so
    its latency is timed here around the very command `integrate claude-code` wrote, fed
    the captured payload (fixtures/claude_code/cwd_changed.json) as Claude Code feeds it,
    with the daemons running; the table lists it as `CwdChanged*`. Each move is kept."""
    from e2e.harness import HOOK_LATENCY, ROOT, git

    repo: Repo = make_repo(daemon=True)
    other = repo.root.parent / "wt"
    git(repo.root, "worktree", "add", "-q", str(other), "-b", "side", env=repo.env)
    worktrees.append((repo, other))
    settings = json.loads((repo.root / ".claude" / "settings.local.json").read_text())
    [group] = settings["hooks"]["CwdChanged"]
    command = group["hooks"][0]["command"]
    captured = (ROOT / "fixtures" / "claude_code" / "cwd_changed.json").read_text()
    moves = [(repo.root, other), (other, repo.root)] * 6
    for old, new in moves:
        event = json.loads(captured.replace("/home/user/project", str(old))
                           .replace("/home/user/wt", str(new)))
        began = time.monotonic()
        proc = subprocess.run(["sh", "-c", command], cwd=repo.root, input=json.dumps(event),
                              env={**repo.env, "CLAUDE_PROJECT_DIR": str(repo.root)},
                              capture_output=True, text=True, timeout=60)
        HOOK_LATENCY.append((repo.mode, "CwdChanged*", (time.monotonic() - began) * 1000))
        assert proc.returncode == 0 and json.loads(proc.stdout) == {}, proc
    assert repo.hook_errors() == ""
    session = json.loads(captured)["session_id"]
    for where, arrived in ((other, 6), (repo.root, 6)):
        [found] = json_in(repo, where, "session", "list")
        assert found["sessionId"] == session
        assert [m["toDir"] for m in found["moves"]] == [str(where)] * arrived, found
