"""pygit2 imported without the CA bundle and the `ssl` module it never uses, and sha256
without OpenSSL, in a fresh no-daemon process."""

from __future__ import annotations

import importlib.machinery
import os
import sys
import types
from collections.abc import Callable
from typing import Any, NamedTuple

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
    paths = DefaultVerifyPaths(None, capath, "SSL_CERT_FILE", "", "SSL_CERT_DIR", capath)
    return stand_in("ssl", "pygit2's import only", DefaultVerifyPaths=DefaultVerifyPaths,
                    get_default_verify_paths=lambda: paths)


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
    fake = None
    if "ssl" not in sys.modules:
        fake = sys.modules["ssl"] = _ssl_stand_in(capath)
    try:
        real(module)
    finally:
        if fake is not None and sys.modules.get("ssl") is fake:
            del sys.modules["ssl"]
        if saved is None:
            del os.environ["SSL_CERT_FILE"]
        else:
            os.environ["SSL_CERT_FILE"] = saved


def lean_pygit2() -> None:
    if "pygit2" not in sys.modules:
        sys.meta_path.insert(0, _Pygit2WithoutCaBundle())


def stand_in(name: str, doc: str, **attributes: object) -> types.ModuleType:
    """A module `name` holding `attributes`; asked for anything else, it imports the real
    module, takes itself out of `sys.modules` (so the real one answers from then on) and
    hands over the real attribute."""
    module = types.ModuleType(name, f"gitguard: {doc} (leanimport)")
    for key, value in attributes.items():
        setattr(module, key, value)

    def _real(attribute: str) -> object:
        if attribute.startswith("__"):
            raise AttributeError(attribute)     # the import system's own questions
        if sys.modules.get(name) is module:
            del sys.modules[name]
        import importlib

        return getattr(importlib.import_module(name), attribute)

    module.__getattr__ = _real  # type: ignore[method-assign]
    return module


def lean_hashlib() -> None:
    """`hashlib` as a stand-in that hands out the interpreter's built-in sha1 and sha256
    (`_sha1`, `_sha256`: the same digests) until anything else is asked of it, and
    `secrets` as one that imports the real module when first used.

    The real hashlib loads `_hashlib`, OpenSSL's libcrypto and its configuration, for
    every process that checksums a ledger line or a checkpoint; so does `secrets` (through
    hmac, with random), which pydantic.types imports for its Secret types' comparisons:
    ~15-20 ms of CPU per process here, more with a cold page cache. gitguard's call path
    asks only for sha1 and sha256. Any other attribute (`new`, `md5`, `file_digest`,
    `compare_digest`...) imports the real module (`stand_in`), and so does an input of
    LARGE bytes or more. Without the built-in modules (an interpreter built without them)
    hashlib is left as it is."""
    if "secrets" not in sys.modules:
        sys.modules["secrets"] = stand_in("secrets", "imported when first used")
    if "hashlib" in sys.modules:
        return
    import importlib

    try:
        sha1 = importlib.import_module("_sha1")
        sha256 = importlib.import_module("_sha256")
    except ImportError:
        return
    small_sha1, small_sha256 = sha1.sha1, sha256.sha256

    # The built-in code is ~10x slower than OpenSSL's on large inputs (1 MB: 15.9 vs 1.6 ms
    # here): past LARGE bytes the real module is worth its load.
    def sha1_(data: bytes = b"", **options: bool) -> Any:
        return (small_sha1 if len(data) < LARGE else _real_hashlib().sha1)(data, **options)

    def sha256_(data: bytes = b"", **options: bool) -> Any:
        return (small_sha256 if len(data) < LARGE else _real_hashlib().sha256)(data, **options)

    sys.modules["hashlib"] = stand_in("hashlib", "sha1 and sha256 built in", sha1=sha1_,
                                      sha256=sha256_)


LARGE = 1 << 16


def _real_hashlib() -> types.ModuleType:
    module = sys.modules.get("hashlib")
    if module is not None and not (module.__doc__ or "").startswith("gitguard"):
        return module
    sys.modules.pop("hashlib", None)
    import importlib

    return importlib.import_module("hashlib")


def drop_stand_ins() -> None:
    """Before a command that is not a call or hook (the click fallback: the daemon, gc,
    rollback, verify... hash large files and live long): the real modules from here on."""
    for name in ("hashlib", "secrets"):
        module = sys.modules.get(name)
        if module is not None and (module.__doc__ or "").startswith("gitguard"):
            del sys.modules[name]


def lean_imports() -> None:
    """Both, for a process about to run a command here (gitguard.entry, gitguard.hookmain)."""
    lean_hashlib()
    lean_pygit2()
