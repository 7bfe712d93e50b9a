"""The snapshot engine on real files: symlinks, modes, deletions, binary, odd names, size cap."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gitguard.api import Guard
from gitguard.errors import NotAWorkspace
from tests.helpers.commands import git
from tests.helpers.gitstate import GitState


def tree_listing(repo: Path, commit: str) -> dict[bytes, tuple[str, str]]:
    out = subprocess.run(["git", "ls-tree", "-r", "-z", commit], cwd=repo, capture_output=True,
                         check=True).stdout
    result = {}
    for item in out.split(b"\0"):
        if item:
            meta, path = item.split(b"\t", 1)
            mode, _, oid = meta.decode().split()
            result[path] = (mode, oid)
    return result


def test_a_call_records_every_kind_of_change(repo: Path, state_of: GitState) -> None:
    guard = Guard.open(repo)
    (repo / "doomed.txt").write_text("bye\n")
    (repo / "script.sh").write_text("echo hi\n")
    entry = guard.begin_call("run_command", {"command": "several things"})

    os.remove(repo / "doomed.txt")
    os.chmod(repo / "script.sh", 0o755)
    os.symlink("src/app.py", repo / "link")
    (repo / "blob.bin").write_bytes(bytes(range(256)) * 4)
    odd = os.fsencode(repo) + b"/caf\xe9.txt"
    with open(odd, "wb") as fh:
        fh.write(b"latin-1 name\n")

    done = guard.end_call(entry.call_id, "succeeded")
    by_path = {p.path: p for p in done.file_patches}
    assert set(by_path) == {"doomed.txt", "script.sh", "link", "blob.bin",
                            os.fsdecode(b"caf\xe9.txt")}
    assert by_path["doomed.txt"].after_hash is None
    assert by_path["script.sh"].before_mode == 0o100644
    assert by_path["script.sh"].after_mode == 0o100755
    assert by_path["link"].after_mode == 0o120000

    post = guard.load_checkpoint(done.post_checkpoint_id or "")
    listing = tree_listing(repo, post.snapshot_commit)
    assert listing[b"link"][0] == "120000"
    assert listing[b"caf\xe9.txt"][0] == "100644"
    assert b"doomed.txt" not in listing
    assert b".env" not in listing and b"build/out.bin" not in listing, "ignored files stay out"
    state_of.assert_unchanged(repo)

    patch = guard.diff(entry.call_id)
    subprocess.run(["git", "apply", "-R", "--check", "--binary"], cwd=repo, input=patch,
                   check=True)


def test_untracked_files_over_the_cap_are_skipped_and_recorded(repo: Path) -> None:
    (repo / ".gitguard.toml").write_text("untracked_size_cap = 1000\n")
    guard = Guard.open(repo)
    (repo / "big.dat").write_bytes(b"x" * 5000)
    (repo / "small.dat").write_bytes(b"x" * 10)
    made = guard.checkpoint()
    assert made.skipped == ("big.dat",)
    listing = tree_listing(repo, made.snapshot_commit)
    assert b"small.dat" in listing and b"big.dat" not in listing


def test_the_first_snapshot_tree_equals_the_workspace(repo: Path) -> None:
    guard = Guard.open(repo)
    (repo / "src" / "app.py").write_text("changed\n")
    (repo / "extra.txt").write_text("untracked\n")
    made = guard.checkpoint()
    listing = tree_listing(repo, made.snapshot_commit)
    assert set(listing) == {b".gitignore", b"README.md", b"src/app.py", b"extra.txt"}
    assert git(repo, "show", f"{made.snapshot_commit}:src/app.py") == "changed\n"
    # The unchanged README is the committed blob: seeded from the user's index, not re-hashed.
    assert listing[b"README.md"][1] == git(repo, "rev-parse", "HEAD:README.md").strip()


def test_each_worktree_has_its_own_store(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(other), "-b", "side")
    main_guard, wt_guard = Guard.open(repo), Guard.open(other)
    assert main_guard.store.root != wt_guard.store.root
    (other / "wt.txt").write_text("in worktree\n")
    made = wt_guard.checkpoint()
    assert b"wt.txt" in tree_listing(repo, made.snapshot_commit)
    assert wt_guard.status().branch == "side"
    assert main_guard.status().branch == "main"


def test_a_bare_repository_is_refused(tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    with pytest.raises(NotAWorkspace, match="bare repository"):
        Guard.open(bare)
