"""At a terminal `ledger` and `status` are compact tables coloured by status, and long work
shows its progress on stderr; piped, every command prints the plain text it always did
(and nothing more), `--json` is byte for byte the same, and nothing a hook or a call runs
imports rich. Each command runs in a real process, under a real pseudo-terminal."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from tests.helpers.commands import gg, git
from tests.helpers.daemons import running_daemon
from tests.helpers.terminal import ANSI, in_terminal, plain
from tests.test_import_graph import graph

# SGR colour parameters: foreground/background 30-49 (38/48 extended), bright 90-107.
COLOUR = re.compile(rb"\x1b\[(?:[0-9;]*;)?(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;[0-9;]*)?m")
RULE = "─"      # the line under a table's header


def _worked(repo: Path) -> None:
    """Two finished calls, one per outcome, and a change of the user's."""
    gg(repo, "init", "--no-daemon", "--no-hooks")
    gg(repo, "call", "begin", "--tool", "Write", "--input", '{"file_path": "notes.txt"}',
       "--writes", "notes.txt")
    (repo / "notes.txt").write_text("the agent's [bold]notes[/bold]\n")
    gg(repo, "call", "end", "call_1", "--status", "succeeded")
    gg(repo, "call", "begin", "--tool", "Bash", "--input",
       '{"command": "npm publish [red]--tag next[/red]"}')
    gg(repo, "call", "end", "call_2", "--status", "failed")
    (repo / "mine.txt").write_text("the user's\n")


def _without_store_size(text: str) -> str:
    """`status` names the store's size, which each run's own records change."""
    return "\n".join(line for line in text.splitlines() if not line.startswith("store "))


def test_ledger_is_a_table_with_each_status_in_its_colour(repo: Path) -> None:
    _worked(repo)
    code, seen, _ = in_terminal(repo, "ledger")
    assert code == 0
    lines = plain(seen).splitlines()
    assert lines[0].split() == ["call", "status", "tool", "idempotency", "replay", "summary"]
    assert set(lines[1].strip()) == {RULE}
    assert lines[2].split() == ["call_1", "succeeded", "Write", "conditional", "auto",
                                "notes.txt"]
    # a summary's brackets are text, not rich markup
    assert lines[3].split() == ["call_2", "failed", "Bash", "non_idempotent", "never", "npm",
                                "publish", "[red]--tag", "next[/red]"]
    assert b"\x1b[32msucceeded" in seen and b"\x1b[31mfailed" in seen


def test_status_lists_changed_paths_as_a_table(repo: Path) -> None:
    _worked(repo)
    code, seen, _ = in_terminal(repo, "status")
    assert code == 0 and COLOUR.search(seen)
    text = plain(seen)
    assert f"HEAD {git(repo, 'rev-parse', 'HEAD')[:12]} on main" in text
    rows = {line.split()[1]: line.split(None, 2)[2].strip() for line in text.splitlines()
            if line.strip()[:2] in ("A ", "M ", "D ")}
    assert rows == {"notes.txt": "call_1 (exact)", "mine.txt": "the user"}
    assert RULE in text


def test_no_color_takes_the_colour_away_and_keeps_the_table(repo: Path) -> None:
    _worked(repo)
    for verb in ("ledger", "status"):
        code, seen, _ = in_terminal(repo, verb, env={"NO_COLOR": "1"})
        assert code == 0 and RULE in plain(seen)
        assert not COLOUR.search(seen), seen
        # no-color.org: an empty NO_COLOR is as if it were unset
        assert COLOUR.search(in_terminal(repo, verb, env={"NO_COLOR": ""})[1])
    # TERM=dumb: no colour either (rich's own rule)
    assert not COLOUR.search(in_terminal(repo, "ledger", env={"TERM": "dumb"})[1])


def test_piped_output_is_the_plain_text_and_json_is_unchanged(repo: Path) -> None:
    _worked(repo)
    ledger = gg(repo, "ledger").stdout
    assert ledger.splitlines() == [
        "call_1     succeeded  Write          conditional     auto   notes.txt",
        "call_2     failed     Bash           non_idempotent  never  "
        "npm publish [red]--tag next[/red]"]
    # stdout piped with stderr on a terminal, and FORCE_COLOR set: still the plain text
    for env in ({}, {"FORCE_COLOR": "1"}):
        _, on_terminal, piped = in_terminal(repo, "ledger", env=env, stdout_piped=True)
        assert piped.decode() == ledger and not ANSI.search(piped)
        assert not on_terminal      # no progress line, no escape: nothing at all
    assert gg(repo, "ledger", env={"FORCE_COLOR": "1"}).stdout == ledger
    status = gg(repo, "status").stdout
    assert "  A notes.txt  by call_1 (exact)" in status.splitlines()
    assert _without_store_size(in_terminal(repo, "status", stdout_piped=True)[2].decode()) \
        == _without_store_size(status)
    for verb in ("ledger", "checkpoints"):
        piped_json = gg(repo, verb, "--json").stdout.encode()
        _, seen, _ = in_terminal(repo, verb, "--json")
        assert seen.replace(b"\r\n", b"\n") == piped_json
        json.loads(piped_json)


def _many_changed_by_the_agent(repo: Path, count: int) -> str:
    """`count` committed files a shell call rewrote; the checkpoint before it."""
    for i in range(count):
        (repo / "src" / f"m{i}.py").write_text(f"x = {i}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "modules")
    gg(repo, "init", "--no-daemon", "--no-hooks")
    target = gg(repo, "checkpoint").stdout.strip()
    gg(repo, "call", "begin", "--tool", "Bash", "--input", '{"command": "codegen"}')
    for i in range(count):
        (repo / "src" / f"m{i}.py").write_text(f"x = {i} + 1\n")
    gg(repo, "call", "end", "call_1", "--status", "succeeded")
    return target


def test_a_rollback_of_many_files_shows_its_progress_on_a_terminal_only(
        repo: Path, tmp_path: Path) -> None:
    twin = tmp_path / "twin"
    target = _many_changed_by_the_agent(repo, 60)
    subprocess.run(["cp", "-a", str(repo), str(twin)], check=True)
    code, seen, _ = in_terminal(repo, "rollback-files", "--to", target)
    assert code == 0
    text = plain(seen)
    assert re.search(r"putting files back .*60/60", text), text
    assert "restore src/m0.py" in text.splitlines()
    piped = gg(twin, "rollback-files", "--to", target)
    assert piped.stderr == "" and "putting files back" not in piped.stdout
    assert piped.stdout.splitlines()[0] == "restore src/m0.py"
    # --json on a terminal: no progress either
    _, seen, _ = in_terminal(twin, "rollback-files", "--to", target, "--dry-run", "--json")
    assert json.loads(seen.replace(b"\r\n", b"\n"))["restored"] == []


def test_gc_and_the_first_snapshot_show_their_phases_on_a_terminal_only(repo: Path) -> None:
    gg(repo, "init", "--no-daemon", "--no-hooks")
    code, seen, _ = in_terminal(repo, "checkpoint")
    assert code == 0
    text = plain(seen)
    assert "first snapshot: storing" in text, text
    assert re.fullmatch(r"ckpt_\d{8}_\d{3}", text.strip().splitlines()[-1])
    code, seen, _ = in_terminal(repo, "gc", "--no-repack-repository")
    assert code == 0
    text = plain(seen)
    assert re.search(r"packing gitguard's objects, leaving out what went .*5/6", text), text
    assert "checkpoints: 1 kept, 0 dropped" in text
    piped = gg(repo, "gc", "--no-repack-repository")
    assert piped.stderr == "" and "packing gitguard's objects," not in piped.stdout


def test_an_error_still_ends_in_the_error_line_after_the_progress(repo: Path) -> None:
    gg(repo, "init", "--no-daemon", "--no-hooks")
    code, seen, _ = in_terminal(repo, "rollback-files", "--to", "ckpt_20200101_001")
    assert code == 1
    lines = plain(seen).strip().splitlines()
    assert lines[-2].startswith("Error: ") and lines[-1].startswith("Hint: "), lines


def test_daemon_start_shows_the_wait_for_its_start_up_scan(repo: Path) -> None:
    gg(repo, "init", "--no-daemon", "--no-hooks")
    try:
        code, seen, _ = in_terminal(repo, "daemon", "start")
        assert code == 0
        text = plain(seen)
        assert f"the daemon's start-up scan of {repo}" in text
        assert text.strip().splitlines()[-1].startswith("Started the daemon (pid ")
    finally:
        gg(repo, "daemon", "stop")


def _modules(stderr: str) -> set[str]:
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines()
            if line.startswith("import time:")}


def test_no_hook_call_or_piped_command_imports_rich(repo: Path) -> None:
    # Statically: nothing the hook entries, the daemon or the facade reach imports the
    # terminal module (only the commands that draw do, lazily).
    edges = graph()
    seen: set[str] = set()
    todo = ["gitguard.hookmain", "gitguard.cli.entry", "gitguard.integrations.hookcli",
            "gitguard.integrations.claude_code", "gitguard.cli.call_parser",
            "gitguard.daemon.daemon", "gitguard.api"]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(edges.get(name, ()))
    assert "gitguard.cli.terminal" not in seen
    # And in real processes, without a daemon and with one.
    gg(repo, "init", "--no-daemon")         # the git hooks too
    traced = {"PYTHONPROFILEIMPORTTIME": "1"}
    event = json.dumps({"session_id": "s1", "cwd": str(repo), "hook_event_name": "PreToolUse",
                        "tool_name": "Bash", "tool_input": {"command": "make"},
                        "tool_use_id": "toolu_1"}).encode()

    def imported_by_the_hooks(tag: str) -> list[set[str]]:
        runs = [gg(repo, "hook", "claude-code", input=event, env=traced),
                gg(repo, "call", "begin", "--tool", "Bash", "--input", '{"command": "ls"}',
                   "--call-id", f"call_{tag}", env=traced),
                gg(repo, "call", "end", f"call_{tag}", "--status", "succeeded", env=traced),
                subprocess.run(["git", "checkout", "-q", "-b", f"branch_{tag}"], cwd=repo,
                               env={**os.environ, **traced}, text=True, capture_output=True,
                               check=True)]
        return [_modules(run.stderr) for run in runs]

    hooks = imported_by_the_hooks("alone")
    assert "pygit2" in hooks[0]                   # no daemon: the hook ran in its process
    with running_daemon(repo):
        hooks += imported_by_the_hooks("daemon")
    piped = [_modules(gg(repo, verb, env=traced).stderr) for verb in ("ledger", "status")]
    assert all(hooks) and all(piped), "every run traced its imports"
    for modules in hooks + piped:
        assert not {m for m in modules if m == "rich" or m.startswith("rich.")}, modules
    for modules in hooks:
        assert "gitguard.cli.terminal" not in modules
