"""What a shell command can have written, read from its words (issues 29 and 31): those
paths are the call's, so parallel commands each own their own writes and a file the user
saves while a command runs stays the user's; a command whose writes cannot be read keeps
its window."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitguard.calls.shell_targets import moved_paths, written_paths
from tests.helpers.commands import gg
from tests.integrations.test_parallel_and_background import _maybe_daemon, post, pre

S = "0199a3c2-7d41-7b10-9e5f-2b8c4d6e1a37"


@pytest.mark.parametrize(("command", "written"), [
    ("echo hi > a.txt", ["a.txt"]),
    ("echo hi >> a.txt 2>/dev/null", ["a.txt"]),
    ("ls -la && git status && grep -r x .", []),
    ("sed -i 's/a/b/' f.txt g.txt", ["f.txt", "g.txt"]),
    ("sed -i.bak -e s/a/b/ f.txt", ["f.txt", "f.txt.bak"]),
    ("sed 's/a/b/' f.txt > out.txt", ["out.txt"]),
    ("cat x | tee -a log.txt", ["log.txt"]),
    ("cd sub && echo x >> y", ["sub/y"]),
    ("mkdir -p a/b && touch a/b/c", ["a/b", "a/b/c"]),
    ("rm a b", ["a", "b"]),
    ("git checkout -- a.txt", ["a.txt"]),
    ("sort -o out.txt in.txt", ["out.txt"]),
    ("find . -name '*.py'", []),
    ("bash -c 'echo x > y'", ["y"]),
    ("mv a b", ["a", "b", "b/a"]),
    ("mv a b dir/", ["a", "b", "dir/a", "dir/b"]),
    ("git mv -f a d/", ["a", "d/a"]),
    ("mv -t d a", ["a", "d/a"]),
    ("cp a b", ["b", "b/a"]),
    ("cp /elsewhere/x.txt ./", ["x.txt"]),
])
def test_targets_read_from_the_words(command: str, written: list[str]) -> None:
    assert written_paths(command, "/ws") == tuple(f"/ws/{p}" for p in written)


@pytest.mark.parametrize("command", [
    "npm test", "python setup.py build", "make", "rm -rf build", "cp -r a b", "cp -a a b",
    "mv -b a b", "ln -s a b", "mv *.txt d/", "rm *.log", "find . -delete", "echo 'unclosed",
    "bash -c 'python gen.py'", "git stash",
])
def test_commands_whose_writes_cannot_be_read_keep_their_window(command: str) -> None:
    assert written_paths(command, "/ws") is None


@pytest.mark.parametrize(("command", "pairs"), [
    ("mv a b", [("a", "b"), ("a", "b/a")]),
    ("cd sub && git mv a ../c/", [("sub/a", "c/a")]),
    ("mv -t d a b", [("a", "d/a"), ("b", "d/b")]),
    ("cp a b", []),
    ("mv *.py d/", []),
])
def test_moves_read_from_the_words(command: str, pairs: list[tuple[str, str]]) -> None:
    assert moved_paths(command, "/ws") == tuple((f"/ws/{a}", f"/ws/{b}") for a, b in pairs)
PATCH = ("*** Begin Patch\n*** Update File: src/app.py\n@@\n-    return 1\n+    return 2\n"
         "*** Add File: docs/new.md\n+new\n*** Update File: old.txt\n*** Move to: new.txt\n"
         "*** Delete File: gone.txt\n*** End Patch\n")
PATCHED = ["src/app.py", "docs/new.md", "old.txt", "new.txt", "gone.txt"]


@pytest.mark.parametrize(("command", "written"), [
    # Codex applies these itself (its apply_patch), as the captured subagent's call was sent
    (f"apply_patch <<'EOF'\n{PATCH}EOF\n", PATCHED),
    (f'apply_patch <<"EOF"\n{PATCH}EOF', PATCHED),
    (f"applypatch <<PATCH\n{PATCH}PATCH\n", PATCHED),
    (f"cd sub && apply_patch <<'EOF'\n{PATCH}EOF\n", [f"sub/{p}" for p in PATCHED]),
    (["apply_patch", PATCH], PATCHED),
])
def test_a_patch_codex_applies_from_the_shell_writes_the_files_it_names(
        command: str | list[str], written: list[str]) -> None:
    assert written_paths(command, "/ws") == tuple(f"/ws/{p}" for p in written)


@pytest.mark.parametrize("command", [
    f"apply_patch <<'EOF'\n{PATCH}EOF\nmake install",      # more than the patch runs
    "apply_patch <<'EOF'\nnot a patch\nEOF\n",
    "apply_patch patch.diff",
])
def test_anything_more_than_a_patch_is_not_read_as_one(command: str) -> None:
    assert written_paths(command, "/ws") is None


def _shell(command: str) -> dict[str, str]:
    return {"command": command}


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
def test_parallel_commands_each_own_their_own_writes(repo: Path, daemon: bool) -> None:
    """Codex runs a response's parallel calls at once: three PreToolUse before any
    PostToolUse. Each call owns its file; no call's patches hold another's."""
    gg(repo, "init", "--no-daemon")
    calls = {f"call_par{i}": f"echo {i} > par{i}.txt" for i in (1, 2, 3)}
    with _maybe_daemon(repo, daemon):
        for call, command in calls.items():
            pre(repo, S, call, "Bash", _shell(command), turn_id="t1")
        for i in (1, 2, 3):
            (repo / f"par{i}.txt").write_text(f"{i}\n")
        for call, command in calls.items():
            post(repo, S, call, "Bash", _shell(command), "", turn_id="t1")
        ledger = {e["callId"]: e for e in json.loads(gg(repo, "ledger", "--json").stdout)}
        owners = {d["path"]: (d["owner"], d["confidence"])
                  for d in json.loads(gg(repo, "status", "--json").stdout)["dirty"]}
        first = json.loads(gg(repo, "checkpoints", "--json").stdout)[0]["checkpointId"]
        plan = json.loads(gg(repo, "rollback-files", "--to", first, "--dry-run",
                             "--json").stdout)
    for i in (1, 2, 3):
        assert [p["path"] for p in ledger[f"call_par{i}"]["filePatches"]] == [f"par{i}.txt"]
        assert owners[f"par{i}.txt"][0] == f"call_par{i}", owners
    assert sorted(plan["deleted"]) == ["par1.txt", "par2.txt", "par3.txt"], plan
    assert plan["conflicts"] == [], plan


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
def test_a_file_the_user_saves_while_a_command_runs_stays_the_users(repo: Path,
                                                                    daemon: bool) -> None:
    gg(repo, "init", "--no-daemon")
    command = "sleep 5 && echo done > out.txt"
    with _maybe_daemon(repo, daemon):
        pre(repo, S, "toolu_slow", "Bash", _shell(command))
        (repo / "notes.txt").write_text("the user's new file\n")     # while it runs
        (repo / "out.txt").write_text("done\n")
        post(repo, S, "toolu_slow", "Bash", _shell(command), "")
        owners = {d["path"]: d["owner"]
                  for d in json.loads(gg(repo, "status", "--json").stdout)["dirty"]}
        first = json.loads(gg(repo, "checkpoints", "--json").stdout)[0]["checkpointId"]
        done = json.loads(gg(repo, "rollback-files", "--to", first, "--json").stdout)
    assert owners["notes.txt"] == "user" and owners["out.txt"] == "toolu_slow", owners
    assert done["deleted"] == ["out.txt"], done
    assert (repo / "notes.txt").read_text() == "the user's new file\n"
