"""The daemon's per-call bookkeeping. Attribution rows are written at once and fsynced in
a batch when the daemon pauses: readers see them immediately, a killed daemon loses none,
and daemon.state never says more is recorded than the fsynced rows hold. The dirty
summary of each checkpoint is kept up to date at the changed paths only."""

from __future__ import annotations

import json
import os
import random
import signal
from pathlib import Path

from gitguard.calls import attribution_log
from gitguard.ipc import client
from gitguard.snapshot import checkpoints
from gitguard.snapshot.snapshotter import Snapshotter
from tests.calls.test_attribution import Scripted
from tests.helpers.commands import gg
from tests.helpers.daemons import alive, running_daemon, store_of, wait_for


def _state_tree(repo: Path) -> str | None:
    try:
        return str(json.loads((store_of(repo) / "daemon.state").read_text())["tree"])
    except FileNotFoundError:
        return None


def test_rows_are_readable_at_once_and_daemon_state_follows_the_fsync(repo: Path) -> None:
    live = Scripted(repo)
    try:
        engine = live.daemon.engine
        call = live.guard.begin_call("Edit", {"file_path": "src/app.py"}, writes=["src/app.py"])
        before = _state_tree(repo)
        live.write("src/app.py", "def main():\n    return 2\n")
        live.guard.end_call(call.call_id, "succeeded")
        assert live.latest() == {"src/app.py": (call.call_id, "exact")}, "written already"
        assert engine.unsynced_since is not None
        assert _state_tree(repo) == before != engine.recorded_tree, "not ahead of the fsync"
        live.daemon.idle()
        assert engine.unsynced_since is None
        assert _state_tree(repo) == engine.recorded_tree
        second = live.guard.begin_call("Bash", {"command": "make"})
        live.write("out.txt", "built\n")
        live.guard.end_call(second.call_id, "succeeded")
        assert engine.unsynced_since is not None
    finally:
        live.stop()     # stopping fsyncs what is pending and saves daemon.state
    assert _state_tree(repo) == engine.recorded_tree
    assert {r.path: r.owner for r in attribution_log.read(live.store)} == {
        "src/app.py": call.call_id, "out.txt": second.call_id}


def test_a_daemon_killed_right_after_a_call_loses_no_row(repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    with running_daemon(repo) as pid:
        begun = json.loads(gg(repo, "call", "begin", "--tool", "Edit", "--input",
                              '{"file_path": "README.md"}', "--writes", "README.md",
                              "--json").stdout)
        (repo / "README.md").write_text("# the agent's edit\n")
        gg(repo, "call", "end", begun["callId"], "--status", "succeeded")
        os.kill(pid, signal.SIGKILL)
        wait_for("the daemon to die", lambda: not alive(pid))
        rows = [json.loads(line)["data"] for line in
                (store_of(repo) / "attribution.jsonl").read_text().splitlines()]
        assert {"path": "README.md", "owner": begun["callId"]}.items() <= rows[-1].items()
        gg(repo, "daemon", "start")     # recovers the stale pid; its scan finds nothing new
        assert client.alive(str(store_of(repo)))
    after = [json.loads(line)["data"] for line in
             (store_of(repo) / "attribution.jsonl").read_text().splitlines()]
    assert after == rows, "no path became unknown: the post checkpoint witnessed the edit"


def test_the_daemons_dirty_summary_equals_a_diff_against_head(repo: Path) -> None:
    """Past 200 dirty paths too (the stored list is cut there, the daemon keeps the whole
    set): every checkpoint's summary equals a fresh diff of its snapshot against HEAD."""
    live = Scripted(repo)
    plain = Snapshotter(live.store, live.guard.settings)
    rng = random.Random(5)
    try:
        for round_ in range(8):
            call = live.guard.begin_call("Bash", {"command": f"step {round_}"})
            for i in range(rng.randint(20, 60)):
                name = f"d{rng.randint(0, 9)}/f{rng.randint(0, 80)}.txt"
                if (repo / name).exists() and rng.random() < 0.2:
                    live.delete(name)
                else:
                    live.write(name, f"{round_} {i}\n")
            if round_ == 5:
                live.write("README.md", "# project\n")      # back to HEAD's bytes
                live.delete("src/app.py")
            ended = live.guard.end_call(call.call_id, "succeeded")
            index = checkpoints.read_index(live.store)
            for checkpoint_id in (ended.pre_checkpoint_id, ended.post_checkpoint_id):
                assert checkpoint_id is not None
                saved = checkpoints.load(live.store, index.find(checkpoint_id), False)
                expected = plain.dirty_against_head(plain.tree_of(saved.snapshot_commit))
                assert (list(saved.dirty), saved.dirty_count) == expected, checkpoint_id
        assert saved.dirty_count > 200
    finally:
        live.stop()
