"""The timeline as one self-contained HTML file: the data (timeline_data.py) embedded as JSON,
the skeleton, style and script inline (timeline.html, .css, .js beside this module), nothing
fetched.

A Content-Security-Policy of `default-src 'none'` keeps it that way: even a link or an
image a future change let in could not reach the network.
"""

from __future__ import annotations

from html import escape
from importlib import resources
from pathlib import Path
from typing import Any

from gitguard import jsontext
from gitguard.errors import GitguardError
from gitguard.storage import durable

CSP = ("default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
       "img-src data:; base-uri 'none'; form-action 'none'")


def embedded_json(document: dict[str, Any]) -> str:
    """The document as JSON that cannot end its <script> element: every `<` escaped (inside
    a JSON string `\\u003c` reads back as `<`; outside strings JSON has none)."""
    return jsontext.dumps(document).replace("<", "\\u003c")


def _asset(name: str) -> str:
    return resources.files("gitguard.review").joinpath(name).read_text(encoding="utf-8")


def render(document: dict[str, Any]) -> str:
    """timeline.html with its @NAME@ places filled, the data last (it may hold any text)."""
    page = _asset("timeline.html")
    for name, value in (("CSP", CSP), ("TITLE", escape(document["workspace"])),
                        ("CSS", _asset("timeline.css")), ("JS", _asset("timeline.js"))):
        page = page.replace(f"@{name}@", value)
    before, after = page.split("@DATA@")
    return before + embedded_json(document) + after


def write(document: dict[str, Any], path: Path) -> Path:
    """Write the page (atomically: a reader never sees half of it); its absolute path."""
    path = path.expanduser().absolute()
    if path.is_dir():
        raise GitguardError(f"{path} is a directory", "give -o a file name, e.g. -o timeline.html")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        durable.atomic_write(path, render(document).encode("utf-8"))
    except OSError as exc:
        raise GitguardError(f"cannot write the timeline to {path}: {exc.strerror or exc}",
                            "choose a writable place with -o PATH") from None
    return path
