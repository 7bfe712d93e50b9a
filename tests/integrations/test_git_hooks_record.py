"""What the installed git hooks record: the user's baseline moves, and agent patches per commit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gitguard.api import Guard
from gitguard.ledger import git_moves
from tests.helpers.commands import gg, git
from tests.helpers.hooks import run_git, with_branch_and_remote


def git_status(repo: Path) -> dict[str, Any]:
    """What `status --json` shows under gitEvents, read in-process (the hooks ran as git's)."""
    return git_moves.summary(Guard.open(repo).store)


def sha(repo: Path, rev: str) -> str:
    return git(repo, "rev-parse", rev).strip()


def test_checkout_is_the_users_git_operation(repo: Path) -> None:
    with_branch_and_remote(repo)
    gg(repo, "hooks", "install")
    with Guard.open(repo).tool_call("Edit", {"file_path": "src/app.py"}, writes=["src/app.py"]):
        (repo / "src" / "app.py").write_text("def main():\n    return 2\n")
    main, other = sha(repo, "main"), sha(repo, "other")

    checkout = run_git(repo, "checkout", "-q", "other")
    assert checkout.returncode == 0, checkout.stderr
    status = json.loads(gg(repo, "status", "--json").stdout)
    move = status["gitEvents"]["moves"][-1]
    assert (move["hook"], move["kind"], move["oldHead"], move["newHead"], move["branch"]) == \
        ("post-checkout", "checkout", main, other, "other")
    assert (move["owner"], move["confidence"]) == ("user", "exact")
    assert sorted(move["paths"]) == ["README.md", "b.txt"]
    # The agent's edit came along and is still the agent's; the branch's files are git's.
    assert {d["path"]: d["owner"] for d in status["dirty"]} == {"src/app.py": "call_1"}
    rows = [r for r in Guard.open(repo).checkpoints() if r.checkpoint_id == move["checkpointId"]]
    assert [(r.session_id, r.step_id, r.kind) for r in rows] == \
        [("git-user", "git:post-checkout", "manual")]
    assert run_git(repo, "commit", "-qam", "agent edit").returncode == 0
    human = gg(repo, "status").stdout
    assert f"git post-checkout: checkout {main[:10]} -> {other[:10]} on other" in human
    assert "    src/app.py <- call_1" in human


def test_git_run_by_an_agent_call_belongs_to_the_call(repo: Path) -> None:
    with_branch_and_remote(repo)
    gg(repo, "hooks", "install")
    guard = Guard.open(repo)

    ran = gg(repo, "run", "--", "git", "checkout", "-q", "other")
    assert ran.returncode == 0
    call = guard.ledger()[-1]
    move = git_status(repo)["moves"][-1]
    assert (move["owner"], move["confidence"]) == (call.call_id, "exact")

    # Claude Code's Bash tool marks its commands with CLAUDECODE=1.
    begun = guard.begin_call("Bash", {"command": "git checkout main"})
    assert run_git(repo, "checkout", "-q", "main", env={"CLAUDECODE": "1"}).returncode == 0
    move = git_status(repo)["moves"][-1]
    assert (move["owner"], move["confidence"]) == (begun.call_id, "window")
    # Without a marker, git ran in the user's shell while the call was open.
    assert run_git(repo, "checkout", "-q", "other").returncode == 0
    move = git_status(repo)["moves"][-1]
    assert (move["owner"], move["confidence"]) == ("user", "ambiguous")
    guard.end_call(begun.call_id, "succeeded")


def test_commit_records_which_agent_patches_it_holds(repo: Path) -> None:
    gg(repo, "hooks", "install")
    with Guard.open(repo).tool_call("Write", {"file_path": "src/new.py"}, writes=["src/new.py"]):
        (repo / "src" / "new.py").write_text("print('agent')\n")
    (repo / "notes.txt").write_text("mine\n")
    before = sha(repo, "HEAD")
    git(repo, "add", "src/new.py", "notes.txt")
    assert run_git(repo, "commit", "-qm", "agent and user work").returncode == 0
    head = sha(repo, "HEAD")

    found = git_status(repo)
    commit = found["commits"][-1]
    assert (commit["commit"], commit["parent"], commit["branch"]) == (head, before, "main")
    assert [(p["path"], p["callId"]) for p in commit["agentPatches"]] == [("src/new.py", "call_1")]
    assert commit["userPaths"] == ["notes.txt"]
    move = found["moves"][-1]
    assert (move["kind"], move["oldHead"], move["newHead"], move["owner"]) == \
        ("commit", before, head, "user")

    assert run_git(repo, "commit", "-q", "--amend", "-m", "reworded").returncode == 0
    amend = [m for m in git_status(repo)["moves"] if m["kind"] == "amend"]
    assert [(m["oldHead"], m["newHead"]) for m in amend] == [(head, sha(repo, "HEAD"))]


def test_merge_and_rebase_are_recorded_once_each(repo: Path) -> None:
    with_branch_and_remote(repo)
    gg(repo, "hooks", "install")
    main, other = sha(repo, "main"), sha(repo, "other")
    assert run_git(repo, "merge", "-q", "--ff-only", "other").returncode == 0
    merge = git_status(repo)["moves"][-1]
    assert (merge["hook"], merge["oldHead"], merge["newHead"]) == ("post-merge", main, other)
    assert sorted(merge["paths"]) == ["README.md", "b.txt"]

    git(repo, "reset", "-q", "--hard", main)
    for name in ("c.txt", "d.txt"):
        (repo / name).write_text(name)
        git(repo, "add", name)
        git(repo, "commit", "-qm", name)
    tip = sha(repo, "HEAD")
    recorded = len(git_status(repo)["moves"])
    rebase = run_git(repo, "rebase", "-q", "other")
    assert rebase.returncode == 0, rebase.stderr
    moves = git_status(repo)["moves"]
    # Each pick's checkout and commit are skipped; post-rewrite records the whole rebase.
    assert [m["kind"] for m in moves[recorded:]] == ["rebase"]
    assert (moves[-1]["oldHead"], moves[-1]["newHead"]) == (tip, sha(repo, "HEAD"))


def test_a_checkout_during_an_open_call_is_not_the_calls(repo: Path) -> None:
    """The user switches branch in their own shell while the agent's long command runs: the
    files the checkout changed stay out of the call's patches (and out of its rollback)."""
    with_branch_and_remote(repo)
    gg(repo, "hooks", "install")
    guard = Guard.open(repo)
    call = guard.begin_call("Bash", {"command": "npm test > report.txt"})
    assert run_git(repo, "checkout", "-q", "other").returncode == 0  # no agent marker
    (repo / "report.txt").write_text("12 passed\n")  # what the call itself wrote
    finished = guard.end_call(call.call_id, "succeeded")
    assert [p.path for p in finished.file_patches] == ["report.txt"]
    patch = guard.diff(call.call_id).decode()
    assert "report.txt" in patch and "b.txt" not in patch and "README.md" not in patch
    move = git_status(repo)["moves"][-1]
    assert (move["owner"], sorted(move["paths"])) == ("user", ["README.md", "b.txt"])


def test_a_file_checkout_during_an_open_call_takes_only_what_git_wrote(repo: Path) -> None:
    gg(repo, "hooks", "install")
    (repo / "README.md").write_text("# project\nmy draft\n")
    guard = Guard.open(repo)
    call = guard.begin_call("Bash", {"command": "./fix.sh"})
    (repo / "src" / "app.py").write_text("def main():\n    return 3\n")  # the call's edit
    assert run_git(repo, "checkout", "--", "README.md").returncode == 0  # user drops a draft
    move = git_status(repo)["moves"][-1]
    assert (move["kind"], move["paths"], move["owner"]) == \
        ("checkout-files", ["README.md"], "user")
    finished = guard.end_call(call.call_id, "succeeded")
    assert [p.path for p in finished.file_patches] == ["src/app.py"]


def test_the_baselines_journal_is_repaired_and_verified_like_the_others(repo: Path) -> None:
    """A crash mid-append leaves a torn tail: the next write moves it aside. A corrupt middle
    line is what `gitguard verify` reports, by the journal's name."""
    with_branch_and_remote(repo)
    gg(repo, "hooks", "install")
    assert run_git(repo, "checkout", "-q", "other").returncode == 0
    journal = Guard.open(repo).store.baselines_path
    lines = journal.read_bytes().splitlines(keepends=True)
    assert lines, "the checkout was recorded"
    journal.write_bytes(b"".join(lines) + b'{"sum": "torn')
    assert run_git(repo, "checkout", "-q", "main").returncode == 0
    assert len(git_status(repo)["moves"]) == 2, "the tear was moved aside, the record kept"
    assert gg(repo, "verify").returncode == 0
    good = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(good[0].replace(b"checkout", b"chekcout") + b"".join(good[1:]))
    bad = gg(repo, "verify", check=False)
    assert bad.returncode != 0 and "baselines.jsonl" in bad.stdout + bad.stderr


def test_staged_blobs_equal_what_pygit2_reads_from_the_index(repo: Path) -> None:
    """The hook asks git ls-files about a few paths instead of parsing the whole index."""
    import contextlib
    import os
    import subprocess

    import pygit2

    from gitguard.integrations.git_hooks import staged_blobs
    from gitguard.workspace import discover

    names = ["src/app.py", "README.md", "new staged.txt", "caf\udce9.txt", "-dash", "[glob]*"]
    for name in names[2:]:
        (repo / os.fsencode(name).decode("utf-8", "surrogateescape")).write_bytes(b"x\n")
        subprocess.run(["git", "add", "--", os.fsencode(name)], cwd=repo, check=True)
    (repo / "src" / "app.py").write_text("changed, not staged\n")
    # a conflict: stages 1-3 only; pygit2 said `in` and then raised KeyError (the old code
    # failed the hook there); neither is a blob git wrote at stage 0
    blob = git(repo, "hash-object", "-w", "--stdin", input=b"c\n").strip()
    git(repo, "update-index", "--index-info",
        input="".join(f"100644 {blob} {n}\tconflicted.txt\n" for n in (1, 2, 3)).encode())
    before = (repo / ".git" / "index").read_bytes()
    ws = discover(repo)
    assert ws.user_index is not None
    asked = [*names, "missing.txt", "conflicted.txt"]
    fast = staged_blobs(ws.root, ws.git_dir, ws.user_index, asked)
    index = pygit2.Index(str(ws.user_index))
    slow = {}
    for p in asked:
        with contextlib.suppress(KeyError):
            slow[p] = str(index[p].id)
    assert fast == slow and set(fast) == set(names)
    assert (repo / ".git" / "index").read_bytes() == before
