"""The daemon's hand-written session refs are git's: git reads them (for-each-ref,
rev-parse, fsck, gc), they survive `git pack-refs`, a reflog is still appended to, a held
lock is still refused, and the commits chain as libgit2's did."""

from __future__ import annotations

import os
from pathlib import Path

import pygit2
import pytest

from gitguard.api import Guard
from gitguard.git import pack_writer
from gitguard.snapshot.daemon_snapshotter import DaemonSnapshotter
from gitguard.snapshot.snapshotter import SESSION_REF
from tests.helpers.commands import git

SID = "s1"
REF = SESSION_REF + SID


def _snap(repo: Path) -> DaemonSnapshotter:
    guard = Guard.init(repo)
    return DaemonSnapshotter(guard.store, guard.settings)


def _tree(repo: Path, text: str) -> str:
    (repo / "f.txt").write_text(text)
    git(repo, "add", "f.txt")
    return git(repo, "write-tree").strip()


def _commit(snap: DaemonSnapshotter, tree: str) -> str:
    with snap.store.writing():
        return snap.commit(tree, SID, {"kind": "test"})


def test_session_refs_written_by_hand_are_read_by_git(repo: Path) -> None:
    snap = _snap(repo)
    made = []
    for i in range(3):
        tree = _tree(repo, f"v{i}\n")
        made.append(_commit(snap, tree))
        assert git(repo, "rev-parse", REF).strip() == made[-1]
        assert git(repo, "rev-parse", f"{REF}^{{tree}}").strip() == tree
    assert _commit(snap, tree) == made[-1]          # nothing changed: the same commit
    assert git(repo, "rev-list", REF).split() == made[::-1]
    assert git(repo, "for-each-ref", "--format=%(objectname) %(refname)",
               "refs/gitguard/").split() == [made[-1], REF]
    assert not (repo / ".git" / "logs" / REF).exists()        # no reflog, as libgit2
    assert not (repo / ".git" / (REF + ".lock")).exists()
    git(repo, "fsck", "--strict", "--no-dangling")
    git(repo, "gc", "--prune=now", "--quiet")
    assert git(repo, "rev-list", REF).split() == made[::-1]
    git(repo, "fsck", "--strict", "--no-dangling")


def test_a_packed_session_ref_is_followed_then_overridden(repo: Path) -> None:
    snap = _snap(repo)
    first = _commit(snap, _tree(repo, "one\n"))
    git(repo, "pack-refs", "--all", "--prune")
    assert not (repo / ".git" / REF).exists()
    assert _commit(snap, git(repo, "rev-parse", f"{first}^{{tree}}").strip()) == first
    second = _commit(snap, _tree(repo, "two\n"))
    assert git(repo, "rev-parse", f"{second}^").strip() == first      # parent: the packed
    assert git(repo, "rev-parse", REF).strip() == second
    assert str(pygit2.Repository(str(repo)).references[REF].target) == second
    git(repo, "pack-refs", "--all", "--prune")
    third = _commit(snap, _tree(repo, "three\n"))
    assert git(repo, "for-each-ref", "--format=%(objectname)", REF).strip() == third
    git(repo, "fsck", "--strict", "--no-dangling")


def test_an_existing_reflog_is_appended_to(repo: Path) -> None:
    snap = _snap(repo)
    _commit(snap, _tree(repo, "one\n"))
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "update-ref", "--create-reflog", REF, head)     # someone made a reflog
    second = _commit(snap, _tree(repo, "two\n"))
    assert git(repo, "rev-parse", f"{second}^").strip() == head
    assert git(repo, "reflog", "show", "--format=%H", REF).split()[:2] == [second, head]


def test_log_all_ref_updates_always_gets_a_reflog(repo: Path) -> None:
    git(repo, "config", "core.logAllRefUpdates", "always")
    snap = _snap(repo)
    first = _commit(snap, _tree(repo, "one\n"))
    second = _commit(snap, _tree(repo, "two\n"))
    assert git(repo, "reflog", "show", "--format=%H", REF).split()[:2] == [second, first]


def test_a_held_ref_lock_is_refused_and_the_ref_kept(repo: Path) -> None:
    snap = _snap(repo)
    first = _commit(snap, _tree(repo, "one\n"))
    lock = repo / ".git" / (REF + ".lock")
    lock.write_text("someone else's\n")
    with pytest.raises(OSError, match="lock"):
        _commit(snap, _tree(repo, "two\n"))
    assert git(repo, "rev-parse", REF).strip() == first
    assert lock.read_text() == "someone else's\n"
    os.unlink(lock)
    second = _commit(snap, _tree(repo, "two\n"))
    assert git(repo, "rev-parse", f"{second}^").strip() == first


def test_a_shared_repository_setting_is_seen_when_the_config_changes(repo: Path) -> None:
    snap = _snap(repo)
    assert pack_writer.loose_dir(snap.repo, snap.store) is not None
    git(repo, "config", "core.sharedRepository", "group")
    assert pack_writer.loose_dir(snap.repo, snap.store) is None     # libgit2 writes then
    git(repo, "config", "--unset", "core.sharedRepository")
    assert pack_writer.loose_dir(snap.repo, snap.store) is not None
