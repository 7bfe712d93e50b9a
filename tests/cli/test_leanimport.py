"""pygit2 imported in a fresh process without libgit2 parsing the CA bundle file
(gitguard.cli.startup): the real `ssl`, the CA directory handed to libgit2, and the user's
SSL_CERT_FILE back as it was for everything after the import.

These fail loudly if pygit2 stops handing libgit2 `ssl.get_default_verify_paths()` at
import (the behaviour startup.py designs around): the locations pygit2 reports through
its public settings would no longer be the directory alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_PROBE = """
import os, sys
from gitguard.cli.startup import lean_pygit2
lean_pygit2()
import pygit2, ssl
repo = pygit2.init_repository(sys.argv[1])
print(pygit2.settings.ssl_cert_file, pygit2.settings.ssl_cert_dir,
      os.environ.get("SSL_CERT_FILE", "<unset>"), hasattr(ssl, "SSLContext"),
      str(repo.create_blob(b"hello")))
"""
_HELLO = "b6fc4c620b67d95f953a5c1c1230aaab5db5a1b0"


def _run(tmp_path: Path, env: dict[str, str]) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path / "repo")], cwd=tmp_path,
                         env=env, capture_output=True, text=True, check=True).stdout
    return out.split()


def test_pygit2_gets_the_ca_directory_and_not_the_bundle(tmp_path: Path) -> None:
    certs, bundle = tmp_path / "certs", tmp_path / "bundle.pem"
    certs.mkdir()
    bundle.write_text("")
    env = {**os.environ, "SSL_CERT_DIR": str(certs), "SSL_CERT_FILE": str(bundle)}
    assert _run(tmp_path, env) == ["None", str(certs), str(bundle), "True", _HELLO]


def test_with_no_ca_directory_pygit2_keeps_the_bundle(tmp_path: Path) -> None:
    import ssl

    bundle = os.environ.get("SSL_CERT_FILE") or ssl.get_default_verify_paths().openssl_cafile
    assert os.path.isfile(bundle), "this machine has a CA bundle"
    env = {**os.environ, "SSL_CERT_DIR": str(tmp_path / "none"), "SSL_CERT_FILE": bundle}
    assert _run(tmp_path, env) == [bundle, "None", bundle, "True", _HELLO]
    env.pop("SSL_CERT_FILE")
    assert _run(tmp_path, {**env, "SSL_CERT_DIR": str(tmp_path)})[2] == "<unset>"
