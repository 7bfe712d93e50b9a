"""Live attribution, deterministic: a scripted event source says what the kernel would
have reported; everything else is real (repository, files, snapshots, records)."""

from __future__ import annotations

import json
import logging
import os
import queue
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitguard.calls import attribution_log
from gitguard.calls.attribution import Tracker, is_declared_only
from gitguard.daemon.daemon import Daemon
from gitguard.daemon.engine import Item
from gitguard.daemon.watcher import ScriptedSource
from gitguard.models import Attribution
from gitguard.storage.store import Store
from gitguard.workspace import discover
from tests.helpers.commands import gg


class Scripted:
    """An in-process daemon fed by a script: each helper changes a real file and emits
    the events inotify would have queued for it."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.sink: queue.SimpleQueue[Item] = queue.SimpleQueue()
        self.source = ScriptedSource(self.sink)
        ws = discover(repo)
        Store(ws).create()
        self.daemon = Daemon(ws, logging.getLogger("gitguard.test"), source=self.source,
                             sink=self.sink)
        self.daemon.start(serve_socket=False)
        self.guard = self.daemon.guard
        self.store = self.guard.store

    def write(self, rel: str, text: str) -> None:
        path = self.repo / rel
        existed = path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if not existed:
            self.source.emit("create", rel)
        self.source.emit("write", rel)
        self.source.emit("close", rel)

    def atomic_save(self, rel: str, text: str) -> None:
        """An editor's save: write a temporary file, rename it over the real one."""
        tmp = f"{rel}.swp~"
        self.write(tmp, text)
        os.replace(self.repo / tmp, self.repo / rel)
        self.source.emit("move_from", tmp)
        self.source.emit("move_to", rel)

    def delete(self, rel: str) -> None:
        (self.repo / rel).unlink()
        self.source.emit("delete", rel)

    def flush(self) -> None:
        self.daemon.flush()

    def latest(self) -> dict[str, tuple[str, str]]:
        return {p: (r.owner, r.confidence) for p, r in attribution_log.latest(self.store).items()}

    def stop(self) -> None:
        self.daemon.shutdown()


@pytest.fixture
def live(repo: Path) -> Iterator[Scripted]:
    harness = Scripted(repo)
    yield harness
    harness.stop()


def test_a_user_edit_between_calls_is_the_users(live: Scripted) -> None:
    call = live.guard.begin_call("Bash", {"command": "true"})
    live.guard.end_call(call.call_id, "succeeded")
    live.write("README.md", "# edited by the user\n")
    live.flush()
    assert live.latest() == {"README.md": ("user", "window")}
    record = attribution_log.read(live.store)[-1]
    assert isinstance(record, Attribution) and record.at.endswith("Z")


def test_a_declared_edit_is_the_calls_exactly(live: Scripted) -> None:
    call = live.guard.begin_call("Edit", {"file_path": "src/app.py", "old_string": "return 1",
                                          "new_string": "return 2"}, writes=["src/app.py"])
    live.write("src/app.py", "def main():\n    return 2\n")
    live.guard.end_call(call.call_id, "succeeded")
    assert live.latest() == {"src/app.py": (call.call_id, "exact")}


def test_a_shell_command_changing_three_files_is_the_calls_by_window(live: Scripted) -> None:
    call = live.guard.begin_call("Bash", {"command": "make all"})
    for name in ("out/a.txt", "out/b.txt", "README.md"):
        live.write(name, f"built {name}\n")
    live.guard.end_call(call.call_id, "succeeded")
    assert live.latest() == {name: (call.call_id, "window")
                             for name in ("out/a.txt", "out/b.txt", "README.md")}


def test_the_user_saving_the_same_file_during_a_shell_call_is_ambiguous(live: Scripted) -> None:
    call = live.guard.begin_call("Bash", {"command": "./format.sh"})
    live.write("src/app.py", "def main():\n    return 1  # formatted\n")    # the command
    live.atomic_save("src/app.py", "def main():\n    return 3  # user\n")   # the user's editor
    live.write("other.txt", "one write only\n")
    live.guard.end_call(call.call_id, "succeeded")
    assert live.latest() == {"src/app.py": (call.call_id, "ambiguous"),
                             "other.txt": (call.call_id, "window")}


def test_a_declared_write_whose_content_differs_is_ambiguous(live: Scripted) -> None:
    call = live.guard.begin_call("Write", {"file_path": "notes.txt", "content": "agent\n"},
                                 writes=["notes.txt"])
    live.write("notes.txt", "agent\nand the user's line\n")
    live.write("scratch.txt", "the user, elsewhere\n")       # not declared: the user's
    live.guard.end_call(call.call_id, "succeeded")
    assert live.latest() == {"notes.txt": (call.call_id, "ambiguous"),
                             "scratch.txt": ("user", "window")}


def test_an_editor_style_atomic_save_is_a_change_of_the_real_path(live: Scripted) -> None:
    live.atomic_save("README.md", "# saved atomically\n")
    live.flush()
    assert live.latest() == {"README.md": ("user", "window")}, "no record for the temp file"
    call = live.guard.begin_call("Edit", {"file_path": "README.md"}, writes=["README.md"])
    live.atomic_save("README.md", "# the agent saved it the same way\n")
    done = live.guard.end_call(call.call_id, "succeeded")
    assert [p.path for p in done.file_patches] == ["README.md"]
    assert live.latest()["README.md"] == (call.call_id, "exact")


def test_an_overflow_rescans_and_marks_the_interval_unknown(live: Scripted) -> None:
    live.write("seen.txt", "seen before the overflow\n")
    live.flush()
    (live.repo / "lost.txt").write_text("its events were lost\n")
    live.source.emit("overflow")
    live.write("seen.txt", "changed again\n")
    made = live.guard.checkpoint()
    assert live.latest() == {"seen.txt": ("user", "unknown"), "lost.txt": ("user", "unknown")}
    assert live.daemon.engine.counts["full_scans"] == 2, "start-up and the overflow"
    listing = gg(live.repo, "status", "--json").stdout
    assert made.snapshot_commit and "lost.txt" in listing


def test_touching_a_file_without_changing_it_records_nothing(live: Scripted) -> None:
    live.write("README.md", "# project\n")       # same bytes as committed
    live.source.emit("attrib", "src/app.py")
    live.flush()
    assert live.latest() == {}


def test_a_deleted_directory_is_recorded_for_every_file_below_it(live: Scripted) -> None:
    live.write("pkg/a.py", "a\n")
    live.write("pkg/b.py", "b\n")
    live.flush()
    call = live.guard.begin_call("Bash", {"command": "mv pkg /tmp/elsewhere"})
    shutil.rmtree(live.repo / "pkg")
    live.source.emit("move_from", "pkg", directory=True)     # moved out: one event only
    live.guard.end_call(call.call_id, "succeeded")
    assert live.latest()["pkg/a.py"] == (call.call_id, "window")
    assert live.latest()["pkg/b.py"] == (call.call_id, "window")


def test_records_survive_a_restart_and_feed_status_and_diff(repo: Path) -> None:
    first = Scripted(repo)
    call = first.guard.begin_call("Bash", {"command": "./gen.sh"})
    first.write("gen.txt", "generated\n")
    first.write("README.md", "# the command\n")
    first.atomic_save("README.md", "# the user too\n")
    first.guard.end_call(call.call_id, "succeeded")
    first.write("mine.txt", "the user's\n")
    first.stop()
    assert not (repo / ".git" / "gitguard" / "daemon.sock").exists()

    status = json.loads(gg(repo, "status", "--json").stdout)
    owners = {d["path"]: (d["owner"], d["confidence"]) for d in status["dirty"]}
    assert owners["gen.txt"] == (call.call_id, "window")
    assert owners["README.md"] == (call.call_id, "ambiguous")
    assert owners["mine.txt"] == ("user", "window")
    agent = gg(repo, "diff", "--agent").stdout
    user = gg(repo, "diff", "--user").stdout
    assert "gen.txt" in agent and "README.md" in agent and "mine.txt" not in agent
    assert "mine.txt" in user and "gen.txt" not in user

    second = Scripted(repo)         # a restart: the stopped daemon recorded everything
    assert second.latest()["mine.txt"] == ("user", "window")
    second.stop()


def test_changes_while_no_daemon_watched_are_unknown_at_the_next_start(repo: Path) -> None:
    first = Scripted(repo)
    first.write("a.txt", "watched\n")
    first.flush()
    first.stop()
    (repo / "a.txt").write_text("changed while nobody watched\n")
    (repo / "b.txt").write_text("created while nobody watched\n")
    second = Scripted(repo)
    assert second.latest() == {"a.txt": ("user", "unknown"), "b.txt": ("user", "unknown")}
    second.stop()


def test_a_call_left_open_by_a_crash_reopens_its_window(repo: Path) -> None:
    first = Scripted(repo)
    call = first.guard.begin_call("Bash", {"command": "long"})
    first.daemon.source.stop()          # the daemon dies without recording anything more
    second = Scripted(repo)
    assert call.call_id in second.daemon.engine.tracker.windows
    second.write("late.txt", "the command finished after the restart\n")
    second.guard.end_call(call.call_id, "succeeded")
    assert second.latest()["late.txt"] == (call.call_id, "window")
    second.stop()


def test_overlapping_calls() -> None:
    from gitguard.calls.attribution import FsEvent

    def write(tracker: Tracker, path: str, at: float) -> None:
        tracker.observe(FsEvent(path, "write", at))
        tracker.observe(FsEvent(path, "close", at + 0.1))

    def verdicts(tracker: Tracker, call: str) -> list[tuple[str, str, str]]:
        return [(v.path, v.owner, v.confidence) for v in tracker.close(call, {})]

    parallel_edits = Tracker()          # an agent's parallel Edit calls
    parallel_edits.open("e1", ["a"], True)
    parallel_edits.open("e2", ["b"], True)
    write(parallel_edits, "a", 1.0)
    write(parallel_edits, "b", 2.0)
    write(parallel_edits, "mine", 3.0)
    assert verdicts(parallel_edits, "e1") == [("a", "e1", "exact")]
    assert verdicts(parallel_edits, "e2") == [("b", "e2", "exact")]
    assert [(v.path, v.owner) for v in parallel_edits.flush_user()] == [("mine", "user")]

    edit_and_shell = Tracker()
    edit_and_shell.open("e1", ["a"], True)
    edit_and_shell.open("s1", [], False)
    write(edit_and_shell, "a", 1.0)
    write(edit_and_shell, "out", 2.0)
    assert verdicts(edit_and_shell, "e1") == [("a", "e1", "exact")]
    # Overlapping windows: a path no open call declared is ambiguous (DESIGN.md).
    assert verdicts(edit_and_shell, "s1") == [("out", "s1", "ambiguous")]

    background = Tracker()                  # a shell left running in the background
    background.open("bg", [], False)
    background.to_background("bg")
    write(background, "log.txt", 1.0)
    assert verdicts(background, "bg") == [("log.txt", "bg", "ambiguous")]

    shell_and_declared = Tracker()          # one declarer wins beside a running shell
    shell_and_declared.open("s1", [], False)
    shell_and_declared.open("w1", ["a"], True)
    write(shell_and_declared, "a", 1.0)
    assert verdicts(shell_and_declared, "w1") == [("a", "w1", "exact")]
    assert verdicts(shell_and_declared, "s1") == []

    two_shells = Tracker()
    two_shells.open("s1", [], False)
    two_shells.open("s2", [], False)
    write(two_shells, "out", 1.0)
    assert verdicts(two_shells, "s1") == [("out", "s1", "ambiguous")]
    assert verdicts(two_shells, "s2") == [("out", "s2", "ambiguous")]


def test_pure_rules() -> None:
    assert is_declared_only("Edit", {"file_path": "a"}, ["a"])
    assert not is_declared_only("Bash", {"command": "x"}, ["a"])
    assert not is_declared_only("Edit", {"file_path": "a"}, [])


def test_calls_made_without_the_daemon_are_not_unknown_at_its_next_start(repo: Path) -> None:
    from gitguard.api import Guard

    first = Scripted(repo)
    first.stop()
    plain = Guard.open(repo)                   # no daemon: the CLI's own call boundaries
    call = plain.begin_call("Write", {"file_path": "by_call.txt"}, writes=["by_call.txt"])
    (repo / "by_call.txt").write_text("the call wrote this\n")
    plain.end_call(call.call_id, "succeeded")
    (repo / "after.txt").write_text("after the last checkpoint, nobody watching\n")
    second = Scripted(repo)
    assert second.latest() == {"after.txt": ("user", "unknown")}
    second.stop()


def test_verify_checks_the_attribution_records(live: Scripted) -> None:
    live.write("a.txt", "a\n")
    live.write("b.txt", "b\n")
    live.flush()
    path = live.store.attribution_path
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 2
    path.write_bytes(lines[0].replace(b'"a.txt"', b'"A.txt"') + lines[1])
    proc = gg(live.repo, "verify", check=False)
    assert proc.returncode == 1 and "attribution.jsonl line 1" in proc.stdout


def test_a_changed_gitignore_rescans_so_newly_unignored_files_appear(live: Scripted) -> None:
    assert (live.repo / ".env").exists()
    call = live.guard.begin_call("Bash", {"command": "sed -i /env/d .gitignore"})
    live.write(".gitignore", "build/\n*.log\n")          # .env is no longer ignored
    assert live.daemon.engine.rescan_reason is None
    live.daemon.engine.drain()
    assert live.daemon.engine.rescan_reason == ".gitignore changed"
    live.daemon.idle()                                  # quiet: the rescan runs now
    assert live.daemon.engine.rescan_reason is None
    done = live.guard.end_call(call.call_id, "succeeded")
    # The command named .gitignore only: .env, which it made visible but never wrote, is
    # not its change (a rollback of it must not delete the user's .env).
    assert {p.path for p in done.file_patches} == {".gitignore"}
    assert (live.repo / ".env").exists()
    assert live.daemon.engine.counts["full_scans"] == 2


def test_gitguards_own_restore_writes_are_nobodys(live: Scripted) -> None:
    live.write("before.txt", "the user, before the restore\n")
    answer = live.daemon.restore_begin()
    assert live.latest() == {"before.txt": ("user", "window")}, "recorded before the restore"
    assert answer["tree"] and live.daemon.engine.counts["full_scans"] == 2
    live.write("src/app.py", "def main():\n    return 0  # restored\n")
    live.delete("README.md")
    live.daemon.restore_end()
    live.write("after.txt", "the user, after the restore\n")
    live.flush()
    assert live.latest() == {"before.txt": ("user", "window"), "after.txt": ("user", "window")}
    made = live.guard.checkpoint()
    listing = gg(live.repo, "status", "--json").stdout
    assert made.snapshot_commit and "README.md" in listing, "the restore is in the tree"
