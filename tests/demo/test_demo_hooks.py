"""The hooks chapter of `gitguard demo` runs end to end and shows what it promises."""

from __future__ import annotations

from pathlib import Path

from gitguard.api import Guard
from gitguard.demo.demo_repo import _user_state, make_repo
from gitguard.demo.hooks import chapter_hooks
from gitguard.demo.run import CHAPTERS


def test_hooks_chapter(tmp_path: Path) -> None:
    assert chapter_hooks in CHAPTERS
    repo = make_repo(tmp_path)
    before = _user_state(repo)
    lines: list[str] = []
    chapter_hooks(lines.append, repo, Guard.open(repo))
    text = "\n".join(lines)
    assert "PreToolUse Bash `npm publish` again -> deny: gitguard: Bash with this input " \
           "already ran as toolu_demo_2" in text
    assert "Tool Bash(toolu_demo_4) started but its outcome is unknown" in text
    assert "Stop -> toolu_demo_5 failed: denied at the permission prompt" in text
    assert "      app.py <- call_1" in text
    assert "git push origin feature: ok" in text and "git push --mirror origin: exit 1" in text
    assert "refs/gitguard/* on the remote: 0" in text
    assert _user_state(repo) == before
