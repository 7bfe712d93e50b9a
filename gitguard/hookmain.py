"""The git hook shims' entry point: `PYTHON -S -P .../gitguard/hookmain.py hook git NAME ...`.

Started without `site` (-S), an interpreter skips site-packages, `.pth` files and
sitecustomize: a few milliseconds of every hook, which only the fallback needs.
The package's parent directory is appended to sys.path (appended: a site-packages
directory must not shadow the standard library), the daemon is asked, and when
none answers `site.main()` does what the interpreter skipped before the full CLI
runs, exactly as `python -m gitguard` would. -P keeps this file's own directory
off sys.path: none of gitguard's modules shares a name with the standard library now,
but from there `errors`, `git` or `daemon` would import as top-level modules, a second
copy of ours or in place of an installed package of that name.
Standard library only until the fallback, like `gitguard.cli.entry`.
"""

import os
import sys


def main() -> None:
    parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if parent not in sys.path:
        sys.path.append(parent)
    from gitguard.cli import entry

    code = entry.local_answer(sys.argv[1:])
    if code is None:
        code = entry.try_daemon(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    try:
        entry.early_scan(sys.argv[1:])
        entry.with_site_packages()
        code = entry.hook_here(sys.argv[1:])
        if code is not None:
            sys.exit(code)
        from gitguard.cli.main import main as cli_main

        cli_main(sys.argv[1:])
    finally:
        entry.nothing_to_collect_at_exit()


if __name__ == "__main__":
    main()
