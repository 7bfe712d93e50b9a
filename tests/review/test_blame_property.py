"""`gitguard blame` over random interleavings of agent calls, user edits and user commits.

Every line ever written is unique and names its writer ("b3" the first commit's, "u7"
the user's, "c4x9" call c4's), so the test's own record says who wrote each line, apart
from gitguard's bookkeeping. Agent calls are declared Edits (exact) and commands whose
words name no file (window confidence); the user edits between calls and sometimes
commits. Then:

- blame names each line's writer: the call (with its confidence), the user, or the
  first commit; a committed line the history gives a call or the user stays theirs,
  with the commit named beside it;
- blame agrees with rollback: `rollback-files --to` a call's pre checkpoint (then
  `conflicts resolve --merge` where it left a conflict) takes out every line blamed on
  that call and every line blamed on a later declared call, and keeps every line blamed
  on the user, a commit or an earlier call (outside the merge's marked regions, and on
  their "yours" side inside them). A refused merge writes nothing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, event, example, given, settings
from hypothesis import strategies as st

from gitguard.api import Guard
from gitguard.errors import MergeRefused
from gitguard.review import blame
from gitguard.rollback import conflicts
from gitguard.rollback.rollback_files import rollback_files
from gitguard.settings import Settings
from gitguard.workspace import discover
from tests.helpers.commands import git
from tests.helpers.gitstate import capture, fsck_clean
from tests.helpers.rollback import one_file_repo
from tests.rollback.test_merge_property import regions

NAME = "doc.txt"
BASE = [f"b{i}\n".encode() for i in range(1, 9)]

edit = st.tuples(st.sampled_from(["insert", "delete", "replace"]),
                 st.integers(min_value=0, max_value=40), st.integers(min_value=1, max_value=2))
step = st.one_of(
    st.tuples(st.sampled_from(["edit", "edit", "shell", "user", "user"]),
              st.lists(edit, min_size=1, max_size=2)),
    st.tuples(st.just("commit"), st.just([])),
)


def apply(lines: list[bytes], tag: str, edits: list[tuple[str, int, int]],
          counter: list[int]) -> list[bytes]:
    lines = list(lines)
    for kind, at, size in edits:
        where = at % (len(lines) + 1)
        if kind in ("delete", "replace") and lines:
            where = min(where, len(lines) - 1)
            del lines[where:where + size]
        if kind in ("insert", "replace"):
            new = []
            for _ in range(size):
                counter[0] += 1
                new.append(f"{tag}x{counter[0]}\n".encode())
            lines[where:where] = new
    return lines


def writer(line: bytes) -> str:
    """Who wrote a line, from its text: "commit", "user", or a call id."""
    text = line.decode().strip()
    if text.startswith("b"):
        return "commit"
    if text.startswith("u"):
        return "user"
    return text.split("x")[0]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return one_file_repo(tmp_path_factory.mktemp("template") / "repo", NAME, b"".join(BASE))


def run_case(root: Path, steps: list[tuple[str, list[tuple[str, int, int]]]],
             pick: int) -> None:
    guard = Guard(discover(root), Settings())
    guard.start_session("blame-prop")
    guard.checkpoint("manual")
    lines = list(BASE)
    counter = [0]
    calls: list[tuple[str, str]] = []           # (call id, "edit" | "shell"), in order
    for number, (kind, edits) in enumerate(steps):
        if kind == "commit":
            git(root, "commit", "-qam", f"user commit {number}", "--allow-empty")
            continue
        if kind == "user":
            lines = apply(lines, "u", edits, counter)
            (root / NAME).write_bytes(b"".join(lines))
            continue
        call_id = f"c{number}"
        options = {"writes": [NAME]} if kind == "edit" else {}
        tool, tool_input = (("Edit", {"file_path": NAME}) if kind == "edit"
                            else ("Bash", {"command": f"step {number}"}))
        with guard.tool_call(tool, {**tool_input, "n": number}, call_id=call_id, **options):
            lines = apply(lines, call_id, edits, counter)
            (root / NAME).write_bytes(b"".join(lines))
        calls.append((call_id, kind))

    found = blame.blame(guard, str(root / NAME))
    assert [line.text + b"\n" for line in found.lines] == lines
    kinds = dict(calls)
    head = git(root, "rev-parse", "HEAD").strip()
    for line in found.lines:
        source, who = line.source, writer(line.text + b"\n")
        if who == "commit":
            assert source.kind == "commit", (line, source)
            assert source.commit is not None
        elif who == "user":
            assert source.kind == "user", (line, source)
        else:
            assert (source.kind, source.call_id) == ("call", who), (line, source)
            assert source.confidence == ("exact" if kinds[who] == "edit" else "window")
        if source.commit is not None:
            committed = git(root, "show", f"{source.commit}:{NAME}").encode()
            assert line.text + b"\n" in committed.splitlines(keepends=True)
            assert git(root, "merge-base", "--is-ancestor", source.commit, head) == ""
    if not calls:
        guard.close()
        return
    check_rollback(guard, root, found, calls, pick % len(calls))
    guard.close()


def check_rollback(guard: Guard, root: Path, found: blame.Blame,
                   calls: list[tuple[str, str]], index: int) -> None:
    """Roll back to call `index`'s pre checkpoint (and --merge): blame said what goes."""
    state = capture(root)
    call_id = calls[index][0]
    later = {c for c, _ in calls[index + 1:]}
    exact_later = {c for c, kind in calls[index + 1:] if kind == "edit"}
    earlier = {c for c, _ in calls[:index]}
    goes = [ln.text + b"\n" for ln in found.lines
            if ln.source.call_id in {call_id, *exact_later} and ln.source.kind == "call"]
    stays = [ln.text + b"\n" for ln in found.lines
             if ln.source.kind in ("user", "commit") or ln.source.call_id in earlier]
    undecided = [ln for ln in found.lines if ln.source.call_id in later - exact_later]
    event(f"lines blamed on later commands: {min(len(undecided), 1)}")
    current = (root / NAME).read_bytes()
    result = rollback_files(guard, _pre(guard, call_id))
    if result.conflicts:
        assert [c.path for c in result.conflicts] == [NAME]
        assert (root / NAME).read_bytes() == current
        try:
            done = conflicts.resolve(guard, NAME, "manual_merge")
        except MergeRefused:
            event("merge refused")
            assert (root / NAME).read_bytes() == current, "a refused merge writes nothing"
            return
        event(f"merged, marked regions: {min(done.markers, 1)}")
    else:
        event("rolled back without a conflict")
    outside, view, _ = regions((root / NAME).read_bytes())
    left = [line for line in goes if line in outside]
    assert not left, f"lines blamed on {call_id} or a later call are still there: {left}"
    lost = [line for line in stays if line not in view]
    assert not lost, f"lines blamed on the user, a commit or an earlier call are gone: {lost}"
    state.assert_unchanged(root)
    fsck_clean(root)


def _pre(guard: Guard, call_id: str) -> str:
    entry = next(e for e in guard.ledger() if e.call_id == call_id)
    assert entry.pre_checkpoint_id is not None
    return entry.pre_checkpoint_id


def property_settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, database=None,
                    phases=[Phase.explicit, Phase.generate, Phase.shrink],
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


@property_settings(int(os.environ.get("GITGUARD_BLAME_EXAMPLES", "25")))
@given(steps=st.lists(step, min_size=2, max_size=8), pick=st.integers(0, 7))
@example(steps=[("user", [("insert", 0, 1)]), ("edit", [("insert", 3, 2)]), ("commit", []),
                ("shell", [("replace", 4, 1)]), ("user", [("insert", 9, 1)])], pick=0)
def test_blame_names_each_writer_and_agrees_with_rollback(
        template: Path, tmp_path_factory: pytest.TempPathFactory,
        steps: list[tuple[str, list[tuple[str, int, int]]]], pick: int) -> None:
    root = tmp_path_factory.mktemp("case") / "repo"
    shutil.copytree(template, root)
    run_case(root, steps, pick)


@pytest.mark.soak
@pytest.mark.skipif("GITGUARD_SOAK_TRIALS" not in os.environ,
                    reason="the long run is `make soak`'s")
@property_settings(300)
@given(steps=st.lists(step, min_size=2, max_size=14), pick=st.integers(0, 13))
def test_blame_property_soak(template: Path, tmp_path_factory: pytest.TempPathFactory,
                             steps: list[tuple[str, list[tuple[str, int, int]]]],
                             pick: int) -> None:
    root = tmp_path_factory.mktemp("case") / "repo"
    shutil.copytree(template, root)
    run_case(root, steps, pick)
