"""The e2e suite: real Claude Code and Codex CLIs, a scripted model on 127.0.0.1.

Collected by `make e2e` only (`make test` runs `tests/`). Hook latency measured in the
runs is printed at the end of the session, per mode (daemon, no daemon).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e import harness
from e2e.modelserver import Server


@pytest.fixture
def server() -> Iterator[Server]:
    with Server() as srv:
        yield srv


@pytest.fixture(params=[True, False], ids=["daemon", "no-daemon"])
def daemon(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def make_repo(tmp_path: Path, server: Server) -> Iterator[object]:
    made: list[harness.Repo] = []

    def make(*, daemon: bool = True, agents: tuple[str, ...] = ("claude-code",),
             files: dict[str, str] | None = None) -> harness.Repo:
        repo = harness.make_repo(tmp_path, server, daemon=daemon, agents=agents, files=files)
        made.append(repo)
        return repo

    yield make
    for repo in made:
        harness.stop(repo)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    rows = harness.HOOK_LATENCY
    if not rows:
        return
    tr = terminalreporter
    tr.section("gitguard hook latency (Claude Code hook_started -> hook_response)")
    tr.write_line("`codex EVENT` rows: timed around the hook command (codex exec prints no "
                  "hook events), without Codex's own spawn of it")
    # figures under load say little without the load: 2 cores shared with other work
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    tr.write_line(f"{os.cpu_count()} cores, load average {load} (1/5/15 min) at the end")
    tr.write_line(f"{'mode':<10} {'hook':<20} {'n':>4} {'median ms':>10} {'p90 ms':>8}")
    for mode in ("daemon", "no daemon"):
        by_event: dict[str, list[float]] = {}
        for m, event, ms in rows:
            if m == mode:
                by_event.setdefault(event, []).append(ms)
        every = [ms for values in by_event.values() for ms in values]
        for event in sorted(by_event) + (["(all)"] if every else []):
            values = every if event == "(all)" else by_event[event]
            tr.write_line(f"{mode:<10} {event:<20} {len(values):>4} "
                          f"{statistics.median(values):>10.1f} {_pct(values, 0.9):>8.1f}")
