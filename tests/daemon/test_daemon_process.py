"""A real daemon process on a real repository: life cycle, real filesystem events, crashes,
concurrency, and the thin client's contract (same output, no heavy imports)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gitguard.api import Guard
from gitguard.calls import attribution_log
from gitguard.errors import IllegalTransition
from gitguard.ipc import api_client, client
from gitguard.storage.store import Store
from gitguard.workspace import discover
from tests.helpers.commands import gg, git
from tests.helpers.daemons import alive, full_scan_tree, request, running_daemon, store_of, wait_for
from tests.helpers.gitstate import GitState


def owners(repo: Path) -> dict[str, tuple[str, str]]:
    return {p: (r.owner, r.confidence)
            for p, r in attribution_log.latest(Store(discover(repo))).items()}


def post_tree(repo: Path, call_end_json: str) -> str:
    entry = json.loads(call_end_json)
    ckpt = Guard.open(repo).load_checkpoint(entry["postCheckpointId"])
    return git(repo, "rev-parse", f"{ckpt.snapshot_commit}^{{tree}}").strip()


def test_start_status_stop_and_a_second_start(repo: Path, state_of: GitState) -> None:
    with running_daemon(repo) as pid:
        store = store_of(repo)
        assert stat.S_IMODE(os.stat(store / "daemon.sock").st_mode) == 0o600
        again = json.loads(gg(repo, "daemon", "start", "--json").stdout)
        assert again == {"pid": pid, "alreadyRunning": True, "stalePid": None}
        status = json.loads(gg(repo, "daemon", "status", "--json").stdout)
        assert status["running"] and status["pid"] == pid and status["watches"] >= 3
        assert status["rssKb"] > 0 and status["startMs"] > 0
        proc = gg(repo, "daemon", "start", "--foreground", check=False)
        assert proc.returncode == 1
        assert proc.stderr.startswith(f"Error: a daemon already runs for this worktree (pid {pid})")
        assert json.loads(gg(repo, "status", "--json").stdout)["daemon"] == {
            "running": True, "pid": pid}
    stopped = gg(repo, "daemon", "status", check=False)
    assert stopped.returncode == 6 and "not running" in stopped.stdout
    assert "not running" in gg(repo, "daemon", "stop").stdout
    assert f"watching {repo}" in (store_of(repo) / "daemon.log").read_text()
    state_of.assert_unchanged(repo)


def test_sigterm_stops_the_daemon_cleanly(repo: Path) -> None:
    store = store_of(repo)
    with running_daemon(repo) as pid:
        (repo / "late.txt").write_text("seen just before the signal\n")
        os.kill(pid, signal.SIGTERM)
        wait_for("the daemon to exit", lambda: not alive(pid))
        # checked before the fixture's `daemon stop`, which would tidy up after a crash
        assert not (store / "daemon.sock").exists() and not (store / "daemon.pid").exists()
        assert json.loads(gg(repo, "daemon", "status", "--json", check=False).stdout
                          )["stalePid"] is None
    assert (store / "daemon.log").read_text().rstrip().endswith("stopped")
    assert owners(repo)["late.txt"] == ("user", "window"), "recorded on the way out"


@pytest.mark.parametrize("kind", ["plain directory", "linked worktree"])
def test_other_kinds_of_workspace(repo: Path, tmp_path: Path, kind: str) -> None:
    if kind == "plain directory":
        where = tmp_path / "plain"
        where.mkdir()
        (where / "notes.txt").write_text("mine\n")
    else:
        where = tmp_path / "wt"
        git(repo, "worktree", "add", "-q", str(where), "-b", "side")
    gg(where, "daemon", "start")
    store = Guard.open(where).store
    pid = client.pid_of(str(store.root))
    try:
        gg(where, "call", "begin", "--tool", "Write", "--input", '{"file_path": "out.txt"}',
           "--writes", "out.txt")
        (where / "out.txt").write_text("agent\n")
        gg(where, "call", "end", "call_1", "--status", "succeeded")
        client.request(str(store.root), "flush")
        found = {p: (r.owner, r.confidence) for p, r in attribution_log.latest(store).items()}
        assert found == {"out.txt": ("call_1", "exact")}
        served = client.request(str(store.root), "status")["result"]
        assert served["incremental"] >= 2 and served["full_scans"] == 1
    finally:
        gg(where, "daemon", "stop")
    assert pid is not None
    wait_for("the daemon to end", lambda: not alive(pid))
    status = json.loads(gg(where, "status", "--json").stdout)
    assert [d["path"] for d in status["dirty"]] == ["out.txt"] if kind == "plain directory" \
        else "out.txt" in [d["path"] for d in status["dirty"]]


def test_real_filesystem_attribution(repo: Path, state_of: GitState) -> None:
    with running_daemon(repo):
        (repo / "README.md").write_text("# the user, before any call\n")
        begin = json.loads(gg(repo, "call", "begin", "--tool", "Edit", "--input",
                              '{"file_path": "src/app.py", "new_string": "return 2"}',
                              "--writes", "src/app.py", "--json").stdout)
        (repo / "src" / "app.py").write_text("def main():\n    return 2\n")
        gg(repo, "call", "end", begin["callId"], "--status", "succeeded")

        gg(repo, "call", "begin", "--tool", "Bash", "--input", '{"command": "./build.sh"}')
        for name in ("out1.txt", "out2.txt", "out3.txt"):
            (repo / name).write_text(f"{name}\n")
        (repo / "shared.txt").write_text("the command wrote this\n")
        tmp = repo / ".shared.txt.swp"              # and the user's editor saved it too
        tmp.write_text("the user saved this\n")
        os.replace(tmp, repo / "shared.txt")
        gg(repo, "call", "end", "call_2", "--status", "succeeded")

        request(repo, "flush")
        found = owners(repo)
        assert found["README.md"] == ("user", "window")
        assert found["src/app.py"] == ("call_1", "exact")
        assert all(found[n] == ("call_2", "window") for n in ("out1.txt", "out2.txt",
                                                              "out3.txt"))
        assert found["shared.txt"] == ("call_2", "ambiguous")
        assert ".shared.txt.swp" not in found
        status = json.loads(gg(repo, "status", "--json").stdout)
        by_path = {d["path"]: (d["owner"], d["confidence"]) for d in status["dirty"]}
        assert by_path["shared.txt"] == ("call_2", "ambiguous")
        assert by_path["README.md"] == ("user", "window")
    state_of.assert_unchanged(repo)


def test_ten_thousand_rapid_writes_miss_nothing(repo: Path, tmp_path: Path) -> None:
    with running_daemon(repo):
        gg(repo, "call", "begin", "--tool", "Bash", "--input", '{"command": "gen"}')
        script = ("import sys, os\n"
                  "root = sys.argv[1]\n"
                  "os.makedirs(os.path.join(root, 'gen', 'deep'), exist_ok=True)\n"
                  "for i in range(10000):\n"
                  "    name = os.path.join(root, 'gen', 'deep' if i % 3 else '', f'f{i % 250}')\n"
                  "    with open(name, 'w') as fh:\n"
                  "        fh.write(str(i))\n")
        subprocess.run([sys.executable, "-c", script, str(repo)], check=True)
        (repo / "gen" / "f7").unlink()
        end = gg(repo, "call", "end", "call_1", "--status", "succeeded", "--json").stdout
        assert post_tree(repo, end) == full_scan_tree(repo, tmp_path)
        assert request(repo, "resync")["result"]["agreed"] is True
        served = request(repo, "status")["result"]
        assert served["full_scans"] == 1 and served["incremental"] >= 2, "O(changed) trees"


@pytest.mark.serial
def test_a_forced_overflow_rescans_and_marks_unknown(repo: Path, tmp_path: Path) -> None:
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    with running_daemon(repo) as pid:
        watches = request(repo, "status")["result"]["watches"]
        (repo / "bulk").mkdir()
        # The daemon must watch bulk/ before it stops, or the renames below queue nothing.
        # A record of bulk/probe does not prove it (the scan of the new directory finds the
        # file either way); the daemon's own count of inotify watches does.
        probe = repo / "bulk" / "probe"
        probe.write_text("watched?\n")

        def seen() -> bool:
            request(repo, "flush")
            return ("bulk/probe" in owners(repo)
                    and request(repo, "status")["result"]["watches"] > watches)

        wait_for("the daemon to watch bulk/", seen, timeout=30)
        os.kill(pid, signal.SIGSTOP)    # the daemon cannot read: the kernel queue fills up
        try:
            wait_for("the daemon to stop", lambda: _state(pid) == "T", timeout=30)
            here = repo / "bulk" / "a"
            here.write_text("moved about\n")
            for _ in range(limit // 2 + 100):       # a moved-from and a moved-to each
                there = here.with_name("b" if here.name == "a" else "a")
                os.rename(here, there)
                here = there
            for i in range(10):                     # dropped: the queue is full
                (repo / "bulk" / f"f{i}").write_text(str(i))
        finally:
            os.kill(pid, signal.SIGCONT)
        log_file = store_of(repo) / "daemon.log"

        def told() -> bool:
            request(repo, "flush")
            return "the kernel event queue overflowed" in log_file.read_text()

        wait_for("the daemon to log the overflow", told, timeout=30)
        log = log_file.read_text()
        found = owners(repo)
        records = (store_of(repo) / "attribution.jsonl").read_text()
        assert {found[f"bulk/f{i}"] for i in range(10)} == {("user", "unknown")}, log + records
        assert found[f"bulk/{here.name}"] == ("user", "unknown")
        made = json.loads(gg(repo, "checkpoint", "--json").stdout)
        tree = git(repo, "rev-parse", f"{made['snapshotCommit']}^{{tree}}").strip()
        assert tree == full_scan_tree(repo, tmp_path)


def _state(pid: int) -> str:
    """A process's state letter from /proc (T: stopped by a signal)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_killed_daemon_is_recovered_and_its_downtime_is_unknown(repo: Path) -> None:
    with running_daemon(repo) as pid:
        (repo / "before.txt").write_text("seen while watching\n")
        request(repo, "flush")
        os.kill(pid, signal.SIGKILL)
        wait_for("the killed daemon to die", lambda: not alive(pid))
        shown = gg(repo, "daemon", "status", "--json", check=False)
        status = json.loads(shown.stdout)
        assert status["running"] is False and status["stalePid"] == pid
        assert shown.returncode == 6 and status["state"] == "not running"
        # the fast path falls back to in-process work on the dead socket
        gg(repo, "call", "begin", "--tool", "Read", "--input", '{"file_path": "x"}')
        (repo / "before.txt").write_text("changed while no daemon ran\n")
        (repo / "down.txt").write_text("created while no daemon ran\n")
        started = json.loads(gg(repo, "daemon", "start", "--json").stdout)
        assert started["stalePid"] == pid and started["pid"] != pid
        assert (f"recovered: the previous daemon (pid {pid}) was gone"
                in (store_of(repo) / "daemon.log").read_text())
        found = owners(repo)
        assert found["before.txt"] == ("user", "unknown")
        assert found["down.txt"] == ("user", "unknown")
        status_json = json.loads(gg(repo, "status", "--json").stdout)
        by_path = {d["path"]: d["confidence"] for d in status_json["dirty"]}
        # Nobody watched, but the Read call begun meanwhile never ended: a change inside
        # an unfinished call's window is ambiguous (DESIGN.md, Attribution), in status as
        # in resume, daemon or not; the watcher's own record above stays `unknown`.
        assert by_path["down.txt"] == "ambiguous"


def _no_core_dump() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))     # inherited by the daemon


@pytest.mark.parametrize("fatal", [signal.SIGSEGV, signal.SIGABRT], ids=["SIGSEGV", "SIGABRT"])
def test_a_fatal_signal_leaves_the_stacks_in_daemon_log(repo: Path, fatal: int) -> None:
    """A crash in C code (libgit2) kills the daemon without a word from logging: the real
    daemon, sent the signal such a crash raises, writes every thread's stack to its log."""
    started = subprocess.run([sys.executable, "-m", "gitguard", "daemon", "start", "--json"],
                             cwd=repo, capture_output=True, text=True, check=True,
                             preexec_fn=_no_core_dump)
    pid = json.loads(started.stdout)["pid"]
    request(repo, "flush")
    os.kill(pid, fatal)
    wait_for("the crashed daemon to die", lambda: not alive(pid))
    log = (store_of(repo) / "daemon.log").read_text()
    name = "Segmentation fault" if fatal == signal.SIGSEGV else "Aborted"
    crash = log[log.index(f"Fatal Python error: {name}"):]
    assert "most recent call first" in crash
    assert "gitguard/daemon/daemon.py" in crash     # the main thread's stack, in our code
    assert crash.count("Thread 0x") >= 2            # every thread, the watcher's among them
    assert json.loads(gg(repo, "daemon", "status", "--json", check=False).stdout
                      )["stalePid"] == pid
    again = json.loads(gg(repo, "daemon", "start", "--json").stdout)
    assert again["stalePid"] == pid
    gg(repo, "daemon", "stop")
    assert log in (store_of(repo) / "daemon.log").read_text()   # appended after, not over


def test_calls_from_many_processes_are_serialized(repo: Path) -> None:
    script = ("import subprocess, sys\n"
              "repo, n = sys.argv[1], sys.argv[2]\n"
              "def gg(*a):\n"
              "    subprocess.run([sys.executable, '-m', 'gitguard', *a], cwd=repo, check=True,\n"
              "                   capture_output=True)\n"
              "gg('call', 'begin', '--tool', 'Write', '--call-id', 'c' + n, '--writes',\n"
              "   'w' + n + '.txt', '--input', '{\"file_path\": \"w' + n + '.txt\"}')\n"
              "open(repo + '/w' + n + '.txt', 'w').write(n)\n"
              "gg('call', 'end', 'c' + n, '--status', 'succeeded')\n")
    with running_daemon(repo):
        procs = [subprocess.Popen([sys.executable, "-c", script, str(repo), str(n)])
                 for n in range(6)]
        assert [p.wait(timeout=120) for p in procs] == [0] * 6
        ledger = json.loads(gg(repo, "ledger", "--json").stdout)
        assert sorted(e["callId"] for e in ledger) == [f"c{n}" for n in range(6)]
        assert {e["status"] for e in ledger} == {"succeeded"}
        for entry in ledger:
            n = entry["callId"][1:]
            tree = git(repo, "ls-tree", "-r", "--name-only",
                       Guard.open(repo).load_checkpoint(entry["postCheckpointId"])
                       .snapshot_commit)
            assert f"w{n}.txt" in tree.split()
        gg(repo, "verify")


def test_the_fast_path_imports_no_heavy_module(repo: Path) -> None:
    heavy = ("pygit2", "pydantic", "click", "watchdog")
    command = [sys.executable, "-X", "importtime", "-m", "gitguard", "call", "begin", "--tool",
               "Read", "--input", '{"file_path": "a"}']
    with running_daemon(repo):
        proc = subprocess.run(command, cwd=repo, capture_output=True, text=True)
        assert proc.returncode == 0 and proc.stdout.strip() == "call_1"
        imported = {line.split("|")[-1].strip().split(".")[0]
                    for line in proc.stderr.splitlines() if line.startswith("import time:")}
        assert "gitguard" in imported and not set(heavy) & imported
        assert request(repo, "status")["result"]["incremental"] >= 1
    proc = subprocess.run(command, cwd=repo, capture_output=True, text=True)
    imported = {line.split("|")[-1].strip().split(".")[0] for line in proc.stderr.splitlines()}
    # `call begin` parses its own arguments now (gitguard.cli.call_parser): click stays out even
    # here, but the in-process snapshot and the records still need pygit2 and pydantic.
    assert proc.returncode == 0 and {"pygit2", "pydantic"} <= imported, \
        "without a daemon the call runs in-process (and the test can tell)"


def test_the_daemon_prints_exactly_what_the_cli_prints(repo: Path, tmp_path: Path) -> None:
    twin = tmp_path / "twin"
    subprocess.run(["cp", "-a", str(repo), str(twin)], check=True)
    env = {"GITGUARD_NOW": "2026-03-04T05:06:07Z", "GITGUARD_SESSION": "s1"}
    script = [
        ("call", "begin", "--tool", "Write", "--input", '{"file_path": "a.txt"}',
         "--writes", "a.txt", "--json"),
        ("call", "end", "call_1", "--status", "succeeded", "--result", "wrote", "--json"),
        ("call", "begin", "--tool", "send_email", "--input", '{"to": "x@y.z"}',
         "--replay", "never"),
        ("call", "end", "call_2", "--status", "succeeded", "--result", "sent"),
        ("call", "begin", "--tool", "send_email", "--input", '{"to": "x@y.z"}',
         "--replay", "never"),                                          # refused: exit 4
        ("call", "end", "call_9", "--status", "succeeded"),             # unknown: exit 1
        ("call", "end", "call_1", "--status", "succeeded"),             # finished: exit 1
        ("call", "begin", "--input", "{}"),                             # usage: exit 2
        ("call", "begin", "--tool", "Bash", "--input", "not json"),     # bad input: exit 1
    ]

    def run(where: Path) -> list[tuple[int, str, str]]:
        results = []
        for args in script:
            if args[:2] == ("call", "end") and args[2] == "call_1":
                (where / "a.txt").write_text("written by the agent\n")
            proc = gg(where, *args, check=False, env=env)
            results.append((proc.returncode, proc.stdout.replace(str(where), "<ws>"),
                            proc.stderr.replace(str(where), "<ws>")))
        return results

    with running_daemon(repo):
        with_daemon = run(repo)
        served = request(repo, "status")["result"]
    without = run(twin)
    assert [r[0] for r in with_daemon] == [0, 0, 0, 0, 4, 1, 1, 2, 1]
    assert with_daemon == without
    assert served["incremental"] >= 4, "the calls were served by the daemon"


def test_stopping_or_killing_the_daemon_hands_over_to_the_cli(repo: Path,
                                                              tmp_path: Path) -> None:
    with running_daemon(repo) as pid:
        gg(repo, "call", "begin", "--tool", "Bash", "--input", '{"command": "a"}')
        (repo / "a.txt").write_text("a\n")
        gg(repo, "call", "end", "call_1", "--status", "succeeded")
    (repo / "b.txt").write_text("after a clean stop\n")
    gg(repo, "call", "begin", "--tool", "Bash", "--input", '{"command": "b"}')
    (repo / "src" / "app.py").unlink()
    end = gg(repo, "call", "end", "call_2", "--status", "succeeded", "--json").stdout
    assert post_tree(repo, end) == full_scan_tree(repo, tmp_path / "1")

    with running_daemon(repo) as pid:
        gg(repo, "call", "begin", "--tool", "Bash", "--input", '{"command": "c"}')
        (repo / "c.txt").write_text("c\n")
        (repo / "a.txt").unlink()
        gg(repo, "call", "end", "call_3", "--status", "succeeded")
        os.kill(pid, signal.SIGKILL)        # the stat cache is now older than the snapshots
        wait_for("the killed daemon to die", lambda: not alive(pid))
        (repo / "d.txt").write_text("d\n")
        gg(repo, "call", "begin", "--tool", "Bash", "--input", '{"command": "d"}')
        (repo / "c.txt").write_text("c changed\n")
        end = gg(repo, "call", "end", "call_4", "--status", "succeeded", "--json").stdout
        assert post_tree(repo, end) == full_scan_tree(repo, tmp_path / "2")


def test_the_python_api_goes_through_the_daemon(repo: Path) -> None:
    with running_daemon(repo):
        guard = Guard.open(repo)
        entry = guard.begin_call("Write", {"file_path": "api.txt", "content": "via the api\n"},
                                 writes=["api.txt"])
        (repo / "api.txt").write_text("via the api\n")
        done = guard.end_call(entry.call_id, "succeeded", b"\x00binary result")
        assert [p.path for p in done.file_patches] == ["api.txt"]
        assert owners(repo)["api.txt"] == (entry.call_id, "exact")
        with pytest.raises(IllegalTransition, match="cannot become succeeded"):
            guard.end_call(entry.call_id, "succeeded")
        with api_client.restoring(guard):       # what rollback wraps its writes in
            (repo / "api.txt").write_text("restored by gitguard\n")
        (repo / "user.txt").write_text("the user\n")
        request(repo, "flush")
        assert owners(repo)["api.txt"] == (entry.call_id, "exact"), "a restore is nobody's"
        assert owners(repo)["user.txt"] == ("user", "window")
        served = request(repo, "status")["result"]
        assert served["records"] >= 1 and served["incremental"] >= 2
        # Unknown ops and missing integration handlers answer "fall back".
        with pytest.raises(client.Unreachable, match="unknown op"):
            request(repo, "no.such.op")
        for op, module, args in (("hook.git", "git_hooks", {"name": "post-commit"}),
                                 ("hook.claude_code", "claude_code", {"payload": {}})):
            if importlib.util.find_spec(f"gitguard.integrations.{module}") is None:
                with pytest.raises(client.Unreachable, match="not available"):
                    request(repo, op, **args)
        with pytest.raises(client.Unreachable, match="another workspace"):
            request(repo, "call.begin", argv=["call", "begin", "--tool", "x"], cwd="/", env={})


def test_the_daemon_packs_loose_objects(repo: Path) -> None:
    import pygit2

    def loose() -> int:
        lines = git(repo, "count-objects", "-v").splitlines()
        return int(dict(line.split(": ") for line in lines)["count"])

    users_own = loose()
    with running_daemon(repo):
        # Loose objects only a gitguard ref reaches, as many snapshots would leave behind.
        odb = pygit2.Repository(str(repo / ".git"))
        builder = odb.TreeBuilder()
        for i in range(700):
            builder.insert(f"f{i}", odb.create_blob(f"loose object {i}\n".encode()),
                           pygit2.enums.FileMode.BLOB)
        sig = pygit2.Signature("gitguard", "gitguard@localhost", 0, 0)
        commit = odb.create_commit(None, sig, sig, "snapshot", builder.write(), [])
        odb.references.create("refs/gitguard/sessions/loose", commit)
        result = request(repo, "pack")["result"]
        assert result["objects"] >= 702 and result["looseAfter"] < result["looseBefore"]
    assert loose() <= users_own, "every object gitguard wrote is packed; the user's are untouched"
    subprocess.run(["git", "fsck", "--no-progress"], cwd=repo, check=True, capture_output=True)


def test_calls_through_the_daemon_keep_loose_objects_packed(repo: Path) -> None:
    """`call end` leaves the loose-object check to the daemon (every PACK_EVERY requests,
    and when idle): calls back to back still get packed, with no gc request."""
    from gitguard.daemon.daemon import PACK_EVERY

    git(repo, "config", "gc.auto", "256")       # packing starts at max(256 // 8, 64) loose
    with running_daemon(repo):
        guard = Guard.open(repo)
        for i in range(PACK_EVERY):                     # two requests each
            entry = guard.begin_call("Bash", {"command": f"write 20 files ({i})"})
            (repo / "packed" / str(i)).mkdir(parents=True)
            for n in range(20):         # ~400 objects: the sampled count is far past 64
                (repo / "packed" / str(i) / f"f{n}.txt").write_text(f"call {i} file {n}\n")
            guard.end_call(entry.call_id, "succeeded", "ok")
        log = store_of(repo) / "daemon.log"
        wait_for("the daemon's own pack", lambda: "gitguard object(s)" in log.read_text())
        counted = dict(line.split(": ") for line in
                       git(repo, "count-objects", "-v").splitlines())
        assert int(counted["in-pack"]) > PACK_EVERY * 10, "most of the calls' blobs are packed"
    subprocess.run(["git", "fsck", "--no-progress"], cwd=repo, check=True, capture_output=True)


def test_init_starts_the_daemon_unless_told_not_to(repo: Path, tmp_path: Path) -> None:
    allow = {"GITGUARD_NO_DAEMON": ""}
    assert json.loads(gg(repo, "init", "--no-daemon", "--json", env=allow).stdout)[
        "daemon"] is None
    assert json.loads(gg(repo, "init", "--json").stdout)["daemon"] is None, "env switch"
    (repo / ".gitguard.toml").write_text("[daemon]\nautostart = false\n")
    assert json.loads(gg(repo, "init", "--json", env=allow).stdout)["daemon"] is None
    (repo / ".gitguard.toml").unlink()
    made = json.loads(gg(repo, "init", "--json", env=allow).stdout)
    pid = made["daemon"]["pid"]
    try:
        assert alive(pid) and client.alive(str(store_of(repo)))
    finally:
        gg(repo, "daemon", "stop")
    wait_for("the daemon to end", lambda: not alive(pid))


def test_a_hook_starts_a_missing_daemon(repo: Path) -> None:
    gg(repo, "init", "--no-daemon")
    try:
        gg(repo, "hook", "claude-code", check=False, env={"GITGUARD_NO_DAEMON": ""},
           input=b'{"hook_event_name": "SessionStart"}')
        wait_for("the hook's daemon", lambda: client.alive(str(store_of(repo))))
        pid = client.pid_of(str(store_of(repo)))
        assert pid is not None
    finally:
        gg(repo, "daemon", "stop")
    wait_for("the daemon to end", lambda: not alive(pid))


def test_the_socket_refuses_another_user(repo: Path) -> None:
    with running_daemon(repo):
        sock = store_of(repo) / "daemon.sock"
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
        assert os.stat(sock).st_uid == os.getuid()
        assert stat.S_IMODE(os.stat(store_of(repo)).st_mode) == 0o700
        if os.getuid() == 0:        # as root the test can be another user for a moment
            probe = ("import os, socket, sys\nos.setuid(65534)\n"
                     "s = socket.socket(socket.AF_UNIX)\n"
                     "try:\n    s.connect(sys.argv[1])\n    print('connected')\n"
                     "except PermissionError:\n    print('refused')\n")
            out = subprocess.run([sys.executable, "-I", "-c", probe, str(sock)],
                                 capture_output=True, text=True)
            assert out.stdout.strip() == "refused", out.stderr


def test_a_rollback_under_a_running_daemon_leaves_no_user_record_behind(repo: Path) -> None:
    """The daemon sees the rollback's own writes; recorded as the user's, rolling back the
    rollback would then conflict on every path. Through restore.begin/end they are nobody's,
    while the user's edit made before the rollback is still recorded as the user's."""
    with running_daemon(repo):
        checkpoint = json.loads(gg(repo, "checkpoint", "--kind", "manual", "--step", "s",
                                   "--json").stdout)["checkpointId"]
        begun = json.loads(gg(repo, "call", "begin", "--tool", "Bash", "--input",
                              '{"command": "make gen"}', "--json").stdout)
        (repo / "gen.txt").write_text("generated\n")
        (repo / "README.md").write_text("# changed by the agent\n")
        gg(repo, "call", "end", begun["callId"], "--status", "succeeded")
        (repo / "mine.txt").write_text("the user's own file\n")
        before = {p: (repo / p).read_bytes() for p in ("gen.txt", "README.md", "mine.txt")}

        result = json.loads(gg(repo, "rollback-files", "--to", checkpoint, "--json").stdout)
        assert result["deleted"] == ["gen.txt"] and result["restored"] == ["README.md"]
        assert result["conflicts"] == []
        request(repo, "flush")
        assert owners(repo)["mine.txt"] == ("user", "window")
        assert "gen.txt" not in owners(repo) or owners(repo)["gen.txt"][0] != "user"

        undo = json.loads(gg(repo, "rollback-files", "--to", result["safetyCheckpointId"],
                             "--json").stdout)
        assert undo["conflicts"] == [], "the first rollback's writes were not the user's"
        assert {p: (repo / p).read_bytes() for p in before} == before


def test_a_requests_environment_is_swapped_in_and_out_exactly(monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """`set_environ` touches only what differs; the result equals a clear-and-fill."""
    from gitguard.daemon.client_context import set_environ

    monkeypatch.setenv("GG_KEPT", "same")
    monkeypatch.setenv("GG_CHANGED", "before")
    monkeypatch.setenv("GG_DROPPED", "x")
    saved = dict(os.environ)
    wanted = {**saved, "GG_CHANGED": "after", "GG_ADDED": "new"}
    del wanted["GG_DROPPED"]
    set_environ(wanted)
    assert dict(os.environ) == wanted
    assert os.getenv("GG_DROPPED") is None and os.getenv("GG_ADDED") == "new"
    set_environ(saved)
    assert dict(os.environ) == saved


def test_client_context_restores_the_environment_byte_for_byte(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The request's environment (a non-UTF-8 value too) in, the daemon's own back out,
    compared as bytes against a clear-and-fill."""
    from gitguard.daemon.client_context import client_context

    monkeypatch.setenv("GG_DROPPED", "x")
    odd = os.fsdecode(b"caf\xe9")
    before = dict(os.environb)
    wanted = {**dict(os.environ), "GG_ODD": odd, "GG_CHANGED": "after"}
    del wanted["GG_DROPPED"]
    with client_context(str(tmp_path), wanted, b""):
        assert dict(os.environ) == wanted
        assert os.environb[b"GG_ODD"] == b"caf\xe9"
        os.environ["GG_SET_BY_THE_REQUEST"] = "gone after"
    assert dict(os.environb) == before


def test_a_daemon_started_while_a_call_runs_gives_it_what_it_declared(repo: Path) -> None:
    """A hook that finds no daemon begins the call in-process and starts one, which comes
    up while the call runs (the first event in a fresh worktree: Claude Code's
    `.claude/worktrees/agent-...`). What the call declared and wrote meanwhile is its own;
    anything else changed while nobody watched stays `unknown`, the user's."""
    begun = json.loads(gg(repo, "call", "begin", "--tool", "Bash", "--input",
                          '{"command": "echo made > made.txt"}', "--writes", "made.txt",
                          "--json").stdout)
    (repo / "made.txt").write_text("made\n")
    (repo / "other.txt").write_text("nobody declared this\n")
    with running_daemon(repo):
        gg(repo, "call", "end", begun["callId"], "--status", "succeeded")
        request(repo, "flush")
        found = owners(repo)
        assert found["made.txt"] == (begun["callId"], "window"), found
        assert found["other.txt"] == ("user", "unknown"), found
