"""gitguard beside real hook managers: pre-commit (PyPI), husky and lefthook (npm).

In every install order, each tool's hooks run (a real checkout, a real push to a bare
remote), `git push --mirror` is refused while gitguard's pre-push hook runs, each tool's
own uninstall takes effect, and `gitguard hooks uninstall` leaves exactly what the other
tool has at that moment: never a hook its owner removed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.commands import gg, git
from tests.helpers.hooks import fingerprint, run_git, with_branch_and_remote, write_hook

SHIM_ID = "gitguard-shim-7c1e9a2f5b04d3e8"

PRE_COMMIT_CONFIG = """\
default_install_hook_types: [pre-push, post-checkout]
repos:
-   repo: local
    hooks:
    -   id: log-pre-push
        name: log-pre-push
        entry: sh -c 'echo "pre-commit pre-push" >> "$HOOK_LOG"'
        language: unsupported
        pass_filenames: false
        always_run: true
        stages: [pre-push]
    -   id: log-post-checkout
        name: log-post-checkout
        entry: sh -c 'echo "pre-commit post-checkout" >> "$HOOK_LOG"'
        language: unsupported
        pass_filenames: false
        always_run: true
        stages: [post-checkout]
"""
# scripts, not commands: lefthook skips a pre-push command when it finds no pushed files
LEFTHOOK_CONFIG = """\
pre-push:
  scripts:
    "log.sh":
      runner: sh
post-checkout:
  scripts:
    "log.sh":
      runner: sh
"""


@pytest.fixture(scope="session")
def node_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """husky 9 and lefthook 2 from npm, installed once into a temporary directory."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed: husky and lefthook come from npm")
    where = tmp_path_factory.mktemp("npm-tools")
    subprocess.run([npm, "install", "--no-audit", "--no-fund", "--loglevel=error",
                    "husky@9", "lefthook@2"], cwd=where, check=True, capture_output=True)
    return where / "node_modules" / ".bin"


class Tool:
    """One hook manager: its committed configuration, its install and its uninstall."""

    def __init__(self, name: str, repo: Path, node: Path | None) -> None:
        self.name, self.repo, self.node = name, repo, node

    def configure(self) -> None:
        if self.name == "pre-commit":
            (self.repo / ".pre-commit-config.yaml").write_text(PRE_COMMIT_CONFIG)
        elif self.name == "lefthook":
            (self.repo / "lefthook.yml").write_text(LEFTHOOK_CONFIG)
            for hook in ("pre-push", "post-checkout"):
                write_hook(self.repo / ".lefthook" / hook / "log.sh",
                           f'echo "lefthook {hook}" >> "$HOOK_LOG"\n')
        else:
            for hook in ("pre-push", "post-checkout"):
                (self.repo / ".husky").mkdir(exist_ok=True)
                (self.repo / ".husky" / hook).write_text(f'echo "husky {hook}" >> "$HOOK_LOG"\n')
        git(self.repo, "add", "-A", ".")
        git(self.repo, "commit", "-qm", f"{self.name} configuration")

    def _run(self, *args: str) -> None:
        if self.name == "pre-commit":
            argv = [sys.executable, "-m", "pre_commit", *args]
        else:
            assert self.node is not None
            argv = [str(self.node / self.name), *args]
        proc = subprocess.run(argv, cwd=self.repo, capture_output=True, text=True)
        assert proc.returncode == 0, f"{argv}: {proc.stdout}{proc.stderr}"

    def install(self) -> None:
        self._run() if self.name == "husky" else self._run("install")

    def uninstall(self) -> None:
        if self.name == "husky":    # husky 9's documented uninstall
            git(self.repo, "config", "--unset", "core.hooksPath")
        else:
            self._run("uninstall")

    def hook_dirs(self) -> list[Path]:
        dirs = [self.repo / ".git" / "hooks"]
        return dirs + [self.repo / ".husky"] if self.name == "husky" else dirs


def _moves(repo: Path) -> list[dict[str, str]]:
    events = json.loads(gg(repo, "status", "--json").stdout)["gitEvents"]
    return list(events["moves"])


def _state(tool: Tool) -> dict[str, object]:
    return {str(d): fingerprint(d) for d in tool.hook_dirs() if d.exists()}


def _shims_anywhere(tool: Tool) -> list[str]:
    return [str(p) for d in tool.hook_dirs() if d.exists() for p in d.rglob("*")
            if p.is_file() and (SHIM_ID in p.read_text(errors="replace")
                                or p.name.endswith(".gitguard-legacy"))]


def _check_out(repo: Path, branch: str, log: Path) -> str:
    before = log.read_text() if log.exists() else ""
    proc = run_git(repo, "checkout", "-q", branch, env={"HOOK_LOG": str(log)})
    assert proc.returncode == 0, proc.stderr
    return (log.read_text() if log.exists() else "")[len(before):]


@pytest.mark.parametrize("uninstall_first", ["tool", "gitguard"])
@pytest.mark.parametrize("install_first", ["tool", "gitguard"])
@pytest.mark.parametrize("name", ["pre-commit", "lefthook", "husky"])
def test_hook_manager_and_gitguard(name: str, install_first: str, uninstall_first: str,
                                   repo: Path, tmp_path: Path,
                                   request: pytest.FixtureRequest) -> None:
    node = None if name == "pre-commit" else request.getfixturevalue("node_bin")
    tool = Tool(name, repo, node)
    tool.configure()
    with_branch_and_remote(repo)
    log = tmp_path / "hook.log"
    env = {"HOOK_LOG": str(log)}
    untouched = _state(tool)

    # -- install, in this order; a tool that takes git's hooks away from gitguard is
    #    named by `status`, and `hooks install` puts gitguard back in front of it
    if install_first == "tool":
        tool.install()
        alone = _state(tool)
        gg(repo, "init")
    else:
        gg(repo, "init")
        gg(repo, "checkpoint")      # refs/gitguard/* exist before the tool comes
        tool.install()
        if name != "pre-commit":    # pre-commit runs gitguard's shim as its .legacy
            warned = gg(repo, "status")
            assert "Warning: refs/gitguard/* exist and no gitguard pre-push hook runs" \
                in warned.stdout
            shown = json.loads(gg(repo, "hooks", "status", "--json").stdout)
            if name == "lefthook":      # it keeps gitguard's shim as pre-push.old
                states = {h["name"]: h["state"] for h in shown["hooks"]}
                assert states["pre-push"] == "displaced"
            else:                       # git runs .husky/_ now
                assert "where git does not look" in shown["notice"]
            gg(repo, "hooks", "install")
        alone = None
    gg(repo, "checkpoint")

    # -- both run: a checkout, a push, and gitguard's refusal of --mirror
    ran = _check_out(repo, "other", log)
    assert f"{name} post-checkout" in ran
    moves = _moves(repo)
    assert moves[-1]["hook"] == "post-checkout"
    assert moves[-1]["newHead"] == git(repo, "rev-parse", "HEAD").strip()
    pushed = run_git(repo, "push", "origin", "other", env=env)
    assert pushed.returncode == 0, pushed.stderr
    assert f"{name} pre-push" in log.read_text()
    mirror = run_git(repo, "push", "--mirror", "origin", env=env)
    assert mirror.returncode != 0 and "refusing to push refs/gitguard/" in mirror.stderr
    assert "refs/gitguard/" not in git(repo, "ls-remote", "origin")
    assert json.loads(gg(repo, "verify", "--json").stdout)["warnings"] == []

    # -- the first uninstall takes effect, and only for its own hooks
    if uninstall_first == "tool":
        tool.uninstall()
        ran = _check_out(repo, "main", log)
        assert f"{name} post-checkout" not in ran, f"{name} uninstall did not take effect"
        if name == "husky" and install_first == "tool":
            # git runs .git/hooks again, where gitguard never was: it says so, goes there
            assert "no gitguard pre-push hook runs" in gg(repo, "status").stdout
            gg(repo, "hooks", "install")
            ran = _check_out(repo, "other", log)
        assert _moves(repo)[-1]["newHead"] == git(repo, "rev-parse", "HEAD").strip()
        mirror = run_git(repo, "push", "--mirror", "origin", env=env)
        assert mirror.returncode != 0 and "refusing to push refs/gitguard/" in mirror.stderr
        gg(repo, "hooks", "uninstall")
    else:
        gg(repo, "hooks", "uninstall")
        assert _shims_anywhere(tool) == []
        if alone is not None:
            assert _state(tool) == alone    # exactly what the tool had installed
        count = len(_moves(repo))
        ran = _check_out(repo, "main", log)
        assert f"{name} post-checkout" in ran
        assert len(_moves(repo)) == count   # gitguard's hook no longer runs
        tool.uninstall()
        ran = _check_out(repo, "other", log)
        assert f"{name} post-checkout" not in ran

    # -- neither left: the hooks directories hold what they held before both
    assert _shims_anywhere(tool) == []
    after = _state(tool)
    if name == "husky":     # husky's generated .husky/_ stays (its uninstall leaves it)
        after = {k: {p: v for p, v in f.items() if not p.startswith("_")}
                 for k, f in after.items()}
    assert after == untouched
    assert _check_out(repo, "main", log) == ""
