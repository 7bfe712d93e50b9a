"""Size caps: dependency/build directories and big untracked files stay out of snapshots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitguard.api import Guard
from tests.helpers.commands import gg, git
from tests.helpers.gitstate import GitState


def tree_paths(repo: Path, commit: str) -> set[str]:
    return set(git(repo, "ls-tree", "-r", "--name-only", commit).splitlines())


def fill(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_dependency_dirs_are_left_out_and_listed(repo: Path, state_of: GitState) -> None:
    fill(repo, {
        "node_modules/left-pad/index.js": "module.exports = 1\n",
        "src/.venv/bin/python": "#!binary\n",
        "newpkg/main.py": "print('new')\n",
        "newpkg/sub/util.py": "x = 1\n",
        "newpkg/node_modules/dep/a.js": "a\n",
        "newpkg/sub/target/debug/out": "bin\n",
        "newpkg/build/skip-me.txt": "ignored by the .gitignore rule build/\n",
        "lone/node_modules/x/y.js": "only a dependency dir inside\n",
    })
    guard = Guard.open(repo)
    made = guard.checkpoint()
    paths = tree_paths(repo, made.snapshot_commit)
    assert {"newpkg/main.py", "newpkg/sub/util.py", "src/app.py"} <= paths
    assert not [p for p in paths if "node_modules" in p or ".venv" in p or "target" in p]
    assert not [p for p in paths if p.startswith(("build/", "newpkg/build/"))]
    assert set(made.skipped) == {"node_modules/", "src/.venv/", "newpkg/node_modules/",
                                 "newpkg/sub/target/", "lone/node_modules/"}
    # The next scan sees newpkg as known: its dependency dir is still listed, not walked.
    again = guard.checkpoint()
    assert set(again.skipped) == set(made.skipped)
    status = json.loads(gg(repo, "status", "--json").stdout)
    assert set(status["skipped"]) == set(made.skipped)
    assert status["storeBytes"] > 0
    human = gg(repo, "status").stdout
    assert "skipped (dependency or build directory): node_modules/" in human
    assert "store " in human
    state_of.assert_unchanged(repo)


def test_tracked_files_in_a_dist_dir_are_still_snapshotted(repo: Path) -> None:
    fill(repo, {"dist/bundle.js": "v1\n"})
    git(repo, "add", "dist/bundle.js")
    git(repo, "commit", "-qm", "ship dist")
    guard = Guard.open(repo)
    (repo / "dist" / "bundle.js").write_text("v2\n")
    fill(repo, {"dist/extra.js": "new\n", "dist/chunks/c1.js": "chunk\n"})
    made = guard.checkpoint()
    assert git(repo, "show", f"{made.snapshot_commit}:dist/bundle.js") == "v2\n"
    assert {"dist/extra.js", "dist/chunks/c1.js"} <= tree_paths(repo, made.snapshot_commit)
    assert made.skipped == ()


def test_a_declared_write_follows_the_scans_rule_without_a_scan(repo: Path) -> None:
    """A call that declares its writes is ended without a scan (the declared paths only).
    Its tree keeps the scan's rule: a new file in a dist/ the user committed files of is
    the call's; one in a new node_modules/ is left out. The next full scan agrees, so
    neither turns up later as the user's."""
    fill(repo, {"dist/bundle.js": "v1\n"})
    git(repo, "add", "dist")
    git(repo, "commit", "-qm", "ship dist")
    guard = Guard.init(repo)
    guard.checkpoint()
    guard.checkpoint()          # the stat index exists: calls end without a scan from here
    call = guard.begin_call("Write", {"file_path": "dist/extra.js"},
                            writes=["dist/extra.js", "node_modules/pkg/index.js"])
    fill(repo, {"dist/extra.js": "new\n", "node_modules/pkg/index.js": "dep\n"})
    ended = guard.end_call(call.call_id)
    assert [p.path for p in ended.file_patches] == ["dist/extra.js"]
    after = guard.checkpoint()
    assert "dist/extra.js" in tree_paths(repo, after.snapshot_commit)
    assert "node_modules/pkg/index.js" not in tree_paths(repo, after.snapshot_commit)
    assert after.skipped == ("node_modules/",)


def test_the_list_is_configurable(repo: Path) -> None:
    (repo / ".gitguard.toml").write_text('skip_dirs = ["vendor"]\n')
    fill(repo, {"vendor/lib.go": "package lib\n", "node_modules/a/b.js": "b\n"})
    made = Guard.open(repo).checkpoint()
    paths = tree_paths(repo, made.snapshot_commit)
    assert "node_modules/a/b.js" in paths and "vendor/lib.go" not in paths
    assert made.skipped == ("vendor/",)


def test_size_cap_and_skip_dirs_from_the_environment(repo: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITGUARD_SKIP_DIRS", "")
    monkeypatch.setenv("GITGUARD_SIZE_CAP", "64")
    fill(repo, {"node_modules/a.js": "small\n", "big.txt": "x" * 65, "edge.txt": "y" * 64})
    made = Guard.open(repo).checkpoint()
    paths = tree_paths(repo, made.snapshot_commit)
    assert {"node_modules/a.js", "edge.txt"} <= paths and "big.txt" not in paths
    assert made.skipped == ("big.txt",)
