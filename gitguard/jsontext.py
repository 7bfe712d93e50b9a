"""JSON text for gitguard's `--json` output: valid UTF-8 even for a non-UTF-8 file name.

A file name that is not UTF-8 is a str with lone surrogates here (surrogateescape).
`json.dumps(..., ensure_ascii=False)` wrote those as the name's raw bytes, which is not
UTF-8, so a strict reader (jq, most JSON libraries) rejected the whole output. Escaped as
`\\udcXX` it is valid JSON text, and Python reads it back to the same str, from which
`os.fsencode` gives the name's bytes. Everything else keeps its readable UTF-8 form.
Standard library only: the daemon's click-free call path uses it too.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gitguard.errors import GitguardError

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# Deepest JSON value gitguard takes from a user or an agent. Real tool inputs nest a few
# levels; the ledger, redaction, hashing and pydantic all recurse, and at a few hundred
# levels Python's recursion limit ends them with RecursionError (exit 3 for the user's
# own input). Checked iteratively, before anything recurses.
MAX_DEPTH = 100


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether `value` (as json.loads gives it) nests deeper than `limit` lists and
    objects, or refers to itself (something only Python callers can build)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, (dict, list, tuple)))
    return False


def check_depth(value: Any, what: str) -> None:
    """GitguardError when `value` nests deeper than MAX_DEPTH (see too_deep)."""
    if too_deep(value):
        raise GitguardError(f"{what} nests deeper than {MAX_DEPTH} levels of lists and objects",
                            "pass a flatter value (a tool's input is usually a few levels "
                            "deep)")


def dumps(value: Any, indent: int | None = None) -> str:
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    if _LONE_SURROGATE.search(text) is None:
        return text
    # Lone surrogates can only sit inside JSON strings, where \uXXXX is their escape.
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
