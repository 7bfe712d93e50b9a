"""Random interleavings of user and agent edits to one file, then rollback and --merge.

Every line ever written is unique and named by its author ("b3" the committed file's,
"u7" the user's, "a2" an agent call's), so the test's own record of each edit says who
wrote, removed or kept each line, independently of gitguard's bookkeeping. Agent edits
go through the real ledger path (a declared Edit call: pre and post checkpoint, file
patches); user edits happen before, between and after them. Then `rollback-files` to the
first checkpoint, and `conflicts resolve --merge` when it left a conflict:

- no user edit after the agent's first write: the file is back to what the agent found
  (the user's earlier edits in it), and there is no conflict;
- otherwise the rollback leaves the file as it is; the merge then keeps every user line
  of the file, brings back no line the user deleted, leaves no agent line outside a
  marked region and puts back every line an agent call removed (inside a region where
  it overlaps the user's); where the merge refuses, the file is untouched and the
  conflict pending.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from gitguard.api import Guard
from gitguard.errors import MergeRefused
from gitguard.rollback import conflicts
from gitguard.rollback.rollback_files import rollback_files
from gitguard.settings import Settings
from gitguard.workspace import discover
from tests.helpers.gitstate import capture, fsck_clean
from tests.helpers.rollback import one_file_repo

NAME = "doc.txt"
BASE = [f"b{i}\n".encode() for i in range(1, 9)]

edit = st.tuples(st.sampled_from(["insert", "delete", "replace"]),
                 st.integers(min_value=0, max_value=40), st.integers(min_value=1, max_value=2))
step = st.tuples(st.sampled_from(["user", "agent"]), st.lists(edit, min_size=1, max_size=2))


class Record:
    """The test's own account: every line each party added and removed."""

    def __init__(self) -> None:
        self.count = 0
        self.added: dict[str, set[bytes]] = {"user": set(), "agent": set()}
        self.removed: dict[str, set[bytes]] = {"user": set(), "agent": set()}

    def apply(self, lines: list[bytes], who: str, edits: list[tuple[str, int, int]]
              ) -> list[bytes]:
        lines = list(lines)
        for kind, at, size in edits:
            where = at % (len(lines) + 1)
            if kind in ("delete", "replace") and lines:
                where = min(where, len(lines) - 1)
                gone = lines[where:where + size]
                del lines[where:where + size]
                self.removed[who].update(gone)
            if kind in ("insert", "replace"):
                new = []
                for _ in range(size):
                    self.count += 1
                    new.append(f"{who[0]}{self.count}\n".encode())
                lines[where:where] = new
                self.added[who].update(new)
        return lines


def regions(data: bytes) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """(lines outside marked regions, those and the regions' "ours" sides in file order,
    everything inside the regions)."""
    outside: list[bytes] = []
    view: list[bytes] = []
    inside: list[bytes] = []
    sides: list[str] = []     # one per open region: a region may hold an earlier step's
    for line in data.splitlines(keepends=True):
        if line.startswith(b"<<<<<<< "):
            sides.append("ours")
        elif line.startswith(b"||||||| ") and sides and sides[-1] == "ours":
            sides[-1] = "base"
        elif line == b"=======\n" and sides and sides[-1] == "base":
            sides[-1] = "theirs"
        elif line.startswith(b">>>>>>> ") and sides:
            sides.pop()
        elif not sides:
            outside.append(line)
            view.append(line)
        else:
            inside.append(line)
            if all(side == "ours" for side in sides):
                view.append(line)
    return outside, view, inside


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return one_file_repo(tmp_path_factory.mktemp("template") / "repo", NAME, b"".join(BASE))


def run_case(root: Path, steps: list[tuple[str, list[tuple[str, int, int]]]]) -> None:
    state = capture(root)
    guard = Guard(discover(root), Settings())
    guard.start_session("merge-prop")
    first = guard.checkpoint("manual").checkpoint_id
    record = Record()
    lines = list(BASE)
    found: list[bytes] | None = None        # the file as the agent first found it
    user_after = False                      # a user edit after the agent's first write
    if not any(who == "agent" for who, _ in steps):
        steps = [*steps, ("agent", [("insert", 3, 1)])]
    settled = lines                         # as the last agent call left it
    for number, (who, edits) in enumerate(steps):
        before = lines
        if who == "agent":
            # consecutive user edits between two calls are one change to gitguard
            user_after = user_after or (found is not None and lines != settled)
            with guard.tool_call("Edit", {"file_path": NAME, "n": number}, writes=[NAME]):
                lines = record.apply(lines, who, edits)
                (root / NAME).write_bytes(b"".join(lines))
            if lines != before and found is None:
                found = before
            settled = lines
        else:
            lines = record.apply(lines, who, edits)
            (root / NAME).write_bytes(b"".join(lines))
    user_after = user_after or (found is not None and lines != settled)
    if found is None:
        guard.close()
        return                              # no agent call changed the file
    current = b"".join(lines)
    result = rollback_files(guard, first)
    if not user_after or current == b"".join(found):
        assert not result.conflicts
        assert (root / NAME).read_bytes() == b"".join(found), "back to what the agent found"
        event("restored to what the agent found" if not user_after else "unchanged")
    else:
        assert [c.path for c in result.conflicts] == [NAME]
        assert (root / NAME).read_bytes() == current, "a conflict leaves the file untouched"
        check_merge(guard, root, record, lines)
    state.assert_unchanged(root)
    fsck_clean(root)
    guard.close()


def check_merge(guard: Guard, root: Path, record: Record, lines: list[bytes]) -> None:
    current = b"".join(lines)
    try:
        done = conflicts.resolve(guard, NAME, "manual_merge")
    except MergeRefused:
        event("merge refused")
        assert (root / NAME).read_bytes() == current, "a refused merge writes nothing"
        assert conflicts.find(guard, NAME).resolution == "pending"
        return
    event(f"merged, marked regions: {min(done.markers, 2)}")
    merged = (root / NAME).read_bytes()
    outside, view, inside = regions(merged)
    seen = set(view)
    user_lines = [line for line in lines if line not in record.added["agent"]]
    missing = [line for line in user_lines if line not in seen]
    assert not missing, f"user lines lost: {missing}"
    mine = set(user_lines)
    assert [line for line in view if line in mine] == user_lines, "user lines in order"
    back = [line for line in seen if line in record.removed["user"]]
    assert not back, f"lines the user deleted came back: {back}"
    left = [line for line in outside if line in record.added["agent"]]
    assert not left, f"agent lines outside any marked region: {left}"
    restored = record.removed["agent"] - record.added["agent"] - record.removed["user"]
    lost = [line for line in sorted(restored) if line not in set(outside) | set(inside)]
    assert not lost, f"lines an agent call removed were not put back: {lost}"
    if not done.markers:
        assert not inside


def property_settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, database=None,
                    phases=[Phase.explicit, Phase.generate, Phase.shrink],
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


@property_settings(int(os.environ.get("GITGUARD_MERGE_EXAMPLES", "20")))
@given(steps=st.lists(step, min_size=2, max_size=6))
def test_merge_keeps_every_user_line_and_drops_the_agents_clean_hunks(
        template: Path, tmp_path_factory: pytest.TempPathFactory,
        steps: list[tuple[str, list[tuple[str, int, int]]]]) -> None:
    root = tmp_path_factory.mktemp("case") / "repo"
    shutil.copytree(template, root)
    run_case(root, steps)


@pytest.mark.soak
@pytest.mark.skipif("GITGUARD_SOAK_TRIALS" not in os.environ,
                    reason="the long run is `make soak`'s")
@property_settings(300)
@given(steps=st.lists(step, min_size=2, max_size=10))
def test_merge_property_soak(template: Path, tmp_path_factory: pytest.TempPathFactory,
                             steps: list[tuple[str, list[tuple[str, int, int]]]]) -> None:
    root = tmp_path_factory.mktemp("case") / "repo"
    shutil.copytree(template, root)
    run_case(root, steps)
