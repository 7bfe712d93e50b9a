"""A fresh no-daemon `call begin`/`call end` process runs without click (gitguard.cli.call_parser)
and prints, exits and records exactly as the click command does; pygit2 is imported there
without the CA bundle, and the environment its children see is the user's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gitguard.api import Guard
from gitguard.cli import call_parser
from tests.daemon.test_daemon_calls_match_cli import ENV, SCRIPT

# The same command line through gitguard.cli.entry (the lean path when it takes it) or through
# click directly; PROBE records what the process imported.
_ENTRY = ("import atexit, os, sys\n"
          "atexit.register(lambda: open(os.environ['PROBE'], 'a').write("
          "' '.join(m for m in ('click', 'pygit2', 'gitguard.recovery.resume') if m in sys.modules)"
          " + '\\n'))\n"
          "from gitguard.cli.entry import main\nmain()\n")
_CLICK = "import sys\nfrom gitguard.cli.main import main\nmain(sys.argv[1:])\n"
# every lean shape, and a sample of click's own (usage errors, help)
_PICKED = [*range(14), 14, 16, 24, 27]


def _run(repo: Path, runner: str, probe: Path) -> list[tuple[int, str, str]]:
    env = {**os.environ, **ENV, "PROBE": str(probe), "GITGUARD_NO_DAEMON": "1"}
    env.pop("GITGUARD_FAULT", None)
    Guard.init(repo).close()
    results = []
    for i in _PICKED:
        argv, stdin, edit, _ = SCRIPT[i]
        if edit is not None:
            (repo / edit).write_text(f"written by the agent: {edit}\n")
        proc = subprocess.run([sys.executable, "-c", runner, *argv], cwd=repo, env=env,
                              input=stdin, capture_output=True)
        results.append((proc.returncode, proc.stdout.decode().replace(str(repo), "<ws>"),
                        proc.stderr.decode().replace(str(repo), "<ws>")))
    return results


def _ledger(repo: Path) -> str:
    with Guard.open(repo) as guard:
        entries = [e.to_json() for e in guard.ledger()]
        rows = [r.to_json() for r in guard.checkpoints()]
    return json.dumps([entries, rows]).replace(str(repo), "<ws>")


def test_the_lean_path_prints_exits_and_records_as_click(repo: Path, tmp_path: Path) -> None:
    twin = tmp_path / "twin"
    subprocess.run(["cp", "-a", str(repo), str(twin)], check=True)
    lean = _run(repo, _ENTRY, tmp_path / "lean.probe")
    full = _run(twin, _CLICK, tmp_path / "full.probe")
    assert [r[0] for r in lean] == [0, 0, 0, 0, 0, 0, 4, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 0]
    assert lean == full
    assert lean[0][1].startswith("{") and lean[3][1] == "mine failed: 1 file(s) changed\n"
    assert _ledger(repo) == _ledger(twin)
    imported = (tmp_path / "lean.probe").read_text().splitlines()
    # the lean shapes: pygit2 (the snapshot), no click and no recovery; click's own: click
    assert all(line == "pygit2" for line in imported[:14]), imported
    assert all("click" in line for line in imported[14:]), imported


def test_dash_c_and_help_are_read_as_click_reads_them() -> None:
    assert call_parser.here(["-C", "x", "-C", "y", "call", "end", "c", "--status",
                             "failed"]) is None
    assert call_parser.here(["call", "end", "c", "--status", "failed", "--help"]) is None
    assert call_parser.here(["-C"]) is None
    assert call_parser.parse(["-C", "x", "call", "end", "c", "--status", "failed"]) is None


def test_the_parser_takes_the_same_shapes_as_the_daemons() -> None:
    for argv, _, _, fast in SCRIPT:
        assert (call_parser.parse(argv) is not None) == fast, argv


_PYGIT2 = ("import os, sys\nfrom gitguard.cli.startup import lean_pygit2\nlean_pygit2()\n"
           "import pygit2\n"
           "print(os.environ.get('SSL_CERT_FILE', '<unset>'),"
           " pygit2.settings._default_tls_verify_paths.cafile,"
           " any(type(f).__name__.startswith('_Pygit2') for f in sys.meta_path))\n")


def test_pygit2_is_imported_without_the_ca_bundle_and_the_environment_is_put_back(
        tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SSL_CERT_FILE"}
    out = subprocess.run([sys.executable, "-c", _PYGIT2], cwd=tmp_path, env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["<unset>", "None", "False"]     # and the finder is gone
    # a user's own SSL_CERT_FILE: hidden from pygit2's import only, then back as it was
    bundle = tmp_path / "bundle.pem"
    bundle.write_text("")
    out = subprocess.run([sys.executable, "-c", _PYGIT2], cwd=tmp_path,
                         env={**env, "SSL_CERT_FILE": str(bundle)},
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(bundle), "None", "False"]
    # no CA directory: the import goes exactly as pygit2's own (with neither, it fails)
    no_dir = {**env, "SSL_CERT_FILE": str(bundle), "SSL_CERT_DIR": str(tmp_path / "none")}
    lean, plain = (subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=no_dir,
                                  capture_output=True, text=True)
                   for probe in (_PYGIT2, _PYGIT2.replace("lean_pygit2()\n", "")))
    assert (lean.returncode, lean.stdout) == (plain.returncode, plain.stdout)
