"""Real repositories, the real agent CLIs and gitguard's own installers, for the e2e tests.

A `Repo` is a git repository in a temp dir with a fixed author and dates, its own HOME,
set up with `gitguard init`, `gitguard hooks install` and `gitguard integrate
claude-code|codex`. `claude()` and `codex()` run the CLIs from `e2e/node_modules`
against the scripted model server; every line they print is stamped on arrival, so hook
latency is measured from Claude Code's own `hook_started`/`hook_response` events (Codex's
by a wrapper around each hook command: `_time_codex_hooks`).

A repository made with `capture=DIR` has capture_hook.py in front of gitguard's hook, so
every payload the CLIs send is also written under DIR with temp paths replaced by stable
placeholders; `GITGUARD_E2E_CAPTURE=1 make e2e` rewrites fixtures/ from such a capture.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.modelserver import Server

E2E = Path(__file__).resolve().parent
ROOT = E2E.parent
BIN = E2E / "node_modules" / ".bin"
VENV_BIN = Path(sys.executable).parent
CAPTURE = os.environ.get("GITGUARD_E2E_CAPTURE") == "1"   # rewrite fixtures/ from a capture
HOOK_LATENCY: list[tuple[str, str, float]] = []   # (mode, hook event, ms), for the summary
FIXED_DATE = "2026-11-29T12:00:00+00:00"


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, text=True,
                          capture_output=True).stdout


@dataclass
class Repo:
    root: Path
    home: Path
    server: Server
    daemon: bool
    env: dict[str, str] = field(default_factory=dict)

    @property
    def mode(self) -> str:
        return "daemon" if self.daemon else "no daemon"

    def gitguard(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(VENV_BIN / "gitguard"), *args], cwd=self.root, env=self.env,
                              text=True, capture_output=True, timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError(f"gitguard {' '.join(args)} -> {proc.returncode}\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc

    def gg_json(self, *args: str) -> Any:
        return json.loads(self.gitguard(*args, "--json").stdout)

    def ledger(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.gg_json("ledger")
        return result

    def write(self, rel: str, text: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def read(self, rel: str) -> str:
        return (self.root / rel).read_text()

    def hook_errors(self) -> str:
        """gitguard's hook error logs (a hook logs its failures, answering exit 0): the
        store's, and $TMPDIR's where a hook could not find the store."""
        logs = [self.root / ".git" / "gitguard" / "hook-errors.log",
                Path(self.env["TMPDIR"]) / "gitguard-hook-errors.log"]
        return "".join(p.read_text() for p in logs if p.exists())


def base_env(home: Path, server: Server, daemon: bool) -> dict[str, str]:
    path = os.pathsep.join([str(VENV_BIN), "/usr/local/bin", "/usr/bin", "/bin"])
    env = {
        "PATH": path, "HOME": str(home), "LANG": "C.UTF-8", "TERM": "dumb",
        "TMPDIR": str(home / "tmp"),
        "GIT_AUTHOR_NAME": "E2E User", "GIT_AUTHOR_EMAIL": "user@example.invalid",
        "GIT_COMMITTER_NAME": "E2E User", "GIT_COMMITTER_EMAIL": "user@example.invalid",
        "GIT_AUTHOR_DATE": FIXED_DATE, "GIT_COMMITTER_DATE": FIXED_DATE,
        "GIT_CONFIG_NOSYSTEM": "1",
        # Claude Code, offline against the scripted model
        "ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "sk-ant-e2e-dummy",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
        # Codex, offline: its provider is in $CODEX_HOME/config.toml
        "CODEX_HOME": str(home / ".codex"), "OPENAI_API_KEY": "sk-e2e-dummy",
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
    }
    if not daemon:
        env["GITGUARD_NO_DAEMON"] = "1"
    if os.environ.get("PYTHONPATH"):     # a checkout run with another's venv
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def make_repo(tmp: Path, server: Server, *, daemon: bool, agents: Iterable[str] = ("claude-code",),
              files: dict[str, str] | None = None, capture: Path | None = None) -> Repo:
    root, home = tmp / "repo", tmp / "home"
    root.mkdir()
    (home / "tmp").mkdir(parents=True)
    env = base_env(home, server, daemon)
    repo = Repo(root, home, server, daemon, env)
    git(root, "init", "-q", "-b", "main", env=env)
    for rel, text in (files or {"app.py": "def main():\n    return 1\n",
                                "NOTES.md": "# Notes\n\nfirst line\n",
                                "README.md": "demo project\n"}).items():
        repo.write(rel, text)
    git(root, "add", "-A", env=env)
    git(root, "commit", "-q", "-m", "initial", env=env)
    repo.gitguard("init", *([] if daemon else ["--no-daemon"]))
    repo.gitguard("hooks", "install")
    for agent in agents:
        repo.gitguard("integrate", agent)
    if "codex" in agents:
        _codex_config(repo)
        _time_codex_hooks(repo)
    if capture is not None:
        _wrap_for_capture(repo, agents, capture)
    return repo


def stop(repo: Repo) -> None:
    if repo.daemon:
        repo.gitguard("daemon", "stop", check=False)


# --- capture mode ---------------------------------------------------------------------

def _wrap_for_capture(repo: Repo, agents: Iterable[str], capture: Path) -> None:
    """Put capture_hook.py in front of gitguard's hook command (capture mode only)."""
    files = {"claude-code": repo.root / ".claude" / "settings.local.json",
             "codex": repo.root / ".codex" / "hooks.json"}
    for agent in agents:
        path = files[agent]
        data = json.loads(path.read_text())
        for groups in data["hooks"].values():
            for group in groups:
                for hook in group["hooks"]:
                    hook["command"] = " ".join([
                        shlex.quote(sys.executable), shlex.quote(str(E2E / "capture_hook.py")),
                        shlex.quote(str(capture)), agent, shlex.quote(str(repo.root)),
                        shlex.quote(str(repo.home)), "--", shlex.quote(hook["command"])])
        path.write_text(json.dumps(data, indent=2) + "\n")


# --- running a CLI ----------------------------------------------------------------------

@dataclass
class Run:
    argv: list[str]
    returncode: int | None
    events: list[dict[str, Any]]
    stamps: list[float]
    stderr: str

    @property
    def session_id(self) -> str:
        """The session the run worked in: Claude Code's `init` event (with `-p --continue`
        the SessionStart hook events before it carry a provisional id the hooks never
        see), else Codex's `thread.started`."""
        for ev in self.events:
            if ev.get("subtype") == "init" and isinstance(ev.get("session_id"), str):
                return str(ev["session_id"])
            if ev.get("type") == "thread.started" and isinstance(ev.get("thread_id"), str):
                return str(ev["thread_id"])
        raise AssertionError(f"no session id in {self.argv}: {self.stderr[-2000:]}")

    def hook_responses(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("subtype") == "hook_response"]

    def hook_failures(self) -> list[dict[str, Any]]:
        """Hook answers that are errors or carry a gitguard failure message."""
        bad = []
        for ev in self.hook_responses():
            out = str(ev.get("stdout") or "")
            if ev.get("exit_code") not in (0, None) or ev.get("outcome") != "success" \
                    or "hook failed" in out or "has ended" in out:
                bad.append(ev)
        return bad

    def hook_latencies(self) -> list[tuple[str, float]]:
        """(event, ms) from Claude Code's hook_started to its hook_response."""
        started: dict[str, float] = {}
        found = []
        for ev, at in zip(self.events, self.stamps, strict=True):
            if ev.get("subtype") == "hook_started":
                started[str(ev.get("hook_id"))] = at
            elif ev.get("subtype") == "hook_response" and str(ev.get("hook_id")) in started:
                found.append((str(ev.get("hook_event")),
                              (at - started[str(ev["hook_id"])]) * 1000))
        return found

    def tool_results(self) -> list[dict[str, Any]]:
        out = []
        for ev in self.events:
            if ev.get("type") == "user":
                for block in ev.get("message", {}).get("content", []) or []:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        out.append(block)
        return out


@dataclass
class Live:
    """A CLI still running: `finish()` waits for it and returns its Run."""

    run: Run
    proc: subprocess.Popen[str]
    threads: tuple[threading.Thread, threading.Thread]
    err: list[str]
    mode: str
    hook_log: Path | None = None     # Codex's hook times (`_time_codex_hooks`)

    def finish(self, timeout: float = 180) -> Run:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for t in self.threads:
            t.join(10)
        self.run.returncode = self.proc.returncode
        self.run.stderr = "".join(self.err)
        HOOK_LATENCY.extend((self.mode, ev, ms) for ev, ms in self.run.hook_latencies())
        if self.hook_log is not None:
            HOOK_LATENCY.extend((self.mode, ev, ms) for ev, ms in codex_hook_times(self.hook_log))
        return self.run


def start(repo: Repo, argv: list[str]) -> Live:
    proc = subprocess.Popen(argv, cwd=repo.root, env=repo.env, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    run = Run(argv, None, [], [], "")
    err: list[str] = []
    t_err = threading.Thread(target=lambda: err.append(proc.stderr.read()),  # type: ignore[union-attr]
                             daemon=True)

    def read_out() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            at = time.monotonic()
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict):
                run.events.append(ev)
                run.stamps.append(at)

    t_out = threading.Thread(target=read_out, daemon=True)
    t_err.start()
    t_out.start()
    log = repo.home / CODEX_HOOK_LOG
    return Live(run, proc, (t_out, t_err), err, repo.mode, log if log.exists() else None)


def _spawn(repo: Repo, argv: list[str], *, until: Callable[[], bool] | None,
           timeout: float) -> tuple[Run, subprocess.Popen[str]]:
    live = start(repo, argv)
    if until is None:
        return live.finish(timeout), live.proc
    deadline = time.monotonic() + timeout
    while not until():
        if live.proc.poll() is not None or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    return live.run, live.proc


def kill9(proc: subprocess.Popen[str]) -> None:
    """`kill -9` the CLI and everything it started (its process group)."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def claude_argv(prompt: str, *extra: str) -> list[str]:
    return [str(BIN / "claude"), "-p", prompt, "--output-format", "stream-json", "--verbose",
            "--include-hook-events", "--permission-mode", "acceptEdits",
            "--allowedTools", "Bash", *extra]


def script_prompt(words: str, script: list[dict[str, Any]]) -> str:
    return f"{words}\ngg-script: {json.dumps(script)}"


def claude(repo: Repo, words: str, script: list[dict[str, Any]], *extra: str,
           timeout: float = 180) -> Run:
    run, _ = _spawn(repo, claude_argv(script_prompt(words, script), *extra),
                    until=None, timeout=timeout)
    return run


def run_claude(repo: Repo, args: list[str], timeout: float = 180) -> Run:
    """claude with exactly these arguments (and stream-json output)."""
    argv = [str(BIN / "claude"), *args, "--output-format", "stream-json", "--verbose",
            "--include-hook-events"]
    run, _ = _spawn(repo, argv, until=None, timeout=timeout)
    return run


def claude_start(repo: Repo, words: str, script: list[dict[str, Any]], *extra: str) -> Live:
    return start(repo, claude_argv(script_prompt(words, script), *extra))


def claude_until(repo: Repo, words: str, script: list[dict[str, Any]],
                 until: Callable[[], bool], *extra: str,
                 timeout: float = 120) -> tuple[Run, subprocess.Popen[str]]:
    """Start claude and return once `until()` holds (the caller then kills it)."""
    return _spawn(repo, claude_argv(script_prompt(words, script), *extra),
                  until=until, timeout=timeout)


def bash(command: str) -> dict[str, Any]:
    return {"name": "Bash", "input": {"command": command, "description": "scripted step"}}


def publish_command(server: Server, name: str = "publish") -> str:
    """A non-idempotent command: it counts one hit on the server each time it runs.

    `npm publish` in the command is what gitguard's classifier knows as non-idempotent;
    the `|| true` keeps it from failing (npm is not configured), the curl is the effect.
    """
    return (f"curl -s -X POST {server.url}/counter/{name} && npm publish --dry-run "
            f"--registry http://127.0.0.1:9 >/dev/null 2>&1 || true")


# --- Codex ------------------------------------------------------------------------------

def _codex_config(repo: Repo) -> None:
    codex_home = repo.home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    (codex_home / "config.toml").write_text(
        'model = "gpt-5.5"\n'
        'model_provider = "scripted"\n'
        'approval_policy = "never"\n'
        'sandbox_mode = "danger-full-access"\n'
        '[model_providers.scripted]\n'
        'name = "scripted"\n'
        f'base_url = "{repo.server.url}/v1"\n'
        'env_key = "OPENAI_API_KEY"\n'
        'wire_api = "responses"\n'
        'request_max_retries = 0\n'
        'stream_max_retries = 0\n'
        f'[projects."{repo.root}"]\n'
        'trust_level = "trusted"\n')


# `codex exec --json` prints no hook events, so Codex's hook latency is timed around the
# hook command itself: the wrapper stamps the clock before and after it (the command runs
# under one more `sh`), which leaves out Codex's own spawn of the wrapper.
CODEX_HOOK_LOG = "codex-hook-times.log"
TIME_HOOK = """#!/bin/sh
# time-hook LOG EVENT -- COMMAND: run COMMAND (stdin, stdout and exit code passed through)
log=$1; event=$2; shift 3
start=$(date +%s%N)
sh -c "$1"
code=$?
echo "$event $start $(date +%s%N)" >> "$log"
exit $code
"""


def _time_codex_hooks(repo: Repo) -> None:
    """Put the timing wrapper in front of every command in `.codex/hooks.json`."""
    wrapper = repo.home / "time-hook"
    wrapper.write_text(TIME_HOOK)
    wrapper.chmod(0o755)
    log = repo.home / CODEX_HOOK_LOG
    log.touch()
    path = repo.root / ".codex" / "hooks.json"
    data = json.loads(path.read_text())
    for event, groups in data["hooks"].items():
        for group in groups:
            for hook in group["hooks"]:
                hook["command"] = " ".join([shlex.quote(str(wrapper)), shlex.quote(str(log)),
                                            event, "--", shlex.quote(hook["command"])])
    path.write_text(json.dumps(data, indent=2) + "\n")


def codex_hook_times(log: Path) -> list[tuple[str, float]]:
    """("codex EVENT", ms) for each hook the wrapper timed since the last call (the log is
    emptied)."""
    lines = log.read_text().splitlines()
    log.write_text("")
    found = []
    for line in lines:
        event, start, end = line.split()
        found.append((f"codex {event}", (int(end) - int(start)) / 1e6))
    return found


def codex_model(repo: Repo, model: str, extra: str = "") -> None:
    """Codex offers other tools per model: `gpt-5-codex` gets the multi-agent tools
    (`spawn_agent`, `wait_agent`, ...). `extra` is appended to config.toml as it is."""
    config = repo.home / ".codex" / "config.toml"
    text = config.read_text().replace('model = "gpt-5.5"\n', f'model = "{model}"\n', 1)
    config.write_text(text + extra)


def codex_argv(prompt: str, *extra: str, resume: str | None = None,
               trust_hooks: bool = True) -> list[str]:
    """`codex exec`; with `trust_hooks`, the project's hooks run as if trusted in `/hooks`."""
    trust = ["--dangerously-bypass-hook-trust"] if trust_hooks else []
    argv = [str(BIN / "codex"), "exec", "--json", "--skip-git-repo-check", *trust, *extra]
    if resume is not None:
        argv += ["resume", resume]
    return [*argv, prompt]


def codex(repo: Repo, words: str, script: list[dict[str, Any]], *extra: str,
          resume: str | None = None, trust_hooks: bool = True, timeout: float = 180) -> Run:
    argv = codex_argv(script_prompt(words, script), *extra, resume=resume,
                      trust_hooks=trust_hooks)
    run, _ = _spawn(repo, argv, until=None, timeout=timeout)
    return run



def claude_turns(repo: Repo, turns: list[tuple[str, list[dict[str, Any]]]],
                 between: Callable[[int], None], *extra: str, timeout: float = 180) -> Run:
    """One `claude -p` process, one session, several user turns (stream-json input):
    `between(i)` runs after turn i's result and before turn i+1 is sent, as a user would
    edit files while the agent waits for the next prompt."""
    argv = [str(BIN / "claude"), "-p", "--input-format", "stream-json",
            "--output-format", "stream-json", "--verbose", "--include-hook-events",
            "--permission-mode", "acceptEdits", "--allowedTools", "Bash", *extra]
    proc = subprocess.Popen(argv, cwd=repo.root, env=repo.env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    run = Run(argv, None, [], [], "")
    err: list[str] = []
    t_err = threading.Thread(target=lambda: err.append(proc.stderr.read()), daemon=True)  # type: ignore[union-attr]
    t_err.start()
    results = threading.Semaphore(0)

    def read_out() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            at = time.monotonic()
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict):
                run.events.append(ev)
                run.stamps.append(at)
                if ev.get("type") == "result":
                    results.release()

    t_out = threading.Thread(target=read_out, daemon=True)
    t_out.start()
    assert proc.stdin is not None
    try:
        for i, (words, script) in enumerate(turns):
            message = {"type": "user", "message": {"role": "user",
                                                   "content": script_prompt(words, script)}}
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            if not results.acquire(timeout=timeout):
                raise AssertionError(f"turn {i} gave no result: {''.join(err)[-2000:]}")
            if i + 1 < len(turns):
                between(i)
        proc.stdin.close()
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    t_out.join(10)
    t_err.join(10)
    run.returncode = proc.returncode
    run.stderr = "".join(err)
    HOOK_LATENCY.extend((repo.mode, ev, ms) for ev, ms in run.hook_latencies())
    return run
