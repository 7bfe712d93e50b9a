"""Issue 29 item 5 on real files: a multi-file refactor of click's sources with user
edits before and after the agent's, rolled back and merged; each merge equals `git
merge-file` run by the test itself on the versions it recorded (the file as the agent
found it, as the agent left it, as the user left it)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.field.conftest import CLICK, Field, agent_edit
from tests.helpers.commands import gg

TYPES = f"{CLICK}/types.py"
CORE = f"{CLICK}/core.py"
FORMATTING = f"{CLICK}/formatting.py"
DECORATORS = f"{CLICK}/decorators.py"


def unique_line(data: bytes, near: int) -> bytes:
    """The first line from line `near` (1-based) on that occurs once and has code in it."""
    lines = data.splitlines(keepends=True)
    for line in lines[near - 1:]:
        if line.strip() and len(line.strip()) > 8 and data.count(line) == 1:
            return line
    raise AssertionError(f"no unique line after {near}")


def edit_line(repo: Path, path: str, near: int, tag: bytes) -> tuple[bytes, bytes]:
    """(old, new): the unique line near `near` with `tag` appended as a comment."""
    old = unique_line((repo / path).read_bytes(), near)
    return old, old.rstrip(b"\n") + b"  # " + tag + b"\n"


def user_edit(repo: Path, path: str, near: int) -> bytes:
    old, new = edit_line(repo, path, near, f"edited by the user at {near}".encode())
    data = (repo / path).read_bytes()
    (repo / path).write_bytes(data.replace(old, new, 1))
    return new


def merge_file(tmp: Path, ours: bytes, base: bytes, theirs: bytes) -> bytes:
    for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
        (tmp / name).write_bytes(data)
    proc = subprocess.run(["git", "merge-file", "-p", str(tmp / "ours"), str(tmp / "base"),
                           str(tmp / "theirs")], capture_output=True, check=False)
    assert proc.returncode == 0, "the test's own merge has no conflict"
    return proc.stdout


def test_a_refactor_of_click_merges_like_git_merge_file_on_the_right_base(
        field_repo: Field, tmp_path: Path) -> None:
    repo = field_repo.repo
    ckpt = json.loads(gg(repo, "checkpoint", "--json").stdout)["checkpointId"]
    # The user's edits before the agent's (types.py line 97, as in the issue)
    users = {TYPES: [user_edit(repo, TYPES, 97)], DECORATORS: [user_edit(repo, DECORATORS, 40)],
             CORE: [user_edit(repo, CORE, 300)]}
    found = {p: (repo / p).read_bytes() for p in (TYPES, CORE, FORMATTING, DECORATORS)}
    # The agent's refactor: several Edit calls over four files
    agents: dict[str, list[bytes]] = {}
    for path, near in ((TYPES, 16), (TYPES, 1006), (CORE, 120), (CORE, 2500),
                       (FORMATTING, 60), (DECORATORS, 200)):
        old, new = edit_line(repo, path, near, b"refactored by the agent")
        agent_edit(repo, path, old, new)
        agents.setdefault(path, []).append(new)
    left = {p: (repo / p).read_bytes() for p in found}
    # The user's edits after the agent's
    users[TYPES].append(user_edit(repo, TYPES, 500))
    users[CORE].append(user_edit(repo, CORE, 1800))
    current = {p: (repo / p).read_bytes() for p in found}

    done = json.loads(gg(repo, "rollback-files", "--to", ckpt, "--json",
                         check=False).stdout)
    assert sorted(c["path"] for c in done["conflicts"]) == [CORE, TYPES]
    assert sorted(done["restored"]) == [DECORATORS, FORMATTING]
    assert (repo / FORMATTING).read_bytes() == found[FORMATTING]
    assert (repo / DECORATORS).read_bytes() == found[DECORATORS], \
        "back to the user's version, not the checkpoint's"

    shown = gg(repo, "conflicts", "show", TYPES).stdout
    sections = shown.split("\n=== ")[1:]
    agent_part = "".join(s for s in sections if "the agent's change" in s.splitlines()[0])
    user_part = "".join(s for s in sections if s.splitlines()[0].endswith("your change"))
    assert "edited by the user at 97" not in agent_part, "the user's line is not the agent's"
    assert "edited by the user at 97" in user_part
    assert "refactored by the agent" in agent_part

    for path in (TYPES, CORE):
        proc = gg(repo, "conflicts", "resolve", path, "--merge", "--json", check=False)
        assert proc.returncode == 0, proc.stderr
        merged = (repo / path).read_bytes()
        assert merged == merge_file(tmp_path, current[path], left[path], found[path])
        for line in users[path]:
            assert line in merged, f"{path}: the user's line is kept"
        for line in agents[path]:
            assert line not in merged, f"{path}: the agent's line is gone"
    field_repo.assert_user_state_kept()
