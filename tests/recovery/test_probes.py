"""Probes turn an uncertain call into a fact (issue 30 item 1): a real `gitguard run -- git
push` or `npm publish` killed mid-call (SIGKILL to its whole process group) against a real
local service, then `resume` asks the service and settles the call, both ways. A probe
that hangs, whose command is absent, that exits with an unexpected code or prints garbage
leaves the call uncertain and says why. No mocks: real git, real npm, real processes.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitguard.ledger import journal
from gitguard.storage.store import Store
from gitguard.workspace import discover
from tests.helpers.commands import gg, git
from tests.helpers.daemons import wait_for

HANG_HOOK = '#!/bin/sh\ntouch "{marker}"\nexec sleep 600\n'


def _entry(repo: Path, call_id: str) -> dict[str, Any]:
    return {e["callId"]: e for e in json.loads(gg(repo, "ledger", "--json").stdout)}[call_id]


def _resume(repo: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    done = gg(repo, "resume", "--json", check=False, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout))


def _killed_run(repo: Path, arrived: Any, *command: str,
                env: dict[str, str] | None = None) -> str:
    """`gitguard run -- COMMAND` killed with SIGKILL (its whole process group) once
    `arrived()` says the command reached the service: the agent died mid-call."""
    store = Store(discover(repo))
    before = len(journal.read(store).order)
    proc = subprocess.Popen([sys.executable, "-m", "gitguard", "run", "--", *command],
                            cwd=repo, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    try:
        wait_for("the command to reach the service", arrived)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    (call_id,) = journal.read(store).order[before:]
    return call_id


# --- git push against a local bare remote -------------------------------------------

@pytest.fixture
def pushing(repo: Path, tmp_path: Path) -> Path:
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    git(repo, "push", "-q", "origin", "main")
    gg(repo, "init", "--no-hooks", "--no-daemon")
    (repo / "src" / "app.py").write_text("def main():\n    return 2\n")
    git(repo, "commit", "-qam", "second")
    return remote


def _kill_push_in_hook(repo: Path, remote: Path, hook: str) -> str:
    """`git push origin main`, killed while the remote runs `hook`: in pre-receive the
    remote's ref has not moved; in post-receive it has."""
    marker = remote.parent / f"{hook}.ran"
    script = remote / "hooks" / hook
    script.write_text(HANG_HOOK.format(marker=marker))
    script.chmod(0o755)
    try:
        return _killed_run(repo, marker.exists, "git", "push", "origin", "main")
    finally:
        script.unlink()


def test_a_push_killed_after_the_remote_took_it_is_settled_as_succeeded(
        repo: Path, pushing: Path) -> None:
    sent = git(repo, "rev-parse", "HEAD").strip()
    call_id = _kill_push_in_hook(repo, pushing, "post-receive")
    assert git(pushing, "rev-parse", "main").strip() == sent       # the push did land
    out = _resume(repo)
    note = out["recoveryNote"]
    assert (f"did push {sent[:12]} to refs/heads/main on origin (the remote's refs/heads/main "
            f"is {sent[:12]}): do not repeat.") in note
    assert out["uncertain"] == [] and call_id in out["doNotRepeat"]
    entry = _entry(repo, call_id)
    assert (entry["status"], entry["probeResult"]) == ("succeeded", "happened")
    assert entry["probeFacts"]["sha"] == sent and entry["probeFacts"]["readAt"] == "begin"
    assert entry["probedAt"] and entry["probeRef"].startswith("artifacts/probe_")
    evidence = json.loads(Store(discover(repo)).read_artifact(entry["probeRef"]))
    assert evidence["argv"] == ["git", "ls-remote", "--", "origin", "refs/heads/main"]
    assert evidence["exitCode"] == 0 and sent in evidence["stdout"]
    # The replay guard now refuses the same push: it happened.
    again = gg(repo, "run", "--", "git", "push", "origin", "main", check=False)
    assert again.returncode == 4, again.stderr


def test_a_push_killed_before_the_remote_took_it_is_settled_as_failed(
        repo: Path, pushing: Path) -> None:
    sent = git(repo, "rev-parse", "HEAD").strip()
    call_id = _kill_push_in_hook(repo, pushing, "pre-receive")
    assert git(pushing, "rev-parse", "main").strip() != sent       # it did not land
    out = _resume(repo)
    assert (f"did not push {sent[:12]} to refs/heads/main on origin (the remote's "
            f"refs/heads/main is not {sent[:12]}): it may be run again once.") in \
        out["recoveryNote"]
    entry = _entry(repo, call_id)
    assert (entry["status"], entry["probeResult"]) == ("failed", "not_happened")
    assert call_id not in out["doNotRepeat"]
    # Running it again is allowed, and this time it lands.
    gg(repo, "run", "--", "git", "push", "-q", "origin", "main")
    assert git(pushing, "rev-parse", "main").strip() == sent


def test_resume_twice_tells_the_same_fact(repo: Path, pushing: Path) -> None:
    _kill_push_in_hook(repo, pushing, "post-receive")
    first = _resume(repo)["recoveryNote"]
    assert _resume(repo)["recoveryNote"] == first


def test_a_push_to_a_remote_that_cannot_answer_stays_uncertain(
        repo: Path, pushing: Path) -> None:
    call_id = _kill_push_in_hook(repo, pushing, "pre-receive")
    git(repo, "remote", "set-url", "origin", str(pushing.parent / "gone.git"))
    out = _resume(repo)
    assert out["uncertain"] == [call_id]
    line = next(ln for ln in out["recoveryNote"].splitlines() if call_id in ln)
    assert "its probe `git ls-remote -- origin refs/heads/main` could not tell (it exited 128" \
        in line
    assert line.endswith("check the remote repository (`git ls-remote`) before doing "
                         "anything.")


# --- npm publish against a registry on 127.0.0.1 -------------------------------------

class _Registry(http.server.ThreadingHTTPServer):
    """A registry `npm view` and `npm publish` talk to: GET /NAME answers the package
    document; PUT /NAME (a publish) stores it first or not (`store_first`) and then hangs
    until the test ends, so the publisher is killed mid-call."""

    def __init__(self, store_first: bool) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.docs: dict[str, dict[str, Any]] = {"demo-pkg": {
            "name": "demo-pkg", "dist-tags": {"latest": "1.0.0"},
            "versions": {"1.0.0": {"name": "demo-pkg", "version": "1.0.0"}}}}
        self.store_first = store_first
        self.put = threading.Event()
        self.release = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Registry

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        doc = self.server.docs.get(self.path.lstrip("/").replace("%2f", "/"))
        body = json.dumps(doc if doc else {"error": "Not found"}).encode()
        self.send_response(200 if doc else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.server.store_first:
            doc = self.server.docs.setdefault(body["name"], {"name": body["name"],
                                                             "versions": {}})
            doc["versions"].update(body["versions"])
            doc["dist-tags"] = body["dist-tags"]
        self.server.put.set()
        self.server.release.wait(120)
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()


NPM = shutil.which("npm")
needs_npm = pytest.mark.skipif(NPM is None, reason="npm is not installed on this machine")


@pytest.fixture(params=[True, False], ids=["stored", "not-stored"])
def registry(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[_Registry]:
    server = _Registry(store_first=request.param)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()


def _npm_env(registry: _Registry, tmp_path: Path) -> dict[str, str]:
    host = registry.url.removeprefix("http:")
    return {"npm_config_registry": registry.url, f"npm_config_{host}:_authToken": "test-token",
            "npm_config_cache": str(tmp_path / "npm-cache"), "npm_config_audit": "false",
            "npm_config_fund": "false", "npm_config_update_notifier": "false"}


@needs_npm
def test_an_npm_publish_killed_mid_call_is_settled_by_the_registry(
        repo: Path, tmp_path: Path, registry: _Registry) -> None:
    (repo / "package.json").write_text('{"name": "demo-pkg", "version": "1.2.0"}\n')
    gg(repo, "init", "--no-hooks", "--no-daemon")
    env = _npm_env(registry, tmp_path)
    call_id = _killed_run(repo, registry.put.is_set, "npm", "publish", env=env)
    # The agent's package.json moves on before anyone resumes: the probe asks about the
    # version the call was publishing, which call begin recorded.
    (repo / "package.json").write_text('{"name": "demo-pkg", "version": "1.3.0"}\n')
    out = _resume(repo, env)
    entry = _entry(repo, call_id)
    assert entry["probeFacts"] == {"kind": "npm_publish", "name": "demo-pkg",
                                   "version": "1.2.0", "readAt": "begin"}
    if registry.store_first:
        assert ("did publish demo-pkg@1.2.0 (the registry lists it): do not repeat."
                in out["recoveryNote"])
        assert entry["status"] == "succeeded" and call_id in out["doNotRepeat"]
    else:
        assert ("did not publish demo-pkg@1.2.0 (the registry does not list it): it may be "
                "run again once." in out["recoveryNote"])
        assert entry["status"] == "failed" and call_id not in out["doNotRepeat"]
    evidence = json.loads(Store(discover(repo)).read_artifact(entry["probeRef"]))
    assert evidence["argv"] == ["npm", "view", "--", "demo-pkg@1.2.0", "version"]
    assert "test-token" not in json.dumps(evidence)


# --- declared probes that cannot tell ------------------------------------------------

def _declared(repo: Path, probe: str, timeout: float = 5) -> str:
    (repo / ".gitguard.toml").write_text(
        f'[probes]\ntimeout = {timeout}\n\n[tools.deploy]\nidempotency = "non_idempotent"\n'
        f'sideEffects = ["external"]\n{probe}\n')
    gg(repo, "init", "--no-hooks", "--no-daemon")
    began = gg(repo, "call", "begin", "--tool", "deploy", "--input",
               '{"version": "1.2.0"}', "--json")
    return str(json.loads(began.stdout)["callId"])


def _uncertain_line(repo: Path, call_id: str) -> str:
    out = _resume(repo)
    assert out["uncertain"] == [call_id]
    assert _entry(repo, call_id)["status"] == "uncertain"
    return next(ln for ln in out["recoveryNote"].splitlines() if f"({call_id})" in ln)


def test_a_probe_that_hangs_is_stopped_and_the_call_stays_uncertain(repo: Path) -> None:
    call_id = _declared(repo, 'probe = ["sleep", "60"]', timeout=0.5)
    line = _uncertain_line(repo, call_id)
    assert line == (f"Tool deploy({call_id}) started but its outcome is unknown: it is not "
                    "idempotent; its probe `sleep 60` could not tell (it did not answer "
                    "within 0.5 s and was stopped); check the remote service it talks to "
                    "before doing anything.")


def test_a_probe_whose_command_is_absent_leaves_the_call_uncertain(repo: Path) -> None:
    call_id = _declared(repo, 'probe = ["gitguard-no-such-probe", "{version}"]')
    line = _uncertain_line(repo, call_id)
    assert ("its probe `gitguard-no-such-probe 1.2.0` could not tell (its command "
            "`gitguard-no-such-probe` is not installed here)") in line


def test_an_unexpected_exit_code_leaves_the_call_uncertain(repo: Path) -> None:
    call_id = _declared(repo, 'probe = ["sh", "-c", "echo registry unavailable >&2; exit 3"]')
    assert ("could not tell (it exited 3 and its output matches neither reading: registry "
            "unavailable)") in _uncertain_line(repo, call_id)


def test_garbage_output_leaves_the_call_uncertain(repo: Path) -> None:
    call_id = _declared(repo, '[tools.deploy.probe]\nargv = ["echo", "<html>oops</html>"]\n'
                              'happened = [{exit = [0], stdout = ["^deployed {version}$"]}]\n'
                              'notHappened = [{exit = [0], stdout = ["^absent$"]}]')
    assert "its output matches neither reading: <html>oops</html>)" in \
        _uncertain_line(repo, call_id)


def test_a_declared_probe_settles_with_the_calls_input(repo: Path) -> None:
    call_id = _declared(repo, '[tools.deploy.probe]\nargv = ["test", "-e", "deployed-{version}"]'
                              '\neffect = "deploy {version}"\nhappenedBecause = "its marker '
                              'is there"')
    (repo / "deployed-1.2.0").write_text("")
    out = _resume(repo)
    assert (f"Tool deploy({call_id}) `{{\"version\":\"1.2.0\"}}` did deploy 1.2.0 (its marker "
            "is there): do not repeat.") in out["recoveryNote"]


def test_the_probes_output_is_redacted_and_the_environment_never_recorded(
        repo: Path) -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    call_id = _declared(repo, 'probe = ["printenv", "PROBE_TOKEN"]')
    done = gg(repo, "resume", "--json", env={"PROBE_TOKEN": token})
    assert _entry(repo, call_id)["status"] == "succeeded"      # printenv found it: exit 0
    store = discover(repo).store_dir
    for path in store.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path
    assert token not in done.stdout


# --- reconcile --probe ----------------------------------------------------------------

def test_reconcile_probe_settles_one_call_on_demand(repo: Path) -> None:
    call_id = _declared(repo, 'probe = ["test", "-e", "deployed-{version}"]')
    (repo / "deployed-1.2.0").write_text("")
    done = gg(repo, "reconcile", "--probe", call_id, "--json", check=False)
    assert done.returncode == 1 and "is still started" in done.stderr    # resume first
    assert done.stderr.startswith("Error: ") and "Hint: " in done.stderr
    (repo / "deployed-1.2.0").unlink()
    gg(repo, "resume")             # the probe says: not deployed, so the call failed
    assert _entry(repo, call_id)["status"] == "failed"


def test_reconcile_probe_exit_codes(repo: Path) -> None:
    call_id = _declared(repo, 'probe = ["sh", "-c", "exit 3"]')
    _resume(repo)
    unsure = gg(repo, "reconcile", "--probe", call_id, "--json", check=False)
    assert unsure.returncode == 1, unsure.stderr
    assert json.loads(unsure.stdout)["probeResult"] == "unknown"
    assert unsure.stderr.startswith("Error: the probe `sh -c 'exit 3'` could not tell")
    (repo / ".gitguard.toml").write_text(
        (repo / ".gitguard.toml").read_text().replace('"exit 3"', '"exit 0"'))
    done = gg(repo, "reconcile", "--probe", call_id, "--json")
    found = json.loads(done.stdout)
    assert (found["probeResult"], found["status"]) == ("happened", "succeeded")
    again = gg(repo, "reconcile", "--probe", call_id, check=False)
    assert again.returncode == 1 and "not uncertain" in again.stderr
    both = gg(repo, "reconcile", call_id, "--probe", "--status", "failed", check=False)
    assert both.returncode == 2 and "Error:" in both.stderr
    neither = gg(repo, "reconcile", call_id, check=False)
    assert neither.returncode == 2


def test_reconcile_probe_of_a_call_without_a_probe_says_how_to_declare_one(
        repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    began = gg(repo, "call", "begin", "--tool", "send_email", "--input", '{"to": "a@b"}',
               "--json")
    call_id = json.loads(began.stdout)["callId"]
    _resume(repo)
    done = gg(repo, "reconcile", "--probe", call_id, check=False)
    assert done.returncode == 1
    assert done.stderr.startswith(f"Error: send_email ({call_id}) has no probe: ")
    assert "declare probe = [...] under [tools.send_email]" in done.stderr


# --- a probe that cannot tell is recorded; probes run without the store lock ----------

def test_a_probe_that_cannot_tell_is_recorded_and_the_call_stays_uncertain(
        repo: Path) -> None:
    call_id = _declared(repo, 'probe = ["sh", "-c", "echo login required >&2; exit 3"]')
    line = _uncertain_line(repo, call_id)
    entry = _entry(repo, call_id)
    assert (entry["status"], entry["probeResult"]) == ("uncertain", "unknown")
    assert entry["probedAt"] and entry["probeRef"].startswith("artifacts/probe_")
    assert entry["note"] == ("its probe `sh -c 'echo login required >&2; exit 3'` could not "
                             "tell (it exited 3 and its output matches neither reading: login "
                             "required)")
    assert entry["note"] in line
    evidence = json.loads(Store(discover(repo)).read_artifact(entry["probeRef"]))
    assert (evidence["probeResult"], evidence["exitCode"]) == ("unknown", 3)
    assert "login required" in evidence["stderr"]
    # The ledger says it; `verify` accepts the event; a later settle is still legal.
    assert gg(repo, "verify").returncode == 0
    gg(repo, "reconcile", call_id, "--status", "failed")
    assert _entry(repo, call_id)["status"] == "failed"


def test_a_hung_probe_is_recorded_with_why_and_no_evidence_output(repo: Path) -> None:
    call_id = _declared(repo, 'probe = ["sleep", "60"]', timeout=0.5)
    _uncertain_line(repo, call_id)
    entry = _entry(repo, call_id)
    assert entry["probeResult"] == "unknown"
    assert entry["note"] == ("its probe `sleep 60` could not tell (it did not answer within "
                             "0.5 s and was stopped)")
    evidence = json.loads(Store(discover(repo)).read_artifact(entry["probeRef"]))
    assert evidence["exitCode"] is None and evidence["error"].startswith("it did not answer")


def test_probes_run_without_the_store_lock_and_never_overwrite_a_settled_call(
        repo: Path, tmp_path: Path) -> None:
    started, release = tmp_path / "probe.started", tmp_path / "probe.release"
    call_id = _declared(repo, f'probe = ["sh", "-c", "touch {started}; while [ ! -e '
                              f'{release} ]; do sleep 0.05; done; exit 0"]', timeout=120)
    resume = subprocess.Popen([sys.executable, "-m", "gitguard", "resume", "--json"],
                              cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    try:
        wait_for("the probe to start", started.exists)
        # The probe hangs; the store is free: another command writes the ledger, and a
        # person settles the very call the probe is asking about.
        other = gg(repo, "call", "begin", "--tool", "Read", "--input", '{"file_path": "x"}',
                   "--json")
        gg(repo, "reconcile", call_id, "--status", "failed", "--note", "checked by hand")
        assert resume.poll() is None                 # resume is still waiting on its probe
    finally:
        release.write_text("")
    out, err = resume.communicate(timeout=120)
    assert resume.returncode == 0, out + err
    # The probe said "happened" (exit 0), but the person's answer came first and stays.
    entry = _entry(repo, call_id)
    assert (entry["status"], entry["note"], entry["probeResult"]) == \
        ("failed", "checked by hand", None)
    probe = next(p for p in json.loads(out)["probes"] if p["callId"] == call_id)
    assert probe["probeResult"] == "happened" and probe["status"] == "failed"
    assert "not recorded: the call was settled meanwhile (failed)" in probe["why"]
    assert json.loads(other.stdout)["callId"] in [e["callId"] for e in json.loads(
        gg(repo, "ledger", "--json").stdout)]
