"""`checkpoints.load` answers from what this process just wrote: the same checkpoint a
fresh read of the file gives, and never once the file is not the one written."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitguard.api import Guard
from gitguard.errors import CorruptRecord
from gitguard.models import Checkpoint
from gitguard.snapshot import checkpoints


def _fresh(guard: Guard, checkpoint_id: str) -> Checkpoint:
    checkpoints.forget()
    return checkpoints.load(guard.store, checkpoints.read_index(guard.store).find(checkpoint_id))


def test_a_just_written_checkpoint_loads_as_a_fresh_read(repo: Path) -> None:
    guard = Guard.open(repo)
    states = [{"plan": ["a", "b"], "step": 3, "nested": {"x": 1.5, "y": None}},
              {"pair": (1, 2)},                 # a tuple reads back as a list
              {"token": "AKIAIOSFODNN7EXAMPLE", "path": "caf\udce9.txt"},
              None]                             # carried over from the one before
    for n, state in enumerate(states):
        (repo / f"f{n}.txt").write_text(f"{n}\n")
        made = guard.checkpoint(state=state, messages=[{"role": "user", "content": f"m{n}"}])
        row = checkpoints.read_index(guard.store).find(made.checkpoint_id)
        if n == 0:      # the remembered one, not a read of the file
            assert guard.store.checkpoints_dir / row.file in checkpoints._WRITTEN
        remembered = checkpoints.load(guard.store, row)
        assert remembered == _fresh(guard, made.checkpoint_id), state
    entry = guard.begin_call("Edit", {"file_path": "f0.txt"}, writes=["f0.txt"])
    (repo / "f0.txt").write_text("edited\n")
    done = guard.end_call(entry.call_id, "succeeded", "ok")
    for checkpoint_id in (done.pre_checkpoint_id, done.post_checkpoint_id):
        assert checkpoint_id is not None
        row = checkpoints.read_index(guard.store).find(checkpoint_id)
        assert checkpoints.load(guard.store, row) == _fresh(guard, checkpoint_id)
    assert [p.path for p in done.file_patches] == ["f0.txt"]


@pytest.mark.parametrize("damage", ["edit", "remove"])
def test_a_changed_file_is_read_again(repo: Path, damage: str) -> None:
    guard = Guard.open(repo)
    made = guard.checkpoint(state={"step": 1})
    row = checkpoints.read_index(guard.store).find(made.checkpoint_id)
    path = guard.store.checkpoints_dir / row.file
    if damage == "edit":
        path.write_bytes(path.read_bytes().replace(b'"step":1', b'"step":2'))
    else:
        path.unlink()
    with pytest.raises(CorruptRecord):
        checkpoints.load(guard.store, row)
