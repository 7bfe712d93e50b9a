"""`--json` output is valid UTF-8 JSON even when a file name is not UTF-8."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from gitguard import jsontext
from tests.helpers.commands import gg
from tests.helpers.daemons import running_daemon

NAME = b"caf\xe9.txt"          # Latin-1, not UTF-8


def _status_json(repo: Path) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-m", "gitguard", "status", "--json"], cwd=repo,
                          capture_output=True, check=True)
    text = proc.stdout.decode("utf-8")        # strict: raw name bytes would raise here
    value: dict[str, object] = json.loads(text)
    return value


def _dirty_names(status: dict[str, object]) -> set[bytes]:
    dirty = status["dirty"]
    assert isinstance(dirty, list)
    return {os.fsencode(d["path"]) for d in dirty}


def test_status_json_escapes_a_non_utf8_name_with_and_without_the_daemon(repo: Path) -> None:
    gg(repo, "init")
    (repo / os.fsdecode(NAME)).write_bytes(b"latin-1 name\n")
    (repo / "naïve.txt").write_text("utf-8 name\n")

    without = _status_json(repo)
    with running_daemon(repo):
        served = _status_json(repo)

    for status in (without, served):
        assert {NAME, "naïve.txt".encode()} <= _dirty_names(status)


def test_dumps_escapes_only_lone_surrogates() -> None:
    value = {"path": os.fsdecode(NAME), "note": "naïve ✓", "n": 1}
    text = jsontext.dumps(value, indent=2)
    text.encode("utf-8")
    assert "\\udce9" in text and "naïve ✓" in text
    assert json.loads(text) == value
    assert jsontext.dumps({"a": "plain"}) == json.dumps({"a": "plain"})
