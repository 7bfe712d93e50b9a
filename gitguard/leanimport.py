"""pygit2 imported without the CA bundle and the `ssl` module it never uses, in a fresh
no-daemon process."""

from __future__ import annotations

import importlib.machinery
import os
import sys
import types
from collections.abc import Callable
from typing import NamedTuple

# Where OpenSSL builds keep their hashed CA directory (Debian/Ubuntu, Fedora/RHEL,
# Alpine, SUSE, Homebrew, BSD): the stand-in below hands libgit2 the first one that
# exists when SSL_CERT_DIR does not name one.
CA_DIRS = ("/etc/ssl/certs", "/usr/lib/ssl/certs", "/etc/pki/tls/certs",
           "/var/lib/ca-certificates/openssl", "/usr/local/etc/openssl/certs",
           "/opt/homebrew/etc/openssl@3/certs", "/etc/openssl/certs")


class DefaultVerifyPaths(NamedTuple):
    """The same fields as `ssl.DefaultVerifyPaths` (what pygit2.settings reads)."""

    cafile: str | None
    capath: str | None
    openssl_cafile_env: str
    openssl_cafile: str
    openssl_capath_env: str
    openssl_capath: str


def ca_dir() -> str | None:
    """The CA directory `ssl.get_default_verify_paths()` would name when SSL_CERT_FILE is
    "" (the file is then None), found without loading `_ssl`: SSL_CERT_DIR when set (None
    when it is not a directory, as ssl says), else the first usual OpenSSL directory."""
    named = os.environ.get("SSL_CERT_DIR")
    if named is not None:
        return named if os.path.isdir(named) else None
    return next((d for d in CA_DIRS if os.path.isdir(d)), None)


def _ssl_stand_in(capath: str) -> types.ModuleType:
    """An `ssl` module with only what pygit2's import asks of it (`pygit2/settings.py`:
    `from ssl import DefaultVerifyPaths, get_default_verify_paths`). The real one loads
    `_ssl` (libssl, libcrypto) and `socket`: ~30 ms of CPU per process here, spent only to
    name a CA directory that libgit2 would use for an https remote, which gitguard never
    opens. Asked for anything else, it steps aside for the real module."""
    module = types.ModuleType("ssl", "gitguard: pygit2's import only (leanimport)")
    paths = DefaultVerifyPaths(None, capath, "SSL_CERT_FILE", "", "SSL_CERT_DIR", capath)
    module.DefaultVerifyPaths = DefaultVerifyPaths  # type: ignore[attr-defined]
    module.get_default_verify_paths = lambda: paths  # type: ignore[attr-defined]

    def _real(attribute: str) -> object:
        if attribute.startswith("__"):
            raise AttributeError(attribute)     # the import system's own questions
        if sys.modules.get("ssl") is module:
            del sys.modules["ssl"]
        import importlib

        return getattr(importlib.import_module("ssl"), attribute)

    module.__getattr__ = _real  # type: ignore[method-assign]
    return module


class _Pygit2WithoutCaBundle:
    """Imports pygit2 with SSL_CERT_FILE set to "" for the length of its import, and with
    a stand-in `ssl` module when the real one is not imported yet.

    pygit2's import hands libgit2 the CA locations that `ssl.get_default_verify_paths`
    finds, and libgit2's OpenSSL then parses the whole CA bundle file (~200 KB of PEM
    here): ~35 ms of CPU, ~60 ms with the rest of that set-up, in every fresh process
    that reads or writes objects. gitguard opens no network connection through libgit2;
    with the bundle file unset libgit2 still has the CA directory. This holds as well
    when the user (or the machine: this one sets it globally) set SSL_CERT_FILE. The
    variable is put back as it was once pygit2 is imported, so git and every other
    child process see the user's environment, and the stand-in `ssl` is taken out of
    `sys.modules` (a later `import ssl` gets the real one). Installed only in a fresh
    process that runs a command here (never in one the daemon answered for)."""

    def find_spec(self, name: str, path: object = None, target: object = None
                  ) -> importlib.machinery.ModuleSpec | None:
        if name != "pygit2":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)  # type: ignore[arg-type]
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        real = loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            capath = ca_dir()
            if capath is None:
                import ssl

                capath = ssl.get_default_verify_paths().capath
            if capath is None:
                real(module)    # no CA directory: pygit2 needs the file (both unset fails)
                return
            _without_ca_bundle(real, module, capath)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _without_ca_bundle(real: Callable[[types.ModuleType], None], module: types.ModuleType,
                       capath: str) -> None:
    saved = os.environ.get("SSL_CERT_FILE")
    os.environ["SSL_CERT_FILE"] = ""
    stand_in = None
    if "ssl" not in sys.modules:
        stand_in = sys.modules["ssl"] = _ssl_stand_in(capath)
    try:
        real(module)
    finally:
        if stand_in is not None and sys.modules.get("ssl") is stand_in:
            del sys.modules["ssl"]
        if saved is None:
            del os.environ["SSL_CERT_FILE"]
        else:
            os.environ["SSL_CERT_FILE"] = saved


def lean_pygit2() -> None:
    if "pygit2" not in sys.modules:
        sys.meta_path.insert(0, _Pygit2WithoutCaBundle())
