"""Driving Claude Code's rewind the way the CLI records one, and capturing what it wrote.

Interactive `/rewind` with "restore code and conversation" does two things, and Claude
Code exposes both as (hidden) options of the same binary:

- `claude --resume SID --rewind-files PROMPT_UUID`: a standalone operation that puts the
  files back as they were when the user sent PROMPT_UUID (from `~/.claude/file-history`);
  it writes nothing to the transcript;
- `claude -p ... --resume SID --resume-session-at ENTRY_UUID`: the conversation goes on
  from ENTRY_UUID (the kept turn's last entry, the rewound prompt's parent): the new
  prompt's `parentUuid` is ENTRY_UUID, and the rewound turns stay in the JSONL off the
  chain.

File checkpointing is off in print mode unless CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING
is set (what the Agent SDK's `enableFileCheckpointing` sets).

Run as a script, it captures a session (two edit turns, then a rewind of the second)
from any Claude Code binary into fixtures, temp paths replaced by placeholders:

    python -m e2e.claude_rewind OUT_DIR [CLAUDE_BIN_DIR]
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from e2e import harness
from e2e.capture_hook import redact
from e2e.modelserver import Server

CHECKPOINTING = {"CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING": "true"}


def enable_checkpointing(repo: harness.Repo) -> None:
    repo.env.update(CHECKPOINTING)


def transcript(repo: harness.Repo, session_id: str) -> Path:
    [found] = (repo.home / ".claude" / "projects").glob(f"*/{session_id}.jsonl")
    return found


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def prompts(path: Path) -> list[dict[str, Any]]:
    """The user's prompts in the transcript (not tool results, not meta), in file order."""
    found = []
    for r in records(path):
        if r.get("type") != "user" or r.get("isSidechain") or r.get("isMeta"):
            continue
        content = r.get("message", {}).get("content")
        if isinstance(content, str) or (isinstance(content, list) and not any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content)):
            found.append(r)
    return found


def rewind_files(repo: harness.Repo, session_id: str, prompt_uuid: str) -> str:
    """`claude --resume SID --rewind-files UUID`: the code part of /rewind."""
    proc = subprocess.run([str(harness.BIN / "claude"), "--resume", session_id,
                           "--rewind-files", prompt_uuid], cwd=repo.root, env=repo.env,
                          text=True, capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.strip()


def rewind(repo: harness.Repo, session_id: str, prompt: dict[str, Any], words: str,
           script: list[dict[str, Any]], *extra: str) -> harness.Run:
    """/rewind "restore code and conversation" to before `prompt`, then a new prompt."""
    said = rewind_files(repo, session_id, prompt["uuid"])
    assert said.startswith("Files rewound"), said
    return harness.claude(repo, words, script, "--resume", session_id,
                          "--resume-session-at", prompt["parentUuid"], *extra)


def read(repo: harness.Repo, rel: str) -> dict[str, Any]:
    return {"name": "Read", "input": {"file_path": str(repo.root / rel)}}


def edit(repo: harness.Repo, rel: str, old: str, new: str) -> dict[str, Any]:
    return {"name": "Edit", "input": {"file_path": str(repo.root / rel), "old_string": old,
                                      "new_string": new}}


def write(repo: harness.Repo, rel: str, text: str) -> dict[str, Any]:
    return {"name": "Write", "input": {"file_path": str(repo.root / rel), "content": text}}


def save(repo: harness.Repo, session_id: str, out: Path, name: str) -> Path:
    """The session's transcript and file-history backups under OUT, temp paths replaced by
    the fixtures' placeholders (as capture_hook.py does for hook payloads)."""
    workspace, home = str(repo.root.resolve()), str(repo.home)
    out.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(redact(r, workspace, home), separators=(",", ":"))
             for r in records(transcript(repo, session_id))]
    target = out / f"{name}.jsonl"
    target.write_text("\n".join(lines) + "\n")
    backups = repo.home / ".claude" / "file-history" / session_id
    if backups.is_dir():
        kept = out / f"{name}.file-history"
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(backups, kept)
    return target


def capture(out: Path, name: str) -> None:
    with Server() as server, tempfile.TemporaryDirectory() as tmp:
        repo = harness.make_repo(Path(tmp), server, daemon=False)
        enable_checkpointing(repo)
        first = harness.claude(repo, "edit app", [
            {"tools": [read(repo, "app.py")]},
            {"tools": [edit(repo, "app.py", "return 1", "return 2")]}, {"text": "done one"}])
        sid = first.session_id
        harness.claude(repo, "write notes", [
            {"tools": [write(repo, "new.txt", "hello\n"), read(repo, "NOTES.md")]},
            {"tools": [edit(repo, "NOTES.md", "first line", "second line")]},
            {"text": "done two"}], "--resume", sid)
        second = prompts(transcript(repo, sid))[1]
        rewind(repo, sid, second, "after the rewind", [
            {"tools": [read(repo, "NOTES.md")]},
            {"tools": [edit(repo, "NOTES.md", "first line", "third line")]},
            {"text": "redone"}])
        assert not (repo.root / "new.txt").exists()
        save(repo, sid, out, name)
        harness.stop(repo)
    print(f"captured {name} from {harness.BIN} into {out}")


if __name__ == "__main__":
    if len(sys.argv) > 2:
        harness.BIN = Path(sys.argv[2])
    version = subprocess.run([str(harness.BIN / "claude"), "--version"], text=True,
                             capture_output=True).stdout.split()[0]
    capture(Path(sys.argv[1]), "transcript_rewind_" + re.sub(r"\W", "_", version))
