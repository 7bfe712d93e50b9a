"""refs/gitguard/* stay home: `init` installs the pre-push guard, `status` and `verify` warn
without it, the transport table in docs/storage.md holds row by row against real git, and the
opt-in `refs hide` hides them from upload-pack."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.helpers.commands import gg, git
from tests.helpers.gitstate import GitState
from tests.helpers.hooks import run_git, write_hook
from tests.helpers.paths import ROOT

HOOK_NAMES = ["post-checkout", "post-merge", "post-rewrite", "post-commit", "pre-push"]
OUTCOMES = {"not carried", "carried", "refused by the pre-push hook"}


def _documented_table() -> list[tuple[str, str, str]]:
    """(command, outcome, outcome after `refs hide`) for each row of the documented table."""
    text = (ROOT / "docs" / "storage.md").read_text()
    header = "| command | `refs/gitguard/*` | after `gitguard refs hide` |"
    assert header in text, "the transport table in docs/storage.md is gone"
    rows = []
    for line in text[text.index(header):].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        command = re.fullmatch(r"`(.+)`", cells[0])
        assert command and set(cells[1:]) <= OUTCOMES, line
        rows.append((command.group(1), cells[1], cells[2]))
    return rows


def _hidden_refs(git_dir: Path) -> list[str]:
    return git(git_dir, "for-each-ref", "--format=%(refname)", "refs/gitguard/").split()


@pytest.fixture
def guarded(repo: Path) -> Path:
    """`repo` after a plain `init`, with one checkpoint (so refs/gitguard/* exist)."""
    gg(repo, "init")
    gg(repo, "checkpoint", "--kind", "manual", "--step", "s1")
    assert _hidden_refs(repo)
    return repo


def test_init_installs_the_hooks_and_no_hooks_does_not(repo: Path, tmp_path: Path,
                                                       state_of: GitState) -> None:
    out = gg(repo, "init").stdout
    assert "Installed the git hooks" in out
    status = json.loads(gg(repo, "hooks", "status", "--json").stdout)
    assert [h["state"] for h in status["hooks"]] == ["installed"] * 5
    state_of.assert_unchanged(repo)

    other = tmp_path / "other"
    git(tmp_path, "init", "-q", str(other))
    made = json.loads(gg(other, "init", "--no-hooks", "--json").stdout)
    assert made["hooks"] is None
    assert not any((other / ".git" / "hooks" / n).exists() for n in HOOK_NAMES)


def test_init_where_hooks_must_not_go_still_makes_the_store(repo: Path) -> None:
    write_hook(repo / "githooks" / "pre-push", "#!/bin/sh\nexit 0\n")
    git(repo, "add", "githooks")
    git(repo, "commit", "-qm", "tracked hooks")
    git(repo, "config", "core.hooksPath", "githooks")
    proc = gg(repo, "init")
    assert "Warning: the git hooks were not installed: core.hooksPath is githooks" in proc.stdout
    assert "Hint: call gitguard from your own hooks" in proc.stdout
    assert (repo / ".git" / "gitguard").is_dir()
    assert (repo / "githooks" / "pre-push").read_text() == "#!/bin/sh\nexit 0\n"


def test_status_and_verify_warn_when_no_pre_push_guard_runs(repo: Path) -> None:
    gg(repo, "init", "--no-hooks")
    quiet = json.loads(gg(repo, "status", "--json").stdout)
    assert quiet["warnings"] == []          # no refs/gitguard/* yet: nothing to push
    gg(repo, "checkpoint", "--kind", "manual", "--step", "s1")
    for command in ("status", "verify"):
        proc = gg(repo, command)            # a warning, not a failure
        assert "Warning: refs/gitguard/* exist and no gitguard pre-push hook runs" in proc.stdout
        warnings = json.loads(gg(repo, command, "--json").stdout)["warnings"]
        assert len(warnings) == 1 and "gitguard hooks install" in warnings[0]
    gg(repo, "hooks", "install")
    for command in ("status", "verify"):
        assert "Warning" not in gg(repo, command).stdout
        assert json.loads(gg(repo, command, "--json").stdout)["warnings"] == []
    # Another tool replacing the pre-push hook (lefthook keeps ours as .old, never run)
    hooks = repo / ".git" / "hooks"
    (hooks / "pre-push").rename(hooks / "pre-push.old")
    write_hook(hooks / "pre-push", "#!/bin/sh\n# LEFTHOOK file\nexit 0\n")
    assert "Warning: refs/gitguard/*" in gg(repo, "verify").stdout


@pytest.mark.parametrize("hidden", [False, True], ids=["default", "after-refs-hide"])
def test_the_documented_transport_table_holds(guarded: Path, tmp_path: Path, hidden: bool) -> None:
    repo = guarded
    if hidden:
        gg(repo, "refs", "hide")
    rows = _documented_table()
    assert len(rows) >= 10
    for i, (command, plain, after_hide) in enumerate(rows):
        expected = after_hide if hidden else plain
        scratch = tmp_path / f"row{i}"
        scratch.mkdir()
        words = [w.replace("REPO", str(repo)).replace("FILE", str(scratch / "all.bundle"))
                 for w in shlex.split(command)]
        origin = scratch / "origin.git"
        git(scratch, "init", "-q", "--bare", str(origin))
        git(repo, "remote", "remove", "origin") if "origin" in git(repo, "remote") else None
        git(repo, "remote", "add", "origin", str(origin))
        verb = words[1]
        if verb == "clone":
            proc = run_git(scratch, *words[1:], str(scratch / "dest"))
            dest = scratch / "dest"
        elif verb == "fetch":
            git(scratch, "init", "-q", "--bare", str(scratch / "dest"))
            dest = scratch / "dest"
            proc = run_git(dest, *words[1:])
        else:
            proc = run_git(repo, *words[1:])
            dest = origin
        if verb == "bundle":
            assert proc.returncode == 0, proc.stderr
            heads = git(repo, "bundle", "list-heads", str(scratch / "all.bundle"))
            carried = "refs/gitguard/" in heads
        else:
            carried = bool(_hidden_refs(dest))
        if expected == "refused by the pre-push hook":
            assert proc.returncode != 0, command
            assert "gitguard: refusing to push refs/gitguard/" in proc.stderr, command
            assert not carried and "refs/heads/main" not in git(repo, "ls-remote", "origin")
        else:
            assert proc.returncode == 0, f"{command}: {proc.stderr}"
            assert carried == (expected == "carried"), f"{command}: expected {expected}"
            if verb == "push" and carried:   # the documented way out: the hook lets it through
                for ref in _hidden_refs(dest):
                    deleted = run_git(repo, "push", "origin", "--delete", ref)
                    assert deleted.returncode == 0, deleted.stderr
                assert _hidden_refs(dest) == []
            if verb != "bundle":    # the command did its ordinary work
                assert git(dest, "for-each-ref", "refs/heads/", "refs/tags/") \
                    or (dest / "FETCH_HEAD").is_file(), command


def test_refs_hide_and_unhide_change_only_their_value(guarded: Path) -> None:
    repo = guarded
    config = repo / ".git" / "config"
    before = config.read_bytes()
    hidden = json.loads(gg(repo, "refs", "hide", "--json").stdout)
    assert hidden == {"hidden": True, "changed": True, "key": "transfer.hideRefs",
                      "value": "refs/gitguard"}
    assert git(repo, "config", "--get-all", "transfer.hideRefs").split() == ["refs/gitguard"]
    assert json.loads(gg(repo, "refs", "hide", "--json").stdout)["changed"] is False
    gg(repo, "refs", "unhide")
    assert config.read_bytes() == before            # exactly what it was

    git(repo, "config", "--add", "transfer.hideRefs", "refs/private")
    with_mine = config.read_bytes()
    gg(repo, "refs", "hide")
    gg(repo, "refs", "unhide")
    assert config.read_bytes() == with_mine         # the user's own value stays
    assert json.loads(gg(repo, "refs", "unhide", "--json").stdout)["changed"] is False


def test_refs_hide_outside_git_is_an_error(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    proc = gg(plain, "refs", "hide", check=False)
    assert proc.returncode == 1
    assert "Error: " in proc.stderr and "Hint: " in proc.stderr


def test_clone_of_a_worktree_with_hidden_refs(guarded: Path, tmp_path: Path) -> None:
    """A repository's worktrees share its config: hiding from one hides from all."""
    repo = guarded
    gg(repo, "refs", "hide")
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt), "-b", "side")
    subprocess.run(["git", "clone", "-q", "--mirror", str(wt), str(tmp_path / "m")],
                   check=True, capture_output=True)
    assert _hidden_refs(tmp_path / "m") == []
