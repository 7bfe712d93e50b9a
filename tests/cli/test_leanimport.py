"""pygit2 imported in a fresh process with a stand-in `ssl` (gitguard.leanimport): libgit2
gets the CA directory ssl would name, the real `ssl` is what any later import gets, and
pygit2 works as with its own import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_PROBE = """
import os, sys
{before}
from gitguard.leanimport import lean_pygit2
lean_pygit2()
import pygit2
lean = ("ssl" in sys.modules, "_ssl" in sys.modules, "socket" in sys.modules)
repo = pygit2.init_repository(sys.argv[1])
blob = repo.create_blob(b"hello")
import ssl
os.environ["SSL_CERT_FILE"] = ""
print(*lean, pygit2.settings._default_tls_verify_paths.capath,
      ssl.get_default_verify_paths().capath, pygit2.settings.ssl_cert_dir,
      hasattr(ssl, "SSLContext"), str(blob))
"""
_HELLO = "b6fc4c620b67d95f953a5c1c1230aaab5db5a1b0"


def _run(tmp_path: Path, env: dict[str, str], before: str = "") -> list[str]:
    out = subprocess.run([sys.executable, "-c", _PROBE.format(before=before),
                          str(tmp_path / "repo")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def test_pygit2_imports_without_ssl_and_gets_the_directory_ssl_names(tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    certs.mkdir()
    env = {**os.environ, "SSL_CERT_DIR": str(certs)}
    assert _run(tmp_path, env) == ["False", "False", "False", str(certs), str(certs),
                                   str(certs), "True", _HELLO]


def test_without_ssl_cert_dir_a_usual_ca_directory_is_named(tmp_path: Path) -> None:
    from gitguard.leanimport import CA_DIRS, ca_dir

    env = {k: v for k, v in os.environ.items() if k != "SSL_CERT_DIR"}
    out = _run(tmp_path, env)
    found = next((d for d in CA_DIRS if os.path.isdir(d)), None)
    if found is None:
        # no usual directory here: the real ssl was asked, as pygit2's own import does
        assert out[1:2] == ["True"] and out[3] == out[4]
    else:
        assert out[:3] == ["False", "False", "False"]
        assert out[3] == out[5] == found and os.path.isdir(out[3])
    assert out[6:] == ["True", _HELLO]
    saved = os.environ.pop("SSL_CERT_DIR", None)
    try:
        assert ca_dir() == found
    finally:
        if saved is not None:
            os.environ["SSL_CERT_DIR"] = saved


def test_an_ssl_imported_before_is_the_one_pygit2_uses(tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    certs.mkdir()
    env = {**os.environ, "SSL_CERT_DIR": str(certs)}
    out = _run(tmp_path, env, before="import ssl")
    assert out[:2] == ["True", "True"] and out[3:] == [str(certs)] * 3 + ["True", _HELLO]


_HASHES = """
import sys
from gitguard.leanimport import LARGE, drop_stand_ins, lean_hashlib
lean_hashlib()
import hashlib, secrets
small, large = b"gitguard" * 7, b"x" * LARGE
out = [hashlib.sha256(small).hexdigest(), hashlib.sha1(small).hexdigest(),
       hashlib.sha256(small, usedforsecurity=False).hexdigest()]
h = hashlib.sha256(b"git")
h.update(b"guard")
out.append(h.hexdigest())
out.append(str("_hashlib" in sys.modules))
out.append(hashlib.sha256(large).hexdigest())          # large: the real module's
out.append(str("_hashlib" in sys.modules))
out.append(str(secrets.compare_digest(b"a", b"a")))    # anything else: the real module
out.append(hashlib.md5(small).hexdigest())
out.append(str(sys.modules["hashlib"].__doc__.startswith("gitguard")))
drop_stand_ins()
import hashlib as again
out.append(str(again.__doc__.startswith("gitguard")))
print(*out)
"""


def test_the_hashlib_stand_in_gives_the_real_digests(tmp_path: Path) -> None:
    import hashlib

    from gitguard.leanimport import LARGE

    out = subprocess.run([sys.executable, "-c", _HASHES], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout.split()
    small = b"gitguard" * 7
    assert out == [hashlib.sha256(small).hexdigest(), hashlib.sha1(small).hexdigest(),
                   hashlib.sha256(small).hexdigest(), hashlib.sha256(b"gitguard").hexdigest(),
                   "False", hashlib.sha256(b"x" * LARGE).hexdigest(), "True", "True",
                   hashlib.md5(small).hexdigest(), "False", "False"]


def test_a_fresh_call_loads_no_openssl_and_its_records_verify(tmp_path: Path) -> None:
    """`call begin`/`call end` in fresh processes (no daemon): neither `_hashlib` nor
    `_ssl` is loaded, and the store they wrote (checksummed ledger lines, checkpoint
    files named with their sha256) reads back and verifies in a process with the real
    hashlib."""
    import json

    from gitguard.api import Guard

    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q"], ["config", "user.email", "t@t"], ["config", "user.name", "t"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    (repo / "a.txt").write_text("one\n")
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "one"], cwd=repo, check=True)
    env = {**os.environ, "GITGUARD_NO_DAEMON": "1"}
    probe = ("import atexit, sys\n"
             "atexit.register(lambda: print(sorted(m for m in ('_hashlib', '_ssl', 'hmac')"
             " if m in sys.modules), file=sys.stderr))\n"
             "from gitguard.entry import main\nsys.argv[0] = 'gitguard'\nmain()\n")

    def gitguard(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", probe, *args], cwd=repo, env=env,
                              capture_output=True, text=True, check=True)

    subprocess.run([sys.executable, "-m", "gitguard", "init", "--no-hooks", "--no-daemon"],
                   cwd=repo, env=env, check=True, capture_output=True)
    begun = gitguard("call", "begin", "--tool", "write_file", "--input",
                     '{"path": "a.txt"}', "--writes", "a.txt", "--json")
    assert begun.stderr.strip() == "[]"
    (repo / "a.txt").write_text("two\n")
    ended = gitguard("call", "end", json.loads(begun.stdout)["callId"], "--status",
                     "succeeded", "--result", "ok")
    assert ended.stderr.strip() == "[]"
    assert ended.stdout.strip() == "call_1 succeeded: 1 file(s) changed"
    verified = subprocess.run([sys.executable, "-m", "gitguard", "verify", "--json"],
                              cwd=repo, env=env, capture_output=True, text=True)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    with Guard.open(repo) as guard:
        [entry] = guard.ledger()
        assert entry.status == "succeeded" and [p.path for p in entry.file_patches] == ["a.txt"]
        assert [row.kind for row in guard.checkpoints()][-2:] == ["pre", "post"]
