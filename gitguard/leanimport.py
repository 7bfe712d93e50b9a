"""pygit2 imported without the CA bundle it never uses, in a fresh no-daemon process."""

from __future__ import annotations

import importlib.machinery
import os
import sys
import types


class _Pygit2WithoutCaBundle:
    """Imports pygit2 with SSL_CERT_FILE set to "" for the length of its import.

    pygit2's import hands libgit2 the CA locations that `ssl.get_default_verify_paths`
    finds, and libgit2's OpenSSL then parses the whole CA bundle file (~200 KB of PEM
    here): ~35 ms of CPU, ~60 ms with the rest of that set-up, in every fresh process
    that reads or writes objects. gitguard opens no network connection through libgit2;
    with the bundle file unset libgit2 still has the CA directory. This holds as well
    when the user (or the machine: this one sets it globally) set SSL_CERT_FILE. The
    variable is put back as it was once pygit2 is imported, so git and every other
    child process see the user's environment. Installed only in a fresh process that
    runs a command here (never in one the daemon answered for)."""

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
            import ssl  # pygit2 imports it too: no extra cost

            if ssl.get_default_verify_paths().capath is None:
                real(module)    # no CA directory: pygit2 needs the file (both unset fails)
                return
            saved = os.environ.get("SSL_CERT_FILE")
            os.environ["SSL_CERT_FILE"] = ""
            try:
                real(module)
            finally:
                if saved is None:
                    del os.environ["SSL_CERT_FILE"]
                else:
                    os.environ["SSL_CERT_FILE"] = saved

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def lean_pygit2() -> None:
    if "pygit2" not in sys.modules:
        sys.meta_path.insert(0, _Pygit2WithoutCaBundle())
