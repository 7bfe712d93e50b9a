"""Rollback says what it left, and conflicts read like what they are: a 50 MB file the
agent created and a dependency directory (never snapshotted) are named in the output and
in --json; `conflicts show` on a real 1,024-line file prints two small diffs, not the
file; the resolutions are named by what they do."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

from tests.helpers.commands import gg, git
from tests.helpers.daemons import daemon_if
from tests.helpers.gitstate import capture

REAL = Path(click.__file__).with_name("termui.py")   # a real file nobody here wrote


def _start(repo: Path) -> str:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    return str(json.loads(gg(repo, "checkpoint", "--json").stdout)["checkpointId"])


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
def test_a_rollback_names_what_it_could_not_touch(repo: Path, daemon: bool) -> None:
    """The daemon's trees leave out what the scan leaves out: with it, the new
    node_modules/ was once snapshotted, so rollback deleted it without a word."""
    before = capture(repo)
    first = _start(repo)
    script = ("head -c 52428800 /dev/zero > model.bin && mkdir -p node_modules/left-pad && "
              "echo 'module.exports = 1' > node_modules/left-pad/index.js && "
              "echo agent >> src/app.py")
    with daemon_if(repo, daemon):
        gg(repo, "run", "--", "sh", "-c", script)
        call = json.loads(gg(repo, "ledger", "--json").stdout)[-1]["callId"]
        patched = gg(repo, "diff", call).stdout
        assert "src/app.py" in patched and "node_modules" not in patched, patched
        why = {"model.bin": "over the size cap", "node_modules": "in a skipped directory"}
        planned = gg(repo, "rollback-files", "--to", first, "--dry-run").stdout
        for path, reason in why.items():
            assert f"left    {path}: {reason}" in planned, planned
        done = json.loads(gg(repo, "rollback-files", "--to", first, "--json").stdout)
        assert done["restored"] == ["src/app.py"]
        assert {item["path"]: item["reason"].split(" (")[0] for item in done["left"]} == why
        assert (repo / "model.bin").stat().st_size == 52428800, "left as it is, and said so"
        assert (repo / "node_modules" / "left-pad" / "index.js").exists()
        again = json.loads(gg(repo, "rollback-files", "--to", first, "--json").stdout)
        assert [item["path"] for item in again["left"]] == ["model.bin", "node_modules"], \
            "still said after a rollback, whose own checkpoints scan nothing"
    before.assert_unchanged(repo)


def _conflict_on_a_real_file(repo: Path) -> tuple[str, bytes, bytes, bytes]:
    base = REAL.read_bytes()
    (repo / "core.py").write_bytes(base)
    git(repo, "add", "core.py")
    git(repo, "commit", "-qm", "click's core.py")
    first = _start(repo)
    lines = base.splitlines(keepends=True)
    agent_lines = list(lines)
    agent_lines[10] = b"# the agent was here\n"
    agent = b"".join(agent_lines)
    staged = repo.parent / "agent-core.py"
    staged.write_bytes(agent)
    gg(repo, "run", "--", "cp", str(staged), "core.py")
    user_lines = list(agent_lines)
    user_lines[-3] = b"# the user was here\n"
    user = b"".join(user_lines)
    (repo / "core.py").write_bytes(user)
    proc = gg(repo, "rollback-files", "--to", first, check=False)
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "--keep-user|--take-checkpoint|--merge" in proc.stdout
    return first, base, agent, user


def test_conflicts_show_prints_two_small_diffs_and_full_prints_the_files(repo: Path) -> None:
    _, base, agent, user = _conflict_on_a_real_file(repo)
    assert base.count(b"\n") > 1000
    shown = gg(repo, "conflicts", "show", "core.py").stdout
    assert len(shown.splitlines()) < 40, shown
    assert "+# the agent was here" in shown and "+# the user was here" in shown
    assert "--full" in shown
    whole = gg(repo, "conflicts", "show", "core.py", "--full").stdout
    assert whole.count(base.decode()) == 1 and user.decode() in whole and agent.decode() in whole


def test_take_checkpoint_writes_the_checkpoints_content_and_apply_agent_is_its_alias(
        repo: Path) -> None:
    first, base, _, user = _conflict_on_a_real_file(repo)
    helped = gg(repo, "conflicts", "resolve", "--help").stdout
    assert "--take-checkpoint" in helped and "--apply-agent" not in helped
    done = gg(repo, "conflicts", "resolve", "core.py", "--take-checkpoint")
    assert done.stdout.startswith("core.py: back to the checkpoint's content")
    assert (repo / "core.py").read_bytes() == base
    safety = json.loads(gg(repo, "ledger", "--json").stdout)[-1]["preCheckpointId"]
    gg(repo, "rollback-files", "--to", safety)
    assert (repo / "core.py").read_bytes() == user, "the user's version comes back"
    # The same conflict again, resolved with the old name: it does what the new one does.
    assert gg(repo, "rollback-files", "--to", first, check=False).returncode == 5
    old = json.loads(gg(repo, "conflicts", "resolve", "core.py", "--apply-agent",
                        "--json").stdout)
    assert old["resolution"] == "apply_agent" and (repo / "core.py").read_bytes() == base


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "daemon"])
def test_paths_reverted_on_window_confidence_are_named_and_one_can_be_put_back(
        repo: Path, daemon: bool) -> None:
    """A command whose writes cannot be read from its words (a script) owns what changed
    while it ran, on window confidence: rollback reverts it, says so path by path with the
    call, and `--to SAFETY --path P` puts back just that path (issue 31, item 5)."""
    first = _start(repo)
    (repo / "gen.sh").write_text("echo generated > gen.txt\necho more >> src/app.py\n")
    git(repo, "add", "gen.sh")
    git(repo, "commit", "-qm", "a generator")
    first = str(json.loads(gg(repo, "checkpoint", "--json").stdout)["checkpointId"])
    with daemon_if(repo, daemon):
        gg(repo, "run", "--", "sh", "gen.sh")
        call = json.loads(gg(repo, "ledger", "--json").stdout)[-1]["callId"]
        shown = gg(repo, "rollback-files", "--to", first).stdout
        done = json.loads(gg(repo, "rollback-files", "--to", first, "--dry-run",
                             "--json").stdout)
        assert done["windowReverted"] == [], "nothing left to revert"
        safety = [line.split()[2] for line in shown.splitlines()
                  if line.startswith("safety checkpoint")][0]
        back = json.loads(gg(repo, "rollback-files", "--to", safety, "--path", "gen.txt",
                             "--json").stdout)
    assert f"on window confidence: gen.txt was {call}'s" in shown, shown
    assert f"on window confidence: src/app.py was {call}'s" in shown, shown
    assert "--path P puts back one path" in shown
    assert back["restored"] == ["gen.txt"] and back["deleted"] == [], back
    assert (repo / "gen.txt").read_text() == "generated\n"
    assert "more" not in (repo / "src" / "app.py").read_text(), "only the path asked for"
