"""Random interleavings of agent calls and user edits, then rollback-files to any checkpoint.

The model records the working tree at every checkpoint. A change counts as the
user's when it happened between checkpoints outside every call window (what
gitguard can observe without the daemon); as the agent's when it happened inside
a call's pre→post window, except for a call that names the one file it writes (an
Edit, `cat > a.txt`): in its window only that file's change is the call's, and what
the user changes meanwhile on other paths (before, between and after its write) stays
the user's: without the daemon gitguard sees such a call's end as the tree before it
plus that file, so those changes show at the next snapshot (a change the user undid
before it is not seen at all). User edits come before, between, during and after
calls. After rolling back to checkpoint k, for a path the agent changed after k, with
"found" its content right before the agent's first change:
- when only the agent changed it since that change, or it holds exactly what the last
  agent change left and the user changed it only after that one (whatever moved it
  since), it holds "found" (the user's edits made before the agent's first write
  included);
- otherwise it is byte-identical to before the rollback, and listed as a conflict
  unless it already holds "found";
- a path only the user changed after k is byte-identical to before the rollback;
- nothing else changed (untracked, ignored and oversized files included);
- rolling back to the rollback's safety checkpoint gives back the tree as it was
  before the rollback, byte for byte.

The agent's calls are commands whose writes cannot be read from their words
(docs/rollback.md, window_rules): a file one creates in a directory that was there and
where it changed nothing else is the user's (a stray), and its change to a file the user
changed before it since k is ambiguous (a conflict, never reverted).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pygit2
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from gitguard.api import Guard
from gitguard.rollback.rollback_files import Result as RollbackResult
from gitguard.rollback.rollback_files import rollback_files
from gitguard.settings import Settings
from gitguard.workspace import discover
from tests.helpers.gitstate import capture, fsck_clean
from tests.helpers.rollback import Entry, make_repo, put, tree_state

PATHS = ["a.txt", "d/c.txt", "d/e/f.sh", "link"]
CONTENTS = [b"", b"one\n", b"two\nlines\n", b"caf\xe9 latin-1\n", b"\x00\x01binary\xff",
            b"long line\n" * 40]
TARGETS = [b"a.txt", b"nowhere", b"d/c.txt", b"../outside"]



def ops_on(paths: list[str]) -> st.SearchStrategy[tuple[str, str, bytes]]:
    return st.one_of(
        st.tuples(st.just("write"), st.sampled_from(paths), st.sampled_from(CONTENTS)),
        st.tuples(st.just("delete"), st.sampled_from(paths), st.just(b"")),
        st.tuples(st.just("chmod"), st.sampled_from(paths), st.just(b"")),
        st.tuples(st.just("symlink"), st.sampled_from(paths), st.sampled_from(TARGETS)),
    )


op = ops_on(PATHS)
agent_step = st.tuples(st.just("agent"), st.lists(op, min_size=1, max_size=3))
# A call that names the one file it writes (an Edit, or a shell command whose words say
# it: `cat > a.txt`), while the user changes other paths inside its window: the first
# action is the call's write, the rest the user's, made before and after it.
FILES = ["a.txt", "d/c.txt"]
during_step = st.tuples(
    st.sampled_from(["during-edit", "during-shell"]),
    st.tuples(st.sampled_from(FILES), st.sampled_from(CONTENTS)).flatmap(
        lambda write: st.lists(ops_on([p for p in PATHS if p != write[0]]), min_size=1,
                               max_size=3).map(lambda user: [("write", *write), *user])))
step = st.one_of(
    agent_step, agent_step,                            # calls twice as often as the rest
    during_step,
    st.tuples(st.just("user"), st.lists(op, min_size=1, max_size=2)),
    st.tuples(st.just("checkpoint"), st.just([])),
    st.tuples(st.just("rollback"), st.just([])),   # to a checkpoint picked from the history
)


def perform(root: Path, action: tuple[str, str, bytes]) -> None:
    kind, rel, value = action
    current = tree_state(root).get(rel)
    if kind == "write":
        put(root, rel, ("file", value, bool(current and current[2])))
    elif kind == "delete":
        put(root, rel, None)
    elif kind == "chmod" and current is not None and current[0] == "file":
        put(root, rel, ("file", current[1], not current[2]))
    elif kind == "symlink":
        put(root, rel, ("link", value, False))


class History:
    """The model: the tree at each checkpoint, and which stretches were a call's window."""

    def __init__(self) -> None:
        self.points: list[tuple[str, dict[str, Entry]]] = []   # (checkpoint id, tree then)
        # (pre, post) indexes -> (the paths the call owns there, None: all that changed;
        # whether a command the words say nothing of ran there)
        self.windows: dict[tuple[int, int], tuple[frozenset[str] | None, bool]] = {}

    def add(self, checkpoint_id: str, tree: dict[str, Entry]) -> None:
        self.points.append((checkpoint_id, tree))

    def close_window(self, owns: frozenset[str] | None = None, command: bool = False) -> None:
        self.windows[(len(self.points) - 2, len(self.points) - 1)] = (owns, command)

    def changes(self, k: int, now: dict[str, Entry]
                ) -> dict[str, list[tuple[str, Entry | None]]]:
        """Per path changed after point k: (whose: "agent", "user" or "ambiguous", content
        before) for each change, oldest first."""
        observed = [tree for _, tree in self.points[k:]] + [now]
        found: dict[str, list[tuple[str, Entry | None]]] = {}
        for i in range(len(observed) - 1):
            owns, command = self.windows.get((k + i, k + i + 1), (frozenset(), False))
            then, after = observed[i], observed[i + 1]
            changed = [p for p in PATHS if then.get(p) != after.get(p)]
            for path in changed:
                whose = "agent" if owns is None or path in owns else "user"
                if command and then.get(path) is None and _stray(path, then, changed):
                    whose = "user"
                elif command and any(w == "user" for w, _ in found.get(path, ())):
                    whose = "ambiguous"
                found.setdefault(path, []).append((whose, then.get(path)))
        return found


def _stray(path: str, then: dict[str, Entry], changed: list[str]) -> bool:
    """A new file in a directory that was there, that the command does not run in (the
    top), and where the step changed nothing that was there before (window_rules)."""
    where = path.rpartition("/")[0]
    if not where or not any(p.startswith(where + "/") for p in then):
        return False                        # where it runs, or a directory it made
    if any(p.startswith(path + "/") for p in then):
        return False                        # it replaced a directory that was there
    return not any(p.rpartition("/")[0] == where and then.get(p) is not None
                   for p in changed)


def _scanned_whole(guard: Guard, checkpoint_id: str, now: dict[str, Entry]) -> bool:
    """Whether the checkpoint's tree is the whole working tree as it is now."""
    row = next(r for r in guard.checkpoints() if r.checkpoint_id == checkpoint_id)
    tree = guard.snap.repo.get(guard.snap.tree_of(row.snapshot_commit))
    stored: dict[str, tuple[str, int]] = {}
    for rel in PATHS:
        try:
            item = tree[rel]
        except KeyError:
            continue
        stored[rel] = (str(item.id), item.filemode)
    modes = {"link": 0o120000}
    wanted = {rel: (str(pygit2.hash(data)),
                    modes.get(kind, 0o100755 if executable else 0o100644))
              for rel, (kind, data, executable) in now.items() if rel in PATHS}
    return stored == wanted


def checked_rollback(guard: Guard, root: Path, history: History, k: int) -> RollbackResult:
    """Roll back to point k and check every promise against the model; record the windows."""
    before = tree_state(root)
    changes = history.changes(k, before)
    result = rollback_files(guard, history.points[k][0])
    after = tree_state(root)
    conflicts: set[str] = set()
    for path, steps in changes.items():
        agents = [i for i, (whose, _) in enumerate(steps) if whose != "user"]
        if not agents:
            assert after.get(path) == before.get(path), f"{path}: only the user changed it"
            continue
        found = steps[agents[0]][1]          # as the agent found it
        # what the last agent change left: a file holding exactly that is the agent's,
        # whatever moved it after that change (docs/rollback.md, Ownership); a user change
        # between two agent changes, or an ambiguous one, still makes it a conflict
        left = steps[agents[-1] + 1][1] if agents[-1] + 1 < len(steps) else before.get(path)
        between = not all(whose == "agent" for whose, _ in steps[agents[0]:agents[-1]])
        exact = (not between and before.get(path) == left
                 and all(whose != "ambiguous" for whose, _ in steps))
        if all(whose == "agent" for whose, _ in steps[agents[0]:]) or exact:
            assert after.get(path) == found, f"{path}: back to what the agent found"
        else:
            assert after.get(path) == before.get(path), f"{path}: the user changed it"
            if before.get(path) != found:
                conflicts.add(path)
    assert {c.path for c in result.conflicts} == conflicts
    for path in set(before) | set(after):
        if path not in changes:
            assert after.get(path) == before.get(path), f"{path} was not the agent's"
    if result.applied is not None:   # the rollback is a window like a call's
        history.add(result.applied.safety.checkpoint_id, before)
        history.add(result.applied.entry.post_checkpoint_id or "", after)
        history.close_window()
    return result


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_repo(tmp_path_factory.mktemp("template") / "repo")


def rollback_settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])


steps_strategy = st.lists(step, min_size=3, max_size=7)
picks_strategy = st.lists(st.integers(min_value=0, max_value=5), min_size=8, max_size=8)


@rollback_settings(int(os.environ.get("GITGUARD_ROLLBACK_EXAMPLES", "25")))
@given(steps=steps_strategy, picks=picks_strategy)
# found by the 'during' steps: the user deletes the agent's file inside another call's
# window and writes the agent's bytes back after it; no snapshot saw the difference
@example(steps=[("during-edit", [("write", "d/c.txt", b""), ("write", "a.txt", b""),
                                 ("write", "a.txt", b"")]),
                ("during-edit", [("write", "a.txt", b"one\n"), ("delete", "d/c.txt", b"")]),
                ("user", [("write", "d/c.txt", b"")])], picks=[0] * 8)
# and by the soak run: the user recreates what a rollback deleted, a checkpoint sees it,
# the user deletes it again; absent is what the rollback "wrote", so it is rollable
@example(steps=[("agent", [("write", "d/e/f.sh", b"")]), ("rollback", []),
                ("user", [("write", "d/e/f.sh", b"")]), ("checkpoint", []),
                ("user", [("delete", "d/e/f.sh", b"")])], picks=[0, 0, 0, 0, 0, 0, 0, 2])
@example(steps=[("agent", [("write", "a.txt", b"")]), ("user", [("delete", "a.txt", b"")]),
                ("agent", [("write", "a.txt", b"")])], picks=[0] * 8)
# a call deletes one file and overwrites another that then holds the deleted one's bytes
# (or a symlink the same target): an edit, not a move (moves.of_entries)
@example(steps=[("agent", [("write", "a.txt", b"")]),
                ("during-edit", [("write", "a.txt", b""), ("write", "d/c.txt", b"")]),
                ("agent", [("write", "d/c.txt", b"one\n")]),
                ("agent", [("delete", "d/c.txt", b""), ("write", "a.txt", b"one\n")])],
         picks=[0] * 8)
@example(steps=[("agent", [("write", "a.txt", b"")]),
                ("during-edit", [("write", "a.txt", b""), ("write", "d/c.txt", b""),
                                 ("write", "link", b"")]),
                ("agent", [("symlink", "d/c.txt", b"nowhere")]),
                ("agent", [("delete", "d/c.txt", b""), ("symlink", "link", b"nowhere")])],
         picks=[0] * 8)
# a file the user turned into a symlink inside a call's window: that call's end is a
# full scan (the stat index cannot advance), so its checkpoint already holds the link
@example(steps=[("during-edit", [("write", "a.txt", b""), ("write", "d/e/f.sh", b"")]),
                ("during-edit", [("write", "a.txt", b""), ("symlink", "d/e/f.sh", b"a.txt")]),
                ("agent", [("write", "d/e/f.sh", b"")])], picks=[0, 0, 0, 0, 0, 0, 0, 4])
def test_rollback_reverts_only_the_agent_and_is_itself_revertible(
        template: Path, tmp_path_factory: pytest.TempPathFactory,
        steps: list[tuple[str, list[tuple[str, str, bytes]]]], picks: list[int]) -> None:
    run_case(tmp_path_factory.mktemp("case") / "repo", template, steps, picks)


@pytest.mark.soak
@pytest.mark.skipif("GITGUARD_SOAK_TRIALS" not in os.environ,
                    reason="the long run is `make soak`'s")
@rollback_settings(300)
@given(steps=st.lists(step, min_size=3, max_size=12), picks=picks_strategy)
def test_rollback_property_soak(
        template: Path, tmp_path_factory: pytest.TempPathFactory,
        steps: list[tuple[str, list[tuple[str, str, bytes]]]], picks: list[int]) -> None:
    run_case(tmp_path_factory.mktemp("case") / "repo", template, steps, picks)


def run_case(root: Path, template: Path, steps: list[tuple[str, list[tuple[str, str, bytes]]]],
             picks: list[int]) -> None:
    shutil.copytree(template, root, symlinks=True)
    git_state = capture(root)
    guard = Guard(discover(root), Settings(untracked_size_cap=50_000))
    guard.start_session("prop")
    history = History()
    history.add(guard.checkpoint("manual").checkpoint_id, tree_state(root))
    for number, (kind, actions) in enumerate(steps):
        if kind == "checkpoint":
            history.add(guard.checkpoint("manual").checkpoint_id, tree_state(root))
        elif kind == "user":
            for action in actions:
                perform(root, action)
        elif kind == "rollback":
            checked_rollback(guard, root, history, picks[number % len(picks)] % len(history.points))
        elif kind.startswith("during"):
            event("a user edit inside a call's window")
            (_, path, _), user = actions[0], actions[1:]
            entry = (guard.begin_call("Edit", {"file_path": path}, writes=[path])
                     if kind == "during-edit" else
                     guard.begin_call("Bash", {"command": f"cat > {path}"}))
            seen = tree_state(root)
            history.add(entry.pre_checkpoint_id or "", seen)
            half = len(user) // 2
            for action in [*user[:half], actions[0], *user[half:]]:
                perform(root, action)
            done = guard.end_call(entry.call_id, "succeeded")
            # Without the daemon such a call's end is the tree before it plus its file
            # (Snapshotter.write_declared): the user's other changes are seen at the next
            # snapshot, as the user's, and one undone before it is not seen at all. Where
            # the stat index cannot advance (a file became a symlink), the end is a full
            # scan and sees them already: still the user's, as the call's patches leave
            # them out, but before the end's checkpoint.
            now = tree_state(root)
            seen = {**seen, path: now[path]} if path in now else \
                {k: v for k, v in seen.items() if k != path}
            if _scanned_whole(guard, done.post_checkpoint_id or "", now):
                seen = now
            history.add(done.post_checkpoint_id or "", seen)
            history.close_window(frozenset([path]))
        else:
            entry = guard.begin_call("Bash", {"command": f"step {number}"})
            history.add(entry.pre_checkpoint_id or "", tree_state(root))
            for action in actions:
                perform(root, action)
            done = guard.end_call(entry.call_id, "succeeded")
            history.add(done.post_checkpoint_id or "", tree_state(root))
            history.close_window(command=True)

    before = tree_state(root)
    result = checked_rollback(guard, root, history, picks[-1] % len(history.points))
    event(f"restored+deleted: {min(len(result.restored) + len(result.deleted), 3)}")
    event(f"conflicts: {min(len(result.conflicts), 2)}")
    event(f"rollbacks in the history: {min(sum(k == 'rollback' for k, _ in steps), 2)}")
    if result.applied is not None:
        undo = rollback_files(guard, result.applied.safety.checkpoint_id)
        assert not undo.conflicts
        assert tree_state(root) == before, "rolling back the rollback restores every byte"
    git_state.assert_unchanged(root)
    fsck_clean(root)
    guard.close()
