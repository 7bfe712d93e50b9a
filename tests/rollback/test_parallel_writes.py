"""rollback-files with enough writes to go through the writer threads (fileops.PARALLEL_FROM):
the same tree as one by one, parents made once, and a kill amid the writes swept after."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from gitguard import fileops
from gitguard.api import Guard
from gitguard.rollback.rollback_files import rollback_files
from tests.helpers.commands import gg
from tests.helpers.gitstate import fsck_clean
from tests.helpers.rollback import Entry, put, tree_state

# Files in directories the agent removes whole (so the rollback makes them again, several
# writers at once in one new directory), edits spread over the tree, an executable, a link.
REMOVED = {f"gone/{d}/f{i}.txt": ("file", b"removed %s %d\n" % (d.encode(), i), False)
           for d in ("a", "b", "a/deep") for i in range(4)}
EDITED = {f"src/m{i}/mod.py": ("file", b"def f():\n    return %d\n" % i, i % 5 == 0)
          for i in range(12)}
OTHER: dict[str, Entry] = {"tools/run": ("link", b"../src/m0/mod.py", False),
                           "caf\udce9.txt": ("file", b"latin-1 name\n", False)}


def _seed(repo: Path) -> None:
    for path, entry in {**REMOVED, **EDITED, **OTHER}.items():
        put(repo, path, entry)
    gg(repo, "checkpoint", "--kind", "manual", "--step", "seed")


def _agent(guard: Guard, create: bool = True) -> None:
    entry = guard.begin_call("Bash", {"command": "refactor"})
    for path in REMOVED:
        put(guard.ws.root, path, None)
    assert all(p.is_dir() for p in (guard.ws.root / "gone").rglob("*"))   # empty dirs left
    for i, path in enumerate(EDITED):
        put(guard.ws.root, path, ("file", b"agent %d\n" % i, i % 3 == 0))
    put(guard.ws.root, "tools/run", ("link", b"elsewhere", False))
    put(guard.ws.root, "caf\udce9.txt", ("file", b"agent\n", False))
    for i in range(6 if create else 0):
        put(guard.ws.root, f"new/n{i}.txt", ("file", b"created\n", False))
    guard.end_call(entry.call_id, "succeeded")


def _roll_back(repo: Path, parallel_from: int) -> tuple[dict[str, Entry], dict[str, Entry]]:
    _seed(repo)
    before = tree_state(repo)
    guard = Guard.open(repo)
    target = guard.checkpoint("manual").checkpoint_id
    _agent(guard)
    old = fileops.PARALLEL_FROM
    fileops.PARALLEL_FROM = parallel_from
    try:
        result = rollback_files(guard, target)
    finally:
        fileops.PARALLEL_FROM = old
        guard.close()
    assert not result.conflicts
    assert sorted(result.restored) == sorted([*REMOVED, *EDITED, *OTHER])
    assert sorted(result.deleted) == [f"new/n{i}.txt" for i in range(6)]
    return before, tree_state(repo)


@pytest.mark.parametrize("parallel_from", [2, 10**9], ids=["threads", "one-by-one"])
def test_many_writes_restore_the_checkpoint_exactly(repo: Path, parallel_from: int) -> None:
    before, after = _roll_back(repo, parallel_from)
    assert after == before
    assert not [p for p in after if ".gitguard-" in p]
    fsck_clean(repo)


def test_a_kill_amid_the_writer_threads_is_undone_and_its_temp_files_swept(repo: Path) -> None:
    _seed(repo)
    guard = Guard.open(repo)
    target = guard.checkpoint("manual").checkpoint_id
    _agent(guard, create=False)     # no deletions: the first write is a writer thread's
    guard.close()
    before = tree_state(repo)
    proc = gg(repo, "rollback-files", "--to", target, check=False,
              env={"GITGUARD_FAULT": "rollback.mid_apply"})
    assert proc.returncode == -signal.SIGKILL
    # What a writer killed between its temp file and the rename leaves, named as ours; and
    # two look-alikes that are not: a name no planned write has, and no 8-hex suffix.
    (repo / "src" / "m3" / ".mod.py.gitguard-0123abcd.tmp").write_bytes(b"half")
    (repo / "src" / "m3" / ".notes.gitguard-0123abcd.tmp").write_bytes(b"the user's")
    (repo / "src" / "m4" / ".mod.py.gitguard-mine.tmp").write_bytes(b"the user's too")
    decoys = {p: v for p, v in tree_state(repo).items()
              if p.endswith((".notes.gitguard-0123abcd.tmp", ".mod.py.gitguard-mine.tmp"))}
    with Guard.open(repo) as guard:      # the CLI prints the non-UTF-8 name's raw bytes
        guard.resume()
        safety = [r.checkpoint_id for r in guard.checkpoints() if r.kind == "pre_rollback"][-1]
        assert not rollback_files(guard, safety).conflicts
    assert tree_state(repo) == before | decoys
    fsck_clean(repo)

