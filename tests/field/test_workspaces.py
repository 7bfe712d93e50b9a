"""Workspaces as people set them up: a dotfiles repository (GIT_DIR + GIT_WORK_TREE),
core.worktree, another user's repository, a linked worktree removed under its daemon.

The store sits in the git dir whenever there is one, so `git add -A` can never commit it;
every store discovery (workspace.discover, store_discovery.find_store, the native client) agrees."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gitguard import store_discovery
from gitguard.ipc import client
from gitguard.workspace import discover
from tests.helpers.commands import gg, git
from tests.helpers.daemons import alive, wait_for
from tests.helpers.gitstate import capture
from tests.helpers.native import program as built_client


def _dotfiles(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A bare repository tracking files of a home directory, as the dotfiles guides do."""
    home, bare = tmp_path / "home", tmp_path / "dotfiles.git"
    home.mkdir()
    git(tmp_path, "init", "-q", "--bare", str(bare))
    env = {"GIT_DIR": str(bare), "GIT_WORK_TREE": str(home)}
    (home / ".bashrc").write_text("export EDITOR=vi\n")
    subprocess.run(["git", "add", ".bashrc"], cwd=home, env={**os.environ, **env}, check=True)
    subprocess.run(["git", "commit", "-qm", "dotfiles"], cwd=home, env={**os.environ, **env},
                   check=True)
    return home, bare, env


def test_a_dotfiles_store_is_in_the_git_dir_and_git_add_never_sees_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, bare, env = _dotfiles(tmp_path)
    before = capture(bare)
    gg(home, "init", "--no-hooks", env=env)
    assert (bare / "gitguard" / "store.json").is_file()
    assert sorted(p.name for p in home.iterdir()) == [".bashrc"], "nothing in the work tree"
    begun = json.loads(gg(home, "call", "begin", "--tool", "Edit", "--writes", ".bashrc",
                          "--input", '{"file_path": ".bashrc"}', "--json", env=env).stdout)
    (home / ".bashrc").write_text("export EDITOR=nano\n")
    gg(home, "call", "end", begun["callId"], "--status", "succeeded", env=env)
    first = json.loads(gg(home, "checkpoints", "--json", env=env).stdout)[0]["checkpointId"]
    gg(home, "rollback-files", "--to", first, env=env)
    assert (home / ".bashrc").read_text() == "export EDITOR=vi\n"
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                            cwd=home, env={**os.environ, **env, "GIT_OPTIONAL_LOCKS": "0"},
                            capture_output=True, text=True, check=True)
    assert status.stdout == "", "git add -A would commit nothing of gitguard's"
    before.assert_unchanged(bare)
    # Every discovery finds that store, from the work tree, with the user's variables.
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert discover(home).store_dir == bare.resolve() / "gitguard"
    assert store_discovery.find_store(str(home)) == (str(home), str(bare / "gitguard"))


def test_core_worktree_keeps_the_store_in_the_git_dir(tmp_path: Path) -> None:
    repo, tree = tmp_path / "repo", tmp_path / "tree"
    tree.mkdir()
    git(tmp_path, "init", "-q", str(repo))
    git(repo, "config", "core.worktree", str(tree))
    (tree / "notes.txt").write_text("one\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-qm", "notes")
    env = {"GIT_DIR": str(repo / ".git")}
    gg(tree, "init", "--no-hooks", env=env)      # from inside the work tree, as git is used
    assert (repo / ".git" / "gitguard" / "store.json").is_file()
    assert not (tree / ".agent-runtime").exists()
    status = json.loads(gg(tree, "status", "--json", env=env).stdout)
    assert Path(status["workspace"]) == tree.resolve()
    gg(repo, "status", env={})                   # from the repository, without GIT_DIR
    assert sorted(p.name for p in tree.iterdir()) == ["notes.txt"]


def test_the_native_client_finds_the_dotfiles_daemon(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITGUARD_NATIVE", "1")
    home, bare, env = _dotfiles(tmp_path)
    gg(home, "init", "--no-hooks", "--no-daemon", env=env)
    native = built_client()
    gg(home, "daemon", "start", env=env)
    try:
        answered = subprocess.run([str(native), sys.executable, "call", "begin", "--tool",
                                   "Read", "--input", '{"file_path": ".bashrc"}', "--json"],
                                  cwd=home,
                                  env={**os.environ, **env}, capture_output=True, text=True)
        assert answered.returncode == 0, answered.stderr
        served = json.loads(gg(home, "daemon", "status", "--json", env=env).stdout)
    finally:
        gg(home, "daemon", "stop", env=env)
    assert served["requests"], "the daemon answered the native client"
    assert json.loads(answered.stdout)["callId"]


def test_another_users_repository_is_an_error_with_the_safe_directory_hint(
        repo: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("giving the repository to another user needs root")
    subprocess.run(["chown", "-R", "nobody", str(repo)], check=True)
    for args in (["status"], ["init", "--no-hooks"], ["call", "begin", "--tool", "Read"]):
        proc = gg(repo, *args, check=False)
        assert proc.returncode == 1, (args, proc.stderr)
        assert proc.stderr.startswith("Error: the repository at"), proc.stderr
        assert f"Hint: run gitguard as its owner, or trust it: git config --global --add " \
               f"safe.directory {repo.resolve()}" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert not (repo / ".git" / "gitguard").exists()


def test_a_removed_worktrees_daemon_exits_and_leaves_nothing(repo: Path) -> None:
    side = repo.parent / "side"
    git(repo, "worktree", "add", "-q", str(side))
    before = capture(repo)
    gg(side, "init", "--no-hooks", "--no-daemon")
    admin = discover(side).store_dir.parent
    gg(side, "daemon", "start")
    pid = client.pid_of(str(admin / "gitguard"))
    assert pid is not None and alive(pid)
    try:
        (side / "scratch.txt").write_text("an untracked file the daemon sees\n")
        git(repo, "worktree", "remove", "--force", str(side))
        wait_for("the daemon to exit", lambda: not alive(pid))
    finally:
        if alive(pid):      # the test failed: leave no daemon behind
            os.kill(pid, signal.SIGKILL)
    assert not admin.exists(), sorted(str(p) for p in admin.rglob("*"))
    assert not side.exists()
    before.assert_unchanged(repo)


@pytest.mark.parametrize("how", ["gitfile", "admin dir", "absent"])
def test_every_discovery_agrees_on_a_git_dir_from_the_environment(
        repo: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    side = repo.parent / "side"
    git(repo, "worktree", "add", "-q", str(side))
    admin = Path(git(side, "rev-parse", "--absolute-git-dir").strip())
    named = {"gitfile": ".git", "admin dir": str(admin), "absent": str(repo / "nowhere")}[how]
    monkeypatch.setenv("GIT_DIR", named)
    monkeypatch.chdir(side)
    if how == "absent":
        proc = gg(side, "status", check=False)
        assert proc.returncode == 1 and proc.stderr.startswith("Error: GIT_DIR="), proc.stderr
        assert "Hint: " in proc.stderr
        return
    assert discover(side).store_dir == admin.resolve() / "gitguard"
    found = store_discovery.find_store(str(side))
    assert found is not None and Path(found[1]).resolve() == admin.resolve() / "gitguard"


def test_the_git_hook_shims_record_into_the_dotfiles_store(tmp_path: Path) -> None:
    home, bare, env = _dotfiles(tmp_path)
    gg(home, "init", "--no-hooks", env=env)
    gg(home, "hooks", "install", env=env)
    (home / ".bashrc").write_text("export EDITOR=nano\n")
    subprocess.run(["git", "commit", "-qam", "nano"], cwd=home, env={**os.environ, **env},
                   check=True)
    head = git(tmp_path, "--git-dir", str(bare), "rev-parse", "HEAD").strip()
    recorded = [json.loads(line)["data"] for line in
                (bare / "gitguard" / "baselines.jsonl").read_text().splitlines()]
    assert any(r.get("hook") == "post-commit" and r.get("newHead") == head for r in recorded)
    assert sorted(p.name for p in home.iterdir()) == [".bashrc"]
