"""The daemon socket's one framing (gitguard.ipc.wire): what goes in comes out, bytes that are
not UTF-8 included, and nothing hostile gets past `decode` as anything but ValueError."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gitguard.ipc import wire

VALUES: list[object] = [
    {"op": "cli", "args": {"argv": ["call", "begin", "--input", '{"a": "\\u00e9"}'],
                           "cwd": "/tmp/caf\udce9", "env": {"K": "v\x00\n\t\""},
                           "stdin": b"\xff\x00in"}},
    {"exit": 0, "stdout": "caf\u00e9 \U0001f600 \udcff\n", "stderr": ""},
    [1, -2, 2.5, -0.0, 1e300, -(2**63), 2**63 - 1, True, False, None, [], {}, "", b"",
     [[{"x": [None]}]]],
    {"inf": float("inf"), "neg": float("-inf")},
    "just a string", 7,
]


@pytest.mark.parametrize("value", VALUES)
def test_what_is_encoded_decodes_the_same(value: object) -> None:
    data = wire.encode(value)
    assert data[:4] == wire.MAGIC and wire.body_length(data) == len(data) - wire.HEADER
    assert wire.decode(data) == value
    for cut in range(len(data)):
        with pytest.raises(ValueError):
            wire.decode(data[:cut])
    with pytest.raises(ValueError):
        wire.decode(data + b"x")


def test_a_tuple_is_a_list_and_a_repeated_key_the_last() -> None:
    assert wire.decode(wire.encode((1, "a"))) == [1, "a"]
    body = b"d\x00\x00\x00\x02" + (b"s\x00\x00\x00\x01k" + b"i" + bytes(7) + b"\x01") \
        + (b"s\x00\x00\x00\x01k" + b"i" + bytes(7) + b"\x02")
    assert wire.decode(wire.MAGIC + len(body).to_bytes(4, "big") + body) == {"k": 2}


@pytest.mark.parametrize("value", [{"x": object()}, 2**64, {1: "a"}, {"s": {1, 2}}])
def test_what_has_no_tag_is_refused(value: object) -> None:
    with pytest.raises(TypeError):
        wire.encode(value)


def test_nesting_is_bounded_both_ways() -> None:
    deep: list[object] = []
    for _ in range(wire.MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(TypeError):
        wire.encode(deep)
    body = b"l\x00\x00\x00\x01" * 10 + b"N"
    data = wire.MAGIC + len(body).to_bytes(4, "big") + body
    assert wire.decode(data, max_depth=10) is not None
    with pytest.raises(ValueError, match="nests deeper than 9"):
        wire.decode(data, max_depth=9)


@pytest.mark.parametrize("data", [b"", b"GG", b"{\"op\": 1}", b"GGB1\x00\x00\x00\x00"])
def test_other_framings_are_not_mistaken_for_this_one(data: bytes) -> None:
    with pytest.raises(ValueError):
        wire.decode(data)


def test_the_client_imports_neither_json_nor_re() -> None:
    script = ("import sys, gitguard.cli.entry, gitguard.ipc.wire as w; w.decode(w.encode([1]));"
              "print(sorted({'json', 're', 'enum', 'base64', 'typing'} & set(sys.modules)))")
    root = str(Path(wire.__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True,
                         check=True, env={"PYTHONPATH": root})
    assert out.stdout.strip() == "[]"
