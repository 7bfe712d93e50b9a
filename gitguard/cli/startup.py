"""pygit2 imported without libgit2 parsing the CA bundle file it never uses, in a fresh
process that runs a command here (gitguard.cli.entry, gitguard.hookmain).

pygit2's import hands libgit2 the CA locations that `ssl.get_default_verify_paths` finds,
and libgit2's OpenSSL then parses the whole CA bundle file (~200 KB of PEM here): ~12 ms
of CPU in every fresh process that reads or writes objects (measured again for issue 28:
`import pygit2` 46.6 ms of CPU with the bundle, 35.3 without, median of 21 runs).
gitguard opens no network connection through libgit2, and with the bundle file unset
libgit2 still has the CA directory. So pygit2 is imported here, first, with SSL_CERT_FILE
set to "" for the length of its import when a CA directory exists (with neither, pygit2
would have no CA at all); the variable is then put back as it was, so git and every
child process see the user's environment. This holds as well when the user (or the
machine) set SSL_CERT_FILE. Nothing is replaced: the real `ssl` and pygit2 modules,
imported in another order. pygit2's import-time CA load is its behaviour, not its
contract: tests/cli/test_leanimport.py reads the locations back through pygit2's public
settings and fails if that changes.
"""

from __future__ import annotations

import os
import sys


def lean_pygit2() -> None:
    """Import pygit2 now, without the CA bundle file when a CA directory serves instead."""
    if "pygit2" in sys.modules:
        return
    import ssl

    saved = os.environ.get("SSL_CERT_FILE")
    os.environ["SSL_CERT_FILE"] = ""
    try:
        if ssl.get_default_verify_paths().capath is not None:
            import pygit2  # noqa: F401 - imported for its side effect on libgit2
    finally:
        if saved is None:
            del os.environ["SSL_CERT_FILE"]
        else:
            os.environ["SSL_CERT_FILE"] = saved
