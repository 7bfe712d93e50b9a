"""Long names and symlinks as agents make them: names up to NAME_MAX round-trip, a symlink
loop or a link out of the workspace is an Error/Hint where it is named and blocks the
rollback of nothing else, and every rollback (of an escaping link, of a deleted file that
left its directory empty) can be undone exactly."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gitguard import fileops
from gitguard.rollback.workspace_writer import sweep_temps
from tests.helpers.commands import gg, git
from tests.helpers.gitstate import capture
from tests.helpers.hooks import hook_cc

LONG_ASCII = "n" * 240 + ".txt"                 # 244 bytes: valid, its old temp name was not
LONG_UTF8 = "é" * 126 + ".md"                    # 255 bytes, 2-byte characters


def _start(repo: Path) -> str:
    gg(repo, "init", "--no-hooks")
    return str(json.loads(gg(repo, "checkpoint", "--json").stdout)["checkpointId"])


def _rollback(repo: Path, to: str, code: int = 0) -> dict[str, object]:
    proc = gg(repo, "rollback-files", "--to", to, "--json", check=False)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    value: dict[str, object] = json.loads(proc.stdout)
    return value


def _tree(root: Path) -> dict[str, str]:
    """Every entry below root but .git: kind and content (a link's target)."""
    found: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git" or Path(dirpath) != root]
        for name in dirnames + filenames:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            if full.is_symlink():
                found[rel] = "link " + os.readlink(full)
            elif full.is_dir():
                found[rel] = "dir"
            else:
                found[rel] = "file " + full.read_bytes().hex()
    return found


@pytest.mark.parametrize("name", [LONG_ASCII, LONG_UTF8])
def test_a_name_up_to_name_max_rolls_back_and_the_rollback_undoes(
        repo: Path, name: str) -> None:
    assert len(os.fsencode(name)) <= fileops.NAME_MAX
    (repo / "src" / name).write_text("the user's version\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a long name")
    before = capture(repo)
    first = _start(repo)
    gg(repo, "run", "--", "sh", "-c", f"echo agent > 'src/{name}' && echo new > 'src/x{name[1:]}'")
    agent = _tree(repo)
    done = _rollback(repo, first)
    assert done["restored"] == [f"src/{name}"] and done["deleted"] == [f"src/x{name[1:]}"]
    assert done["conflicts"] == []
    assert (repo / "src" / name).read_text() == "the user's version\n"
    _rollback(repo, str(done["safetyCheckpointId"]))
    assert _tree(repo) == agent, "undoing the rollback gives back the agent's files exactly"
    before.assert_unchanged(repo)


def test_a_temporary_file_of_a_long_name_fits_and_is_swept(tmp_path: Path) -> None:
    name = "t" * 250
    stem = fileops.temp_stem(name)
    left = tmp_path / f".{stem}{fileops.TEMP_INFIX}0123abcd.tmp"
    left.write_bytes(b"half a write")
    assert len(os.fsencode(left.name)) <= fileops.NAME_MAX
    other = tmp_path / f".{stem[:-1]}{fileops.TEMP_INFIX}0123abcd.tmp"
    other.write_bytes(b"not ours")
    assert sweep_temps(tmp_path, [name]) == [left.name]
    assert not left.exists() and other.exists()


def test_a_post_tool_use_for_a_name_no_file_can_have_ends_the_call(repo: Path) -> None:
    gg(repo, "init", "--no-hooks")
    path = str(repo / ("z" * 300))
    pre = {"hook_event_name": "PreToolUse", "session_id": "s-long", "tool_use_id": "toolu_long",
           "tool_name": "Write", "tool_input": {"file_path": path, "content": "x"},
           "cwd": str(repo)}
    assert hook_cc(repo, pre) == {}
    post = {**pre, "hook_event_name": "PostToolUse",
            "tool_response": {"error": "File name too long"}}
    assert hook_cc(repo, post) == {}, "no systemMessage: the hook did not fail"
    ledger = {e["callId"]: e for e in json.loads(gg(repo, "ledger", "--json").stdout)}
    assert ledger["toolu_long"]["status"] == "succeeded"


def test_a_symlink_loop_is_an_error_where_it_is_named_and_blocks_nothing_else(
        repo: Path) -> None:
    (repo / "d").mkdir()
    (repo / "d" / "c.txt").write_text("tracked\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "d")
    before = capture(repo)
    first = _start(repo)
    gg(repo, "run", "--", "sh", "-c", "echo agent > d/c.txt && echo agent > src/app.py")
    for entry in (repo / "d").iterdir():
        entry.unlink()
    (repo / "d").rmdir()
    (repo / "d").symlink_to("d")                # the user's `ln -s d d`
    begun = gg(repo, "call", "begin", "--tool", "Write", "--writes", "d/c.txt", check=False)
    assert begun.returncode == 1, begun.stderr
    assert begun.stderr.startswith("Error: d/c.txt goes through") and "Hint: " in begun.stderr
    event = {"hook_event_name": "PreToolUse", "session_id": "s-loop", "tool_use_id": "toolu_l",
             "tool_name": "Write", "tool_input": {"file_path": str(repo / "d" / "c.txt"),
                                                  "content": "x"}, "cwd": str(repo)}
    assert hook_cc(repo, event) == {}, "the hook neither fails nor blocks the tool"
    done = _rollback(repo, first, code=5)
    assert done["restored"] == ["src/app.py"], "the unrelated path is rolled back"
    assert [c["path"] for c in done["conflicts"]] == ["d/c.txt"]       # type: ignore[attr-defined]
    assert (repo / "src" / "app.py").read_text() == "def main():\n    return 1\n"
    assert os.readlink(repo / "d") == "d", "the loop is left as it is"
    before.assert_unchanged(repo)


def test_a_rollback_that_replaced_a_symlink_out_of_the_workspace_can_be_undone(
        repo: Path) -> None:
    outside = repo.parent / "outside"
    outside.mkdir()
    (outside / "app.py").write_text("not the workspace's\n")
    before = capture(repo)
    first = _start(repo)
    gg(repo, "run", "--", "sh", "-c", "rm -rf src && ln -s ../outside src")
    agent = _tree(repo)
    done = _rollback(repo, first)
    assert done["restored"] == ["src/app.py"] and done["deleted"] == ["src"]
    assert (repo / "src").is_dir() and not (repo / "src").is_symlink()
    undone = _rollback(repo, str(done["safetyCheckpointId"]))
    assert undone["conflicts"] == []
    assert _tree(repo) == agent and os.readlink(repo / "src") == "../outside"
    again = _rollback(repo, first)
    assert again["restored"] == ["src/app.py"], "a later rollback is not blocked by the link"
    assert (outside / "app.py").read_text() == "not the workspace's\n"
    assert sorted(p.name for p in outside.iterdir()) == ["app.py"], "nothing written outside"
    before.assert_unchanged(repo)


def test_undoing_a_rollback_brings_back_the_empty_directory(repo: Path) -> None:
    (repo / "pkg").mkdir()
    (repo / "pkg" / "mod.py").write_text("x = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "pkg")
    first = _start(repo)
    gg(repo, "run", "--", "rm", "pkg/mod.py")       # leaves pkg/ empty, as rm does
    agent = _tree(repo)
    assert agent["pkg"] == "dir"
    done = _rollback(repo, first)
    assert (repo / "pkg" / "mod.py").read_text() == "x = 1\n"
    undone = _rollback(repo, str(done["safetyCheckpointId"]))
    assert undone["deleted"] == ["pkg/mod.py"] and undone["madeDirs"] == ["pkg"]
    assert _tree(repo) == agent
