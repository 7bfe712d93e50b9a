"""`gitguard gc`'s whole-repository repack (gitguard.retention.repack), by default up to a size.

It is the one place gitguard rewrites the user's packs, so the tests check what a user
would worry about: every object stays (unreachable ones too), HEAD, index, branches,
stash and refs are as they were, every kept checkpoint restores, and the store agrees.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from gitguard.api import Guard
from gitguard.git import packing
from gitguard.storage import trace_log
from tests.helpers.commands import gg, git
from tests.helpers.gitstate import capture, fsck_clean
from tests.helpers.storage import GC_ENV, calls


def exists(repo: Path, oid: str) -> bool:
    return subprocess.run(["git", "cat-file", "-e", oid], cwd=repo).returncode == 0


def unreachable_objects(repo: Path) -> tuple[str, str]:
    """A loose blob nothing names, and a commit only an old pack holds."""
    loose = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, check=True,
                           input=b"a blob the user may still want\n",
                           capture_output=True).stdout.decode().strip()
    git(repo, "checkout", "-q", "-b", "experiment")
    (repo / "experiment.txt").write_text("tried and dropped\n")
    git(repo, "add", "experiment.txt")
    git(repo, "commit", "-q", "-m", "experiment")
    dropped = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-")
    git(repo, "repack", "-a", "-d", "-q")          # the commit is now in a pack
    git(repo, "branch", "-q", "-D", "experiment")
    git(repo, "reflog", "expire", "--expire=now", "HEAD")  # not the stash: it is a reflog
    return loose, dropped


def packs(repo: Path) -> list[str]:
    return sorted(p.name for p in (repo / ".git" / "objects" / "pack").glob("*.pack"))


def test_repack_repository_keeps_every_object_and_the_users_state(repo: Path) -> None:
    loose, dropped = unreachable_objects(repo)
    guard = Guard.open(repo)
    guard.start_session("s1")
    calls(repo, guard, 5)
    guard.end_session()
    state_of = capture(repo)      # the user's set-up above is the state to keep
    kept_commits = {r.checkpoint_id: r.snapshot_commit for r in guard.checkpoints()}

    done = json.loads(gg(repo, "gc", "--repack-repository", "--json", env=GC_ENV).stdout)

    assert done["repackRepository"] is True
    repacked = done["repositoryRepack"]
    assert repacked["packsBefore"] >= 2 and repacked["packsAfter"] >= 1
    state_of.assert_unchanged(repo)
    assert exists(repo, loose) and exists(repo, dropped), "unreachable objects are kept"
    assert git(repo, "stash", "list").strip(), "the fixture's stash is still there"
    assert not packing.own_packs(Guard.open(repo).store), "our packs went into git's"
    runs = [e for e in trace_log.read(Guard.open(repo).store) if e.name == "gc.run"]
    assert runs[-1].data["repackMs"] == round(repacked["durationMs"], 3) > 0
    gg(repo, "verify")
    fsck_clean(repo)
    # Every kept checkpoint still restores, also after the user's own gc.
    git(repo, "gc", "--prune=now", "-q")
    again = Guard.open(repo)
    for checkpoint_id in done["kept"]:
        commit = again.load_checkpoint(checkpoint_id).snapshot_commit
        listing = git(repo, "ls-tree", "-r", "--object-only", commit)
        check = subprocess.run(["git", "cat-file", "--batch-check"], cwd=repo,
                               input=listing, capture_output=True, text=True, check=True)
        assert "missing" not in check.stdout
    assert set(done["kept"]) <= set(kept_commits)
    # gitguard goes on working on the repacked repository.
    again.start_session("s2")
    calls(repo, again, 2, start=100)
    gg(repo, "verify")


def test_repack_follows_the_config_and_the_size_limit(repo: Path) -> None:
    guard = Guard.open(repo)
    guard.start_session("s1")
    calls(repo, guard, 4)
    guard.end_session()
    state_of = capture(repo)
    off = {**GC_ENV, "GITGUARD_GC_REPACK_REPOSITORY": "0"}
    plain = json.loads(gg(repo, "gc", "--json", env=off).stdout)
    assert plain["repackRepository"] is False and plain["repositoryRepack"] is None
    assert packing.own_packs(Guard.open(repo).store), "without it our pack stays our own"

    small = {**GC_ENV, "GITGUARD_GC_REPACK_MAX_MB": "0.001"}
    dry = gg(repo, "gc", "--dry-run", env=small)
    assert "left your packs alone" in dry.stdout and "repack_max_mb" in dry.stdout
    listed = packs(repo)
    skipped = json.loads(gg(repo, "gc", "--json", env=small).stdout)
    assert skipped["repositoryRepack"] is None and packs(repo) == listed
    assert "above [gc] repack_max_mb" in skipped["repackNote"]
    # The flag repacks whatever the size; the default does too under the limit.
    forced = gg(repo, "gc", "--repack-repository", env=small).stdout
    assert "repository repacked:" in forced and packs(repo) != listed
    (repo / ".gitguard.toml").write_text("[gc]\nrepack_repository = false\n")
    assert json.loads(gg(repo, "gc", "--json", env=GC_ENV).stdout)["repositoryRepack"] is None
    (repo / ".gitguard.toml").write_text("[gc]\nrepack_repository = true\n")
    done = json.loads(gg(repo, "gc", "--json", env=GC_ENV).stdout)
    assert done["repackRepository"] is True and done["repositoryRepack"] is not None

    (repo / ".gitguard.toml").write_text("[gc]\nrepack_repository = \"maybe\"\n")
    bad = gg(repo, "gc", check=False, env=GC_ENV)
    assert bad.returncode == 1
    assert bad.stderr.startswith("Error:") and "Hint:" in bad.stderr
    assert "Traceback" not in bad.stderr
    (repo / ".gitguard.toml").unlink()
    state_of.assert_unchanged(repo)
