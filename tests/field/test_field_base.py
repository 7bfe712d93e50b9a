"""The field suite's own checks: real tools as the agent's calls on real files, each
call's patch reversible, the user's state and bytes kept, with and without the daemon."""

from __future__ import annotations

import os
from pathlib import Path

from tests.field.conftest import (
    CLICK,
    CLICK_CORE,
    PLUGGY,
    Field,
    agent_edit,
    agent_shell,
    entry,
    roll_back_call,
    tool,
    worktree_bytes,
)


def test_the_history_is_made_of_real_files(field_repo: Field) -> None:
    core = (field_repo.repo / CLICK_CORE).read_bytes()
    assert len(core) > 100_000 and b"class Command" in core
    field_repo.assert_user_state_kept()


def test_an_edit_of_click_core_ends_and_reverses(guard_mode: Field) -> None:
    """`call end` of an Edit of click's 148 KB core.py (a segfault in call end before the
    patch buffers were held) succeeds, and its patch is git's."""
    repo = guard_mode.repo
    call = agent_edit(repo, CLICK_CORE, b"class Command:\n",
                      b"class Command:  # edited by the agent\n")
    patches = entry(repo, call)["filePatches"]
    assert [p["path"] for p in patches] == [CLICK_CORE]
    guard_mode.assert_user_state_kept()


def test_a_formatter_over_a_whole_real_package_is_one_reversible_call(
        guard_mode: Field) -> None:
    """black rewrites every module of pluggy (line length 40: most lines move); the
    call's patch reverses on the result, and rolling the call back gives the user every
    byte of the tree as it was."""
    repo = guard_mode.repo
    before = worktree_bytes(repo)
    call = agent_shell(repo, tool("black"), "-q", "--line-length", "40", PLUGGY)
    changed = {p["path"] for p in entry(repo, call)["filePatches"]}
    assert len(changed) >= 10 and f"{PLUGGY}/_hooks.py" in changed
    assert changed == {p for p in before if before[p] != _read(repo / p)}
    guard_mode.assert_user_state_kept()
    rolled = roll_back_call(repo, call)
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr
    assert worktree_bytes(repo) == before
    guard_mode.assert_user_state_kept()


def test_sed_in_place_over_real_files(guard_mode: Field) -> None:
    repo = guard_mode.repo
    before = worktree_bytes(repo)
    targets = [CLICK_CORE, f"{CLICK}/types.py", f"{CLICK}/parser.py"]
    call = agent_shell(repo, tool("sed"), "-i", "s/self/this/g", *targets)
    assert {p["path"] for p in entry(repo, call)["filePatches"]} == set(targets)
    guard_mode.assert_user_state_kept()
    rolled = roll_back_call(repo, call)
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr
    assert worktree_bytes(repo) == before
    guard_mode.assert_user_state_kept()


def _read(path: Path) -> bytes | None:
    return path.read_bytes() if path.exists() else None


def test_every_kind_of_change_real_tools_make(guard_mode: Field) -> None:
    """One shell call that re-encodes a real module to UTF-16 (binary to git), copies one
    to a non-UTF-8 name, links, makes a module executable and deletes another: its patch
    reverses, and rolling it back restores every byte, link and mode."""
    repo = guard_mode.repo
    before = worktree_bytes(repo)
    modes = {p: (repo / p).lstat().st_mode for p in before}
    odd_name = os.fsdecode(b"src/click/typ\xe9s_latin1.py")
    script = ("iconv -f UTF-8 -t UTF-16 src/click/core.py > src/click/core.utf16 && "
              'cp src/click/types.py "$1" && ln -s core.py src/click/link.py && '
              "chmod +x src/click/__init__.py && rm src/click/globals.py")
    call = agent_shell(repo, tool("sh"), "-c", script, "sh", odd_name)
    changed = {p["path"] for p in entry(repo, call)["filePatches"]}
    assert changed == {"src/click/core.utf16", odd_name, "src/click/link.py",
                       "src/click/__init__.py", "src/click/globals.py"}
    guard_mode.assert_user_state_kept()
    rolled = roll_back_call(repo, call)
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr
    assert worktree_bytes(repo) == before
    assert {p: (repo / p).lstat().st_mode for p in before} == modes
    guard_mode.assert_user_state_kept()
