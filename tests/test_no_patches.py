"""gitguard replaces no module and compiles nothing at run time (issue 22, item 4): no
assignment into sys.modules, no private attribute of os.environ, no compiler started."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "gitguard"


def _sources() -> dict[Path, str]:
    return {p: p.read_text() for p in PACKAGE.rglob("*.py")}


def test_no_module_is_put_into_sys_modules() -> None:
    found = [str(p) for p, text in _sources().items()
             if re.search(r"sys\.modules\[[^\]]*\]\s*=(?!=)|sys\.modules\.(setdefault|update)",
                          text)]
    assert found == []


def test_nothing_reads_os_environ_private_data() -> None:
    assert [str(p) for p, text in _sources().items() if "environ._data" in text] == []


def test_no_compiler_is_started() -> None:
    found = [f"{p}:{n}" for p, text in _sources().items()
             for n, line in enumerate(text.splitlines(), 1)
             if re.search(r"""["'](cc|gcc|clang)["']|GITGUARD_CC|which\(["']cc""", line)]
    assert found == []


def test_no_watchdog_internals_and_no_pydantic_private_serializer() -> None:
    """Only watchdog's public API (issue 28): a release that rewrote its inotify internals
    made a daemon built on them deaf. Nor pydantic's private serializer attribute."""
    names = ("InotifyWatchGroup", "inotify_c", "_add_callback", "_active_callbacks_",
             "_move_event_grouper", "__pydantic_serializer__", "InotifyFD")
    found = [f"{p}: {name}" for p, text in _sources().items() for name in names
             if name in text]
    assert found == []
