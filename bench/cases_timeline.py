"""The timeline's rows: `gitguard timeline` on the 10,000-call ledger resume's rows build
(bench/cases_resume.py), and the page it writes opened in headless Chromium.

Time to write: the whole CLI in a fresh process (interpreter start, ledger read, status,
the page written). Time to first render: from navigation start to the first page of rows
on screen (the page sets `data-ready-ms` from `performance.now()` when they are), in
Debian's chromium driven by playwright; first-contentful-paint in the note.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from bench.cases import CaseContext, Measurement, Skip, case, timed_once
from bench.cases_resume import CALLS, _long_run
from bench.shell import run

ROW_WRITE = "gitguard CLI: timeline page, 10,000-call ledger"
ROW_RENDER = "timeline page: first render in headless Chromium, 10,000 calls"
_PROJECT = Path(__file__).resolve().parents[1]


def _write_page(ctx: CaseContext) -> tuple[Path, list[float]]:
    guard = _long_run(ctx.repo)
    guard.close()
    path = os.pathsep.join(p for p in (str(_PROJECT), os.environ.get("PYTHONPATH")) if p)
    env = {"PYTHONPATH": path, "GITGUARD_NO_DAEMON": "1"}
    page = ctx.scratch / "timeline.html"
    argv = [sys.executable, "-m", "gitguard", "timeline", "-o", str(page)]
    samples = []
    for n in range(ctx.runs + 1):            # the first is a warm-up
        ms = timed_once(lambda: run(argv, cwd=ctx.repo, env=env))
        if n:
            samples.append(ms)
    return page, samples


@case(ROW_WRITE, group="gitguard", target="< 5 s", once=True)
def timeline_write(ctx: CaseContext) -> Measurement:
    page, samples = _write_page(ctx)
    size = page.stat().st_size
    return Measurement(tuple(samples), None,
                       f"one process, interpreter start included; {CALLS} calls; the page is "
                       f"{size / 1e6:.1f} MB ({size / CALLS:.0f} B a call), one file")


@case(ROW_RENDER, group="gitguard", target="< 2 s", once=True)
def timeline_render(ctx: CaseContext) -> Measurement:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise Skip("no chromium here (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        raise Skip(f"playwright is not installed: {exc}") from exc
    page_file, _ = _write_page(CaseContext(ctx.repo, ctx.scratch, 1))
    samples: list[float] = []
    paints: list[float] = []
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, headless=True)
        try:
            for n in range(ctx.runs + 1):
                page: Any = browser.new_page()
                page.goto(page_file.as_uri())
                page.wait_for_selector("body[data-ready=true]", timeout=120_000)
                ready = float(page.evaluate("() => document.body.dataset.readyMs"))
                paint = page.evaluate("() => (performance.getEntriesByName("
                                      "'first-contentful-paint')[0] || {}).startTime || null")
                rows = page.evaluate("() => document.querySelectorAll('li.ev').length")
                page.close()
                if n:
                    samples.append(ready)
                    if paint is not None:
                        paints.append(float(paint))
        finally:
            browser.close()
    fcp = f"first-contentful-paint median {sorted(paints)[len(paints) // 2]:.0f} ms; " \
        if paints else ""
    return Measurement(tuple(samples), None,
                       f"{fcp}navigation start to the first {rows} rows on screen; "
                       f"{page_file.stat().st_size / 1e6:.1f} MB page, {CALLS} calls")


ROW_BLAME = "gitguard CLI: blame a file 1,000 calls edited"
BLAME_CALLS = 1000


@case(ROW_BLAME, group="gitguard", target="< 5 s", once=True)
def blame_file(ctx: CaseContext) -> Measurement:
    """`gitguard blame` of one file after 1,000 Edit calls (2,000 checkpoints), a user
    edit between every 100th pair: the whole CLI in a fresh process."""
    from bench.cases_resume import _module

    guard = _module("api").Guard.init(ctx.repo)
    guard.start_session("bench")
    target = ctx.repo / "blamed.txt"
    lines = [f"line {n}\n" for n in range(200)]
    target.write_text("".join(lines))
    for n in range(BLAME_CALLS):
        with guard.tool_call("Edit", {"file_path": "blamed.txt", "n": n},
                             writes=["blamed.txt"]):
            lines[(n * 7) % len(lines)] = f"call {n}\n"
            target.write_text("".join(lines))
        if n % 100 == 99:
            lines.insert(0, f"user {n}\n")
            target.write_text("".join(lines))
    guard.close()
    path = os.pathsep.join(p for p in (str(_PROJECT), os.environ.get("PYTHONPATH")) if p)
    env = {"PYTHONPATH": path, "GITGUARD_NO_DAEMON": "1"}
    argv = [sys.executable, "-m", "gitguard", "blame", "blamed.txt", "--json"]
    samples = []
    for n in range(ctx.runs + 1):            # the first is a warm-up
        ms = timed_once(lambda: run(argv, cwd=ctx.repo, env=env))
        if n:
            samples.append(ms)
    return Measurement(tuple(samples), None,
                       f"one process, interpreter start included; {BLAME_CALLS} Edit calls, "
                       f"{2 * BLAME_CALLS} checkpoints, {len(lines)} lines")
