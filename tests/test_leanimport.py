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
