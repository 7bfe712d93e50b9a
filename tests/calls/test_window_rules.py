"""What a command whose writes cannot be read from its words owns in its window (issue 31,
item 2; docs/rollback.md, "What a call owns"): a new file in a directory it did not
touch is not its own (a stray, left as yours and said so), and its change to a file you
changed before it is ambiguous (a conflict, never reverted). Real repositories, the
checkpoint chain alone and with the daemon."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gitguard.api import Guard
from gitguard.calls.window_rules import strays, worked_in
from gitguard.rollback import conflicts
from gitguard.rollback.rollback_files import rollback_files
from tests.helpers.commands import gg
from tests.helpers.daemons import daemon_if

MODES = pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
APP = "def main():\n    return 1\n"


def _start(repo: Path) -> str:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    (repo / "docs").mkdir()
    (repo / "docs" / "index.md").write_text("# docs\n")
    return str(json.loads(gg(repo, "checkpoint", "--json").stdout)["checkpointId"])


def test_a_stray_is_a_new_file_in_a_directory_that_was_there_and_went_untouched() -> None:
    existed = {"src", "docs", "lib"}.__contains__
    changes = [("src/app.py", "0" * 40), ("src/gen.py", None), ("docs/note.md", None),
               ("build/lib/x.py", None), ("top.txt", None), ("lib/named.txt", None),
               ("lib/other.txt", None)]
    assert strays(changes, frozenset({"lib/named.txt"}), existed) == {
        "docs/note.md", "lib/other.txt"}, "the top is where it runs: top.txt is its"
    assert strays(changes, frozenset(), existed, worked_in=("", "docs")) == {
        "lib/other.txt", "lib/named.txt"}


@pytest.mark.parametrize(("command", "dirs"), [
    ("make", {""}),
    ("cd docs && make html", {"", "docs"}),
    ("cd /elsewhere && make", {""}),
    ("cd ../.. && make", {""}),
])
def test_the_directories_a_command_runs_in(command: str, dirs: set[str]) -> None:
    assert worked_in(command, "") == dirs


@MODES
def test_a_file_you_create_while_a_build_runs_stays_yours(repo: Path, daemon: bool) -> None:
    first = _start(repo)
    with daemon_if(repo, daemon):
        guard = Guard.open(repo)
        with guard.tool_call("Bash", {"command": "python3 build.py"}):
            (repo / "src" / "app.py").write_text(APP + "# generated\n")   # the build's
            (repo / "out").mkdir()
            (repo / "out" / "app.bin").write_bytes(b"\x7fELF")            # the build's
            (repo / "build.lock").write_text("where it runs\n")            # the build's
            (repo / "docs" / "notes.md").write_text("the user's notes\n")  # yours
        entry = guard.ledger()[-1]
        assert sorted(p.path for p in entry.file_patches) == ["build.lock", "out/app.bin",
                                                              "src/app.py"]
        done = json.loads(gg(repo, "rollback-files", "--to", first, "--json").stdout)
        assert done["restored"] == ["src/app.py"]
        assert done["deleted"] == ["build.lock", "out/app.bin"]
        left = {item["path"]: item["reason"] for item in done["left"]}
        assert set(left) == {"docs/notes.md"}
        assert "created while call_1 ran" in left["docs/notes.md"]
        assert (repo / "docs" / "notes.md").read_text() == "the user's notes\n"
        assert (repo / "src" / "app.py").read_text() == APP


@MODES
def test_a_builds_change_to_a_file_you_had_changed_is_a_conflict(repo: Path,
                                                                  daemon: bool) -> None:
    first = _start(repo)
    mine = APP.replace("return 1", "return 10  # mine")
    with daemon_if(repo, daemon):
        guard = Guard.open(repo)
        (repo / "src" / "app.py").write_text(mine)
        with guard.tool_call("Bash", {"command": "npm test"}):
            # your save while the tests ran: inotify cannot say who wrote it
            (repo / "src" / "app.py").write_text(mine + "# saved again by you\n")
        proc = gg(repo, "rollback-files", "--to", first, "--json", check=False)
        assert proc.returncode == 5
        done = json.loads(proc.stdout)
        assert done["restored"] == [] and [c["path"] for c in done["conflicts"]] == [
            "src/app.py"]
        assert "you had changed src/app.py before it ran" in done["conflicts"][0]["reason"]
        assert (repo / "src" / "app.py").read_text() == mine + "# saved again by you\n"
        assert "ambiguous origin" in gg(repo, "conflicts", "show", "src/app.py").stdout
        conflicts.resolve(guard, "src/app.py", "manual_merge")
        assert (repo / "src" / "app.py").read_text() == mine + "# saved again by you\n", \
            "--merge keeps an ambiguous change as yours"


def test_a_named_target_stays_the_commands_after_your_edit(repo: Path) -> None:
    """The open-history rule is for commands whose writes cannot be read: `sed -i` names
    its file, so its change after yours is its own and is reverted to your version."""
    first = _start(repo)
    guard = Guard.open(repo)
    mine = APP.replace("return 1", "return 10  # mine")
    (repo / "src" / "app.py").write_text(mine)
    with guard.tool_call("Bash", {"command": "sed -i s/10/20/ src/app.py"}):
        (repo / "src" / "app.py").write_text(mine.replace("10", "20"))
    done = rollback_files(guard, first)
    assert not done.conflicts and done.restored == ["src/app.py"]
    assert (repo / "src" / "app.py").read_text() == mine


def test_without_history_a_single_save_in_the_window_is_the_commands(repo: Path) -> None:
    """The blind side, said out loud: a file nobody changed since the checkpoint, written
    once while a build ran, is the build's on window confidence, and the rollback names
    it among the paths it reverted on that ground (`rollback-files --to SAFETY --path P`
    puts it back)."""
    first = _start(repo)
    guard = Guard.open(repo)
    with guard.tool_call("Bash", {"command": "make"}):
        (repo / "src" / "app.py").write_text(APP + "# one write\n")
    done = rollback_files(guard, first)
    assert done.restored == ["src/app.py"]
    assert [row["path"] for row in done.to_json()["windowReverted"]] == ["src/app.py"]
