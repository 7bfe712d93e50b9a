"""The timeline page of a real Claude Code session, opened in a real headless Chromium.

One session is recorded once for the module (two turns, a subagent, the user editing and
moving HEAD between them, a token in a command), `gitguard timeline` writes its page, and
Debian's chromium, driven by playwright (the lock's dev extra; `executable_path`, so no
browser is downloaded), checks what a person relies on: the page loads with no console
error and no request but its own file, every ledgered call is on it and the filters narrow
it, a call's diff is `gitguard diff CALL`, and the undo command it shows, run in a shell,
leaves the files as at that checkpoint. Chromium missing is a failure that says how to
install it, never a skip.

`GITGUARD_TIMELINE_SCREENSHOT=docs/timeline.png make e2e` also refreshes the README's picture.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from e2e import harness
from e2e.harness import Repo, bash
from e2e.modelserver import Server

TOKEN = "ghp_" + "Ab1" * 12        # a GitHub token's shape: the ledger redacts it
USER_LINE = "the user's line\n"


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("the timeline's browser tests need Debian's chromium: "
                    "`apt-get install chromium` (.ci/run installs it where missing)")
    return found


def _sync_playwright() -> Any:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: it is in the dev extra and the lock "
                    "(`make` installs requirements-lock.txt)")
    return sync_playwright


@dataclass
class Recorded:
    repo: Repo
    page: Path
    ledger: list[dict[str, Any]]


def _edit(repo: Repo, rel: str, old: str, new: str) -> dict[str, Any]:
    return {"name": "Edit", "input": {"file_path": str(repo.root / rel), "old_string": old,
                                      "new_string": new, "replace_all": False}}


def _write(repo: Repo, rel: str, text: str) -> dict[str, Any]:
    return {"name": "Write", "input": {"file_path": str(repo.root / rel), "content": text}}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    tmp = tmp_path_factory.mktemp("timeline")
    with Server() as server:
        repo = harness.make_repo(tmp, server, daemon=True)
        try:
            sub = [{"tools": [bash("echo from the subagent > sub.txt")]},
                   {"tools": [_write(repo, "subw.txt", "written by the subagent\n")]},
                   {"text": "sub done"}]
            agent = {"name": "Agent", "input": {
                "description": "Helper", "subagent_type": "general-purpose",
                "run_in_background": False,     # done within the turn, before the user edits
                "prompt": harness.script_prompt("Do the work.", sub)}}
            first = [{"tools": [bash("echo generated > gen.txt")]},
                     {"tools": [{"name": "Read",
                                 "input": {"file_path": str(repo.root / "app.py")}}]},
                     {"tools": [_edit(repo, "app.py", "    return 1", "    return 2")]},
                     {"tools": [agent]},
                     {"tools": [_write(repo, "new.py", "print('new')\n")]},
                     {"text": "first turn done"}]
            second = [{"tools": [_edit(repo, "NOTES.md", "first line", "first line, agent")]},
                      {"tools": [bash(f"echo token={TOKEN} > /dev/null")]},
                      {"tools": [bash("echo more >> gen.txt")]},
                      {"text": "second turn done"}]

            def between(_turn: int) -> None:
                repo.write("NOTES.md", repo.read("NOTES.md") + USER_LINE)
                repo.write("user.txt", USER_LINE)
                harness.git(repo.root, "checkout", "-q", "-b", "review", env=repo.env)

            run = harness.claude_turns(repo, [("make the changes", first),
                                              ("more changes", second)], between)
            assert run.returncode == 0, run.stderr[-3000:]
            assert not run.hook_failures(), run.hook_failures()
            assert repo.hook_errors() == ""
            page = tmp / "timeline.html"
            assert repo.gitguard("timeline", "-o", str(page)).stdout.strip() == str(page)
            yield Recorded(repo, page, repo.ledger())
        finally:
            harness.stop(repo)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = _chromium()
    with _sync_playwright()() as driver:
        launched = driver.chromium.launch(executable_path=executable, headless=True)
        yield launched
        launched.close()


@dataclass
class Opened:
    page: Any
    errors: list[str]
    requests: list[str]


@pytest.fixture
def opened(browser: Any, recorded: Recorded) -> Iterator[Opened]:
    context = browser.new_context(viewport={"width": 1280, "height": 1600})
    page = context.new_page()
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(f"{m.type}: {m.text}")
            if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
    page.on("request", lambda r: requests.append(r.url))
    # Anything but the page's own file is refused before it leaves the browser.
    own = recorded.page.as_uri()
    context.route("**/*", lambda route: route.continue_() if route.request.url == own
                  else route.abort())
    page.goto(own)
    page.wait_for_selector("body[data-ready=true]")
    yield Opened(page, errors, requests)
    context.close()


def narrowed_to(page: Any, expected: list[str]) -> list[str]:
    """The calls on the page once the filters (applied 120 ms after input) show these."""
    want = json.dumps(sorted(expected), separators=(",", ":"))   # as JSON.stringify
    # a timeout is left to the caller's assertion, which says what the page shows
    with contextlib.suppress(Exception):
        page.wait_for_function("want => JSON.stringify([...document.querySelectorAll("
                               "'li[data-call-id]')].map(e => e.dataset.callId).sort()) "
                               "=== want", arg=want, timeout=10_000)
    found: list[str] = page.eval_on_selector_all(
        "li[data-call-id]", "els => els.map(e => e.dataset.callId)")
    return sorted(found)


def _ids_on_every_page(page: Any, selector: str, read: str) -> list[str]:
    seen: list[str] = []
    while True:
        seen += page.eval_on_selector_all(selector, f"els => els.map(e => {read})")
        if page.is_disabled("#next"):
            break
        page.click("#next")
    while not page.is_disabled("#prev"):
        page.click("#prev")
    return seen


def test_the_page_loads_with_no_console_error_and_no_request(opened: Opened,
                                                             recorded: Recorded) -> None:
    assert opened.requests == [recorded.page.as_uri()]
    assert opened.errors == []
    # the user's edits between the turns and their git move are on the same time axis
    users = opened.page.eval_on_selector_all("li.ev-user code",
                                             "els => els.map(e => e.textContent)")
    assert {"NOTES.md", "user.txt"} <= set(users), users
    moves = opened.page.eval_on_selector_all("li.ev-git", "els => els.map(e => e.textContent)")
    assert any("checkout" in m and "on review" in m for m in moves), moves
    text = recorded.page.read_text()
    assert TOKEN not in text and "[REDACTED:" in text       # redacted as in the ledger


def test_every_call_of_the_ledger_is_on_it_and_filters_narrow_it(opened: Opened,
                                                                  recorded: Recorded) -> None:
    page, ledger = opened.page, recorded.ledger
    ids = [e["callId"] for e in ledger]
    assert len(ids) >= 9 and any(e["agentId"] for e in ledger), ledger   # the subagent's too
    assert sorted(_ids_on_every_page(page, "li[data-call-id]", "e.dataset.callId")) == sorted(ids)
    # every checkpoint too, each with the command that undoes it (back to the one before)
    undo = dict(_ids_on_every_page(page, "li.ev-checkpoint", "[e.id.slice(5), e.querySelector("
                                         "'[id^=undo-ckpt-]')?.textContent || null]"))
    chain = recorded.repo.gg_json("checkpoints")
    assert sorted(undo) == sorted(c["checkpointId"] for c in chain)
    for earlier, later in zip(chain, chain[1:], strict=False):
        if earlier["sessionId"] == later["sessionId"]:
            assert undo[later["checkpointId"]] == (f"gitguard -C {recorded.repo.root} "
                                                   f"rollback-files --to {earlier['checkpointId']}")
    page.click("button[type=reset]")

    page.select_option("#f-tool", "Edit")
    edits = [e["callId"] for e in ledger if e["toolName"] == "Edit"]
    assert narrowed_to(page, edits) == sorted(edits) and len(edits) < len(ids)
    assert page.eval_on_selector_all("li.ev", "els => els.length") == len(edits)  # calls only
    page.select_option("#f-tool", "")
    sub_type = next(e["agentType"] for e in ledger if e["agentId"])
    page.select_option("#f-agent", sub_type)
    subs = [e["callId"] for e in ledger if e["agentType"] == sub_type]
    assert narrowed_to(page, subs) == sorted(subs)
    page.select_option("#f-agent", "")
    page.keyboard.press("/")            # `/` focuses the text filter
    assert page.evaluate("() => document.activeElement.id") == "f-text"
    page.keyboard.type("NOTES.md")
    touching = [e["callId"] for e in ledger
                if "NOTES.md" in {p["path"] for p in e["filePatches"]} | set(e["declaredWrites"])]
    assert touching and narrowed_to(page, touching) == sorted(touching)
    page.fill("#f-text", "")
    statuses = page.eval_on_selector_all("#f-status option", "os => os.map(o => o.value)")
    assert statuses == ["", *sorted({e["status"] for e in ledger})]
    for status in statuses[1:]:
        page.select_option("#f-status", status)
        having = [e["callId"] for e in ledger if e["status"] == status]
        assert narrowed_to(page, having) == sorted(having)
    # the time axis has its text form: every call counted in it
    counted = page.eval_on_selector_all("#axis-body tr", "rows => rows.reduce("
                                        "(n, r) => n + Number(r.cells[1].textContent), 0)")
    assert counted == len(ledger)


def test_a_calls_diff_opens_and_is_gitguard_diff(opened: Opened, recorded: Recorded) -> None:
    page, repo = opened.page, recorded.repo
    edits = [e for e in recorded.ledger if e["filePatches"]]
    assert edits
    for entry in edits:
        call_id = entry["callId"]
        page.fill("#f-text", call_id)
        assert narrowed_to(page, [call_id]) == [call_id]
        button = page.locator(f"button[data-diff='{call_id}']")
        button.focus()
        page.keyboard.press("Enter")            # a real button: the keyboard opens it
        assert button.get_attribute("aria-expanded") == "true"
        shown = page.text_content(f"#diff-{call_id} pre")
        printed = subprocess.run([str(harness.VENV_BIN / "gitguard"), "diff", call_id],
                                 cwd=repo.root, env=repo.env, capture_output=True,
                                 check=True).stdout
        assert shown is not None and shown.encode() == printed, call_id


def test_who_wrote_each_line_is_gitguard_blame(opened: Opened, recorded: Recorded) -> None:
    """The working-tree section's line view holds `gitguard blame PATH --json`'s owners."""
    page, repo = opened.page, recorded.repo
    changed = [d["path"] for d in repo.gg_json("status")["dirty"]]
    shown = page.eval_on_selector_all("#now-body button[data-blame]",
                                      "bs => bs.map(b => b.closest('tr').cells[0].textContent)")
    assert "NOTES.md" in shown and "app.py" in shown, shown
    assert set(shown) <= set(changed)
    for path in ("NOTES.md", "app.py"):
        button = page.locator(f"#now-body tr:has(td:text-is('{path}')) button[data-blame]")
        button.focus()
        page.keyboard.press("Enter")
        assert button.get_attribute("aria-expanded") == "true"
        rows = page.eval_on_selector_all(
            f"table.blame[aria-label='who wrote each line of {path}'] tbody tr",
            "rs => rs.map(r => [r.dataset.owner, r.dataset.call, r.cells[2].textContent])")
        printed = repo.gg_json("blame", path)
        assert rows == [[ln["owner"], ln.get("callId", ""), ln["text"]]
                        for ln in printed["lines"]], path
        owners = {r[0] for r in rows}
        assert "call" in owners and ({"user", "commit"} & owners), rows
    assert opened.errors == []


def test_it_follows_the_colour_scheme_and_saves_a_screenshot(
        browser: Any, recorded: Recorded, tmp_path: Path) -> None:
    backgrounds = {}
    for scheme in ("light", "dark"):
        context = browser.new_context(color_scheme=scheme, viewport={"width": 1200,
                                                                     "height": 1900})
        page = context.new_page()
        page.goto(recorded.page.as_uri())
        page.wait_for_selector("body[data-ready=true]")
        backgrounds[scheme] = page.evaluate("getComputedStyle(document.body).backgroundColor")
        if scheme == "light":
            page.locator("button[data-diff]").nth(2).click()
            page.evaluate("() => window.scrollTo(0, 0)")
            shot = tmp_path / "timeline.png"
            page.screenshot(path=str(shot), full_page=False)
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            wanted = os.environ.get("GITGUARD_TIMELINE_SCREENSHOT")
            if wanted:
                shutil.copyfile(shot, wanted)
        context.close()
    assert backgrounds["light"] != backgrounds["dark"], backgrounds


def test_the_undo_command_shown_does_what_it_says(opened: Opened, recorded: Recorded) -> None:
    """Last: it rolls the workspace back. The turn-two Edit of NOTES.md: its undo goes back
    to its pre checkpoint, after the user's edits, so every file is then as there."""
    page, repo = opened.page, recorded.repo
    entry = next(e for e in recorded.ledger if e["toolName"] == "Edit"
                 and "NOTES.md" in e["declaredWrites"])
    page.fill("#f-text", entry["callId"])
    assert narrowed_to(page, [entry["callId"]]) == [entry["callId"]]
    command = page.text_content(f"[id='undo-{entry['callId']}']")
    assert command == (f"gitguard -C {repo.root} rollback-files --to "
                       f"{entry['preCheckpointId']}")
    page.click(f"button[data-copy='undo-{entry['callId']}']")      # its copy button
    page.wait_for_function("want => document.getElementById('status-line').textContent"
                           ".endsWith(want)", arg=command)
    done = subprocess.run(command, shell=True, cwd="/", env=repo.env, capture_output=True,
                          text=True)
    assert done.returncode == 0, (done.stdout, done.stderr)
    snapshot = next(c["snapshotCommit"] for c in repo.gg_json("checkpoints")
                    if c["checkpointId"] == entry["preCheckpointId"])
    listed = harness.git(repo.root, "--git-dir", str(repo.root / ".git"), "ls-tree", "-r",
                         "--name-only", snapshot, env=repo.env).split("\n")
    at_checkpoint = {p for p in listed if p}
    now = {str(p.relative_to(repo.root)) for p in repo.root.rglob("*")
           if p.is_file() and ".git" not in p.relative_to(repo.root).parts}
    assert now == at_checkpoint
    for rel in at_checkpoint:
        then = subprocess.run(["git", "cat-file", "blob", f"{snapshot}:{rel}"], cwd=repo.root,
                              env=repo.env, capture_output=True, check=True).stdout
        assert (repo.root / rel).read_bytes() == then, rel
    assert USER_LINE in repo.read("NOTES.md") and "first line, agent" not in repo.read("NOTES.md")
