"""The client's JSON, through `_json` without the `json` package, equals `json`'s."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gitguard import client

VALUES: list[object] = [
    {"op": "call.begin", "args": {"argv": ["call", "begin", "--input", '{"a": "\\u00e9"}'],
                                  "cwd": "/tmp/caf\udce9", "env": {"K": "v\x00\n\t\""},
                                  "stdin": None}},
    {"exit": 0, "stdout": "caf\u00e9 \U0001f600 \udcff\n", "stderr": ""},
    [1, -2, 2.5, -0.0, 1e300, 10**30, True, False, None, [], {}, "", [[{"x": [None]}]]],
    {"nan": float("inf"), "neg": float("-inf")},
    "just a string", 7,
]


@pytest.mark.parametrize("value", VALUES)
def test_dumps_and_loads_equal_json(value: object) -> None:
    text = client.dumps(value)
    assert text == json.dumps(value, ensure_ascii=True)
    assert client.loads(text) == json.loads(text)
    assert client.loads(f" \n{text}\t\r\n") == json.loads(text)


@pytest.mark.parametrize("text", ["", " ", "{", "{}x", "[1,]", "nul", '{"a" 1}', "[1] [2]"])
def test_loads_refuses_what_json_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        client.loads(text)


def test_dumps_refuses_what_json_refuses() -> None:
    with pytest.raises(TypeError):
        client.dumps({"x": object()})
    with pytest.raises(TypeError):
        json.dumps({"x": object()})


def test_the_client_imports_neither_json_nor_re() -> None:
    script = ("import sys, gitguard.entry; gitguard.client.loads(gitguard.client.dumps([1]));"
              "print(sorted({'json', 're', 'enum', 'base64'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True,
                         check=True, env={"PYTHONPATH": _root()})
    assert out.stdout.strip() == "[]"


def _root() -> str:
    from pathlib import Path

    return str(Path(client.__file__).resolve().parents[1])
