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

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(value: Any, indent: int | None = None) -> str:
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    if _LONE_SURROGATE.search(text) is None:
        return text
    # Lone surrogates can only sit inside JSON strings, where \uXXXX is their escape.
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
