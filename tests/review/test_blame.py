"""`gitguard blame FILE`: each line's writer through the real CLI, and its errors."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gitguard.api import Guard
from tests.helpers.commands import gg, git
from tests.helpers.gitstate import capture, fsck_clean
from tests.helpers.hooks import run_git


def blame_json(repo: Path, path: str) -> dict[str, Any]:
    done = gg(repo, "blame", path, "--json")
    document: dict[str, Any] = json.loads(done.stdout)
    assert document["schema"] == "gitguard.blame/1"
    return document


def owners(document: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [(ln["text"], ln["owner"], ln.get("callId")) for ln in document["lines"]]


def edit(guard: Guard, rel: str, text: str, call_id: str) -> None:
    with guard.tool_call("Edit", {"file_path": rel}, writes=[rel], call_id=call_id):
        (guard.ws.root / rel).write_text(text)


def test_each_line_names_the_call_the_user_or_the_commit(repo: Path) -> None:
    state = capture(repo)
    app = repo / "src" / "app.py"
    with Guard.open(repo) as guard:
        guard.start_session("s1")
        guard.checkpoint("manual")
        app.write_text("def main():\n    # mine\n    return 1\n")
        edit(guard, "src/app.py", "def main():\n    # mine\n    return 1\n\n\ndef agent():\n"
             "    return 2\n", "call_a")
        edit(guard, "src/app.py", app.read_text().replace("return 2", "return 3"), "call_b")
    app.write_text("# a note of mine\n" + app.read_text())

    document = blame_json(repo, "src/app.py")
    assert owners(document) == [
        ("# a note of mine", "user", None),
        ("def main():", "commit", None), ("    # mine", "user", None),
        ("    return 1", "commit", None), ("", "call", "call_a"), ("", "call", "call_a"),
        ("def agent():", "call", "call_a"), ("    return 3", "call", "call_b")]
    head = git(repo, "rev-parse", "HEAD").strip()
    assert document["lines"][1]["commit"] == head
    assert document["commits"][head]["summary"] == "initial"
    assert set(document["calls"]) == {"call_a", "call_b"}
    assert document["calls"]["call_b"]["tool"] == "Edit"
    assert document["calls"]["call_b"]["sessionId"] == "s1"

    human = gg(repo, "blame", "src/app.py").stdout
    assert "call_b Edit" in human and "| def agent():" in human
    assert f"{head[:8]} " in human and "you " in human
    # the undo command listed for call_a, run in a shell, takes out its lines and call_b's
    undo = document["calls"]["call_a"]["undo"]
    assert f"call_a: Edit, session s1; take its lines out: {undo}" in human
    ran = subprocess.run(undo, shell=True, capture_output=True, text=True,
                         env={**os.environ, "PATH": f"{Path(os.sys.executable).parent}:"
                                                    f"{os.environ['PATH']}"})
    assert ran.returncode == 5, ran.stdout + ran.stderr       # your note: a conflict
    gg(repo, "conflicts", "resolve", "src/app.py", "--merge")
    assert app.read_text() == "# a note of mine\ndef main():\n    # mine\n    return 1\n"
    assert owners(blame_json(repo, "src/app.py")) == [
        ("# a note of mine", "user", None), ("def main():", "commit", None),
        ("    # mine", "user", None), ("    return 1", "commit", None)]
    state.assert_unchanged(repo)
    fsck_clean(repo)


def test_a_command_s_change_is_marked_window_and_an_open_call_is_no_one_s(repo: Path) -> None:
    with Guard.open(repo) as guard:
        guard.start_session("s1")
        with guard.tool_call("Bash", {"command": "python gen.py"}, call_id="call_sh"):
            (repo / "README.md").write_text("# project\ngenerated\n")
        begun = guard.begin_call("Bash", {"command": "python more.py"}, call_id="call_open")
        (repo / "README.md").write_text("# project\ngenerated\nby whom?\n")
        del begun
    lines = blame_json(repo, "README.md")["lines"]
    assert [(ln["owner"], ln.get("callId"), ln.get("confidence")) for ln in lines] == [
        ("commit", None, None), ("call", "call_sh", "window"),
        ("ambiguous", "call_open", "unknown")]
    assert "never finished" in lines[2]["why"]
    human = gg(repo, "blame", "README.md").stdout
    assert "call_sh~ Bash" in human and "call_open or you?" in human


def test_a_moved_file_keeps_its_lines_owners(repo: Path) -> None:
    app = repo / "src" / "app.py"
    with Guard.open(repo) as guard:
        guard.start_session("s1")
        guard.checkpoint("manual")
        edit(guard, "src/app.py", "def main():\n    return 1\n# agent line\n", "call_w")
        app.write_text(app.read_text() + "# my line\n")
        with guard.tool_call("Bash", {"command": "mv src/app.py src/main.py"},
                             call_id="call_mv"):
            os.rename(app, repo / "src" / "main.py")
    assert owners(blame_json(repo, "src/main.py")) == [
        ("def main():", "commit", None), ("    return 1", "commit", None),
        ("# agent line", "call", "call_w"), ("# my line", "user", None)]


def test_a_commit_keeps_the_calls_lines_across_checkout_and_merge(repo: Path) -> None:
    """The agent works on a branch, you commit there, go back to main and merge: the lines
    come into main through git, and the post-commit record names the calls."""
    gg(repo, "hooks", "install")
    git(repo, "checkout", "-qb", "feature")
    with Guard.open(repo) as guard:
        guard.start_session("s1")
        edit(guard, "src/app.py", "def main():\n    return 1\n\n\ndef helper():\n"
             "    return 2\n", "call_1")
        edit(guard, "src/app.py", "def main():\n    return helper()\n\n\ndef helper():\n"
             "    return 2\n", "call_2")
    assert run_git(repo, "commit", "-qam", "agent work").returncode == 0
    feature = git(repo, "rev-parse", "HEAD").strip()
    assert run_git(repo, "checkout", "-q", "main").returncode == 0
    assert "return helper()" not in (repo / "src" / "app.py").read_text()
    assert run_git(repo, "merge", "-q", "--ff-only", "feature").returncode == 0

    document = blame_json(repo, "src/app.py")
    assert owners(document) == [
        ("def main():", "commit", None), ("    return helper()", "call", "call_2"),
        ("", "call", "call_1"), ("", "call", "call_1"), ("def helper():", "call", "call_1"),
        ("    return 2", "call", "call_1")]
    assert {ln.get("commit") for ln in document["lines"][1:]} == {feature}
    # nothing is written: no notes, no refs of the user's
    assert git(repo, "notes", "list") == ""
    refs = git(repo, "for-each-ref", "--format=%(refname)").split()
    assert not [r for r in refs if r.startswith("refs/notes")]


def test_without_any_checkpoint_lines_are_the_commits_and_yours(repo: Path) -> None:
    (repo / "README.md").write_text("# project\nuncommitted\n")
    assert owners(blame_json(repo, "README.md")) == [
        ("# project", "commit", None), ("uncommitted", "user", None)]


def test_an_empty_file_has_no_lines(repo: Path) -> None:
    (repo / "empty.txt").write_bytes(b"")
    assert blame_json(repo, "empty.txt")["lines"] == []
    assert gg(repo, "blame", "empty.txt").stdout == "empty.txt is empty\n"


@pytest.mark.parametrize(("make", "name", "message"), [
    (lambda r: None, "missing.txt", "missing.txt does not exist in the working tree"),
    (lambda r: None, "src", "src is a directory"),
    (lambda r: (r / "link").symlink_to("README.md"), "link", "link is a symlink"),
    (lambda r: (r / "bin.dat").write_bytes(b"\x00\x01\x02"), "bin.dat", "bin.dat is binary"),
    (lambda r: None, "../outside.txt", "is outside the workspace"),
])
def test_bad_paths_get_a_clear_error(repo: Path, make: Any, name: str, message: str) -> None:
    make(repo)
    before = sorted(p.name for p in repo.iterdir())
    done = gg(repo, "blame", name, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.startswith("Error: ") and message in done.stderr, done.stderr
    assert "Hint:" in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in repo.iterdir()) == before


def test_the_undo_command_is_quoted_for_a_shell(tmp_path: Path) -> None:
    root = tmp_path / "a dir; with $pace"
    root.mkdir()
    git(root, "init", "-q")
    (root / "f.txt").write_text("one\n")
    with Guard.open(root) as guard:
        guard.start_session("s1")
        edit(guard, "f.txt", "one\ntwo\n", "call_1")
    undo = blame_json(root, "f.txt")["calls"]["call_1"]["undo"]
    assert shlex.split(undo)[:3] == ["gitguard", "-C", str(root)]


def test_after_gc_pruned_the_checkpoints_each_call_keeps_its_lines(repo: Path) -> None:
    from tests.helpers.storage import GC_ENV

    text = "def main():\n    return 1\n"
    with Guard.open(repo) as guard:
        guard.start_session("s1")
        guard.checkpoint("manual")
        for n in range(4):
            text += f"# call {n}\n"
            edit(guard, "src/app.py", text, f"call_{n}")
        guard.end_session()
    before = owners(blame_json(repo, "src/app.py"))
    assert before[2:] == [(f"# call {n}", "call", f"call_{n}") for n in range(4)]
    gg(repo, "gc", env=GC_ENV)
    with Guard.open(repo) as guard:
        assert len(guard.checkpoints()) < 9, "gc pruned checkpoints between the calls"
    assert owners(blame_json(repo, "src/app.py")) == before


def test_a_relative_path_is_read_from_minus_c_or_the_current_directory(repo: Path,
                                                                       tmp_path: Path) -> None:
    """Like git's -C: `gitguard -C REPO blame src/app.py` from anywhere; from a
    subdirectory, a path relative to it."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    expected = blame_json(repo, "src/app.py")
    assert json.loads(gg(elsewhere, "-C", str(repo), "blame", "src/app.py",
                         "--json").stdout) == expected
    assert blame_json(repo / "src", "app.py") == expected
    assert blame_json(repo / "src", "../src/app.py") == expected
    done = gg(elsewhere, "-C", str(repo), "conflicts", "show", "src/app.py", check=False)
    assert "no conflict for src/app.py" in done.stderr, done.stderr
