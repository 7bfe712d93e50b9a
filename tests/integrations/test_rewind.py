"""Claude Code's /rewind read from real captured transcripts (issue 30 item 2), both
file-history formats: 2.1.100 (the earlier one: `isSnapshotUpdate` records) and 2.1.219 /
2.1.332 (the later one: one snapshot per prompt with `realParentDir`). Each capture is two
turns (edit app.py; write new.txt and edit NOTES.md), then `--rewind-files` to the second
prompt and `--resume-session-at` its parent with a new prompt (e2e/claude_rewind.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gitguard import verify
from gitguard.api import Guard
from gitguard.integrations import rewind, rewind_transcript
from gitguard.ledger import journal
from gitguard.ledger.replay import blocks, verdict
from gitguard.storage.durable import read_jsonl
from tests.helpers.commands import gg
from tests.helpers.paths import FIXTURES

CAPTURES = ["2_1_100", "2_1_219", "2_1_332"]


def _fixture(version: str) -> tuple[Path, Path]:
    base = FIXTURES / "claude_code" / f"transcript_rewind_{version}"
    return base.with_suffix(".jsonl"), base.with_suffix(".file-history")


def _records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("version", CAPTURES)
def test_the_rewound_turn_and_its_calls_are_found(version: str) -> None:
    path, history = _fixture(version)
    records = _records(path)
    prompts = [r for r in records if r.get("type") == "user"
               and isinstance((r.get("message") or {}).get("content"), str)]   # type: ignore[union-attr]
    assert len(prompts) == 3
    found = rewind_transcript.read(str(path), str(history))
    [rw] = found.rewinds
    assert (rw.prompt, rw.rewound_prompts, rw.new_prompt) == \
        (prompts[1]["uuid"], (prompts[1]["uuid"],), prompts[2]["uuid"])
    assert rw.resumed_at == prompts[2]["parentUuid"] == prompts[1]["parentUuid"]
    assert rw.at == prompts[2]["timestamp"]
    # The rewound turn's calls: Write new.txt, Read NOTES.md, Edit NOTES.md, as the
    # assistant messages of that turn name them; none of the first or last turn's.
    names = {b["id"]: b["name"] for r in records if r.get("type") == "assistant"
             for b in r["message"]["content"] if b.get("type") == "tool_use"}  # type: ignore[index,union-attr]
    assert [names[t] for t in rw.tool_uses] == ["Write", "Read", "Edit"]


@pytest.mark.parametrize(("version", "fmt"), [("2_1_100", "earlier"), ("2_1_219", "later"),
                                              ("2_1_332", "later")])
def test_file_history_says_what_restore_code_puts_back(version: str, fmt: str) -> None:
    path, history = _fixture(version)
    found = rewind_transcript.read(str(path), str(history))
    assert found.format == fmt
    files = {Path(b.path).name: b.backup for b in found.rewinds[0].files}
    # NOTES.md as it was when the second prompt was sent: its first backup.
    notes = files["NOTES.md"]
    assert notes is not None and Path(notes).read_text() == "# Notes\n\nfirst line\n"
    # app.py as turn 1 left it (its second backup): what the rewind keeps.
    app = files["app.py"]
    assert app is not None and Path(app).name.endswith("@v2")
    assert Path(app).read_text() == "def main():\n    return 2\n"
    if fmt == "earlier":      # the earlier format names the file the turn created
        assert files["new.txt"] is None


def test_an_unreadable_or_foreign_transcript_shows_no_rewind(tmp_path: Path) -> None:
    assert rewind_transcript.read(str(tmp_path / "absent.jsonl")).rewinds == []
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text('{"parentUuid": nope\n[1, 2]\n{"type": "user"}\n')
    assert rewind_transcript.read(str(garbage)).rewinds == []
    # A plain session: three prompts, each going on from the last: no rewind.
    path, _ = _fixture("2_1_332")
    lines = path.read_text().splitlines()
    cut = next(i for i, ln in enumerate(lines) if '"after the rewind' in ln
               and '"type":"user"' in ln)
    plain = tmp_path / "plain.jsonl"
    plain.write_text("\n".join(lines[:cut]) + "\n")
    assert rewind_transcript.read(str(plain)).rewinds == []


def _ledgered(repo: Path, version: str) -> tuple[Guard, str, dict[str, str]]:
    """The capture's session replayed into a real store: each tool_use of the transcript
    ledgered as the hooks would (begin, then end succeeded)."""
    path, _ = _fixture(version)
    records = _records(path)
    sid = str(records[-1]["sessionId"])
    gg(repo, "init", "--no-hooks", "--no-daemon")
    guard = Guard.open(repo)
    guard.start_session(sid)
    ids: dict[str, str] = {}
    for r in records:
        if r.get("type") != "assistant":
            continue
        for b in r["message"]["content"]:  # type: ignore[index,union-attr]
            if b.get("type") == "tool_use":
                entry = guard.begin_call(b["name"], {"file_path": b["input"]["file_path"]},
                                         call_id=b["id"], session_id=sid)
                guard.end_call(entry.call_id, "succeeded", "ok")
                ids[b["id"]] = b["name"]
    return guard, sid, ids


@pytest.mark.parametrize("version", CAPTURES)
def test_detect_marks_the_rewound_calls_once_with_a_mark_event(repo: Path, tmp_path: Path,
                                                               version: str) -> None:
    guard, sid, ids = _ledgered(repo, version)
    path, history = _fixture(version)
    # Where Claude Code keeps it: ~/.claude/projects/P/SID.jsonl beside file-history/SID.
    home = tmp_path / "home" / ".claude"
    transcript = home / "projects" / "p" / f"{sid}.jsonl"
    transcript.parent.mkdir(parents=True)
    shutil.copy(path, transcript)
    shutil.copytree(history, home / "file-history" / sid)
    marked = rewind.detect(guard, sid, str(transcript))
    found = rewind_transcript.read(str(transcript))
    assert marked == list(found.rewinds[0].tool_uses)
    state = journal.read(guard.store)
    for call_id in ids:
        entry = state.get(call_id)
        assert (entry.rewound_at is not None) == (call_id in marked), call_id
        if call_id in marked:
            assert entry.status == "succeeded"
            assert entry.rewound_by is not None and entry.rewound_by.startswith(
                f"Claude Code /rewind to before prompt {found.rewinds[0].prompt[:8]}")
            assert not blocks(entry) and "it was rewound" in verdict(entry).why
    # The same transcript again: nothing new; and the ledger verifies with the marks.
    assert rewind.detect(guard, sid, str(transcript)) == []
    marks = [r for r in read_jsonl(guard.store.ledger_path).records if "mark" in r]
    assert len(marks) == len(marked) and all(set(m["mark"]) >= {"callId", "status",
                                                                "rewoundAt", "rewoundBy"}
                                             for m in marks)
    assert verify.problems(guard.store, guard.snap) == []


def test_a_mark_cannot_change_a_calls_status_or_its_content(repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    guard = Guard.open(repo)
    guard.start_session("s1")
    entry = guard.begin_call("Edit", {"file_path": "src/app.py"}, session_id="s1")
    done = guard.end_call(entry.call_id, "succeeded", "ok")
    with guard.store.writing():
        state = journal.read(guard.store)
        with pytest.raises(Exception, match="cannot become succeeded"):
            journal.append_entries(guard.store, state,
                                   [done.model_copy(update={"summary": "rewritten"})])
        journal.append_entries(guard.store, state,
                               [done.model_copy(update={"note": "learnt later"})])
    assert journal.read(guard.store).get(entry.call_id).note == "learnt later"


@pytest.mark.parametrize("version", CAPTURES)
def test_a_look_reads_only_what_was_appended_and_suspects_only_a_rewind(
        tmp_path: Path, version: str) -> None:
    path, _ = _fixture(version)
    lines = path.read_text().splitlines(keepends=True)
    prompt_at = [i for i, ln in enumerate(lines) if '"type":"user"' in ln
                 and "gg-script" in ln and '"tool_result"' not in ln]
    copy = tmp_path / "t.jsonl"
    copy.write_text("".join(lines[:prompt_at[1]]))           # turn 1
    first, suspect = rewind_transcript.look_on(str(copy), None)
    assert not suspect and first.offset == copy.stat().st_size
    copy.write_text("".join(lines[:prompt_at[2]]))           # turn 2 goes on from turn 1
    second, suspect = rewind_transcript.look_on(str(copy), first)
    assert not suspect and second.offset > first.offset
    copy.write_text("".join(lines))                          # the prompt after the rewind
    _third, suspect = rewind_transcript.look_on(str(copy), second)
    assert suspect
    assert [r.prompt for r in rewind_transcript.read(str(copy)).rewinds] == \
        [json.loads(lines[prompt_at[1]])["uuid"]]


@pytest.mark.parametrize("marked", [True, False], ids=["rewind-seen", "rewind-unseen"])
def test_rollback_does_not_undo_what_the_rewind_put_back(repo: Path, marked: bool) -> None:
    """An Edit; Claude Code's restore puts the file back (outside every call window, as
    the rewind does); then the user edits it. Unmarked, rollback-files takes the file for
    the agent's change overwritten by someone else: a conflict to resolve. Marked
    `restored`, the Edit owns nothing: the file is the user's, and nothing is undone."""
    gg(repo, "init", "--no-hooks", "--no-daemon")
    guard = Guard.open(repo)
    guard.start_session("s1")
    ckpt = guard.checkpoint("manual").checkpoint_id
    before = (repo / "src" / "app.py").read_text()
    entry = guard.begin_call("Edit", {"file_path": "src/app.py"}, writes=["src/app.py"])
    (repo / "src" / "app.py").write_text("def main():\n    return 2\n")
    done = guard.end_call(entry.call_id, "succeeded")
    (repo / "src" / "app.py").write_text(before)            # /rewind's restore code
    if marked:
        with guard.store.writing():
            state = journal.read(guard.store)
            journal.append_entries(guard.store, state, [done.model_copy(update={
                "rewound_at": "2026-12-06T09:00:00Z", "rewound_by": "a test rewind",
                "rewound_files": "restored"})])
    (repo / "src" / "app.py").write_text(before + "# the user's line\n")
    guard.close()
    dry = gg(repo, "rollback-files", "--to", ckpt, "--dry-run", "--json", check=False)
    plan = json.loads(dry.stdout)
    owners = {d["path"]: d["owner"] for d in json.loads(gg(repo, "status", "--json").stdout)
              ["dirty"]}
    if marked:
        assert dry.returncode == 0 and plan["conflicts"] == [] and plan["restored"] == []
        assert owners["src/app.py"] == "user"
    else:
        assert dry.returncode == 5
        assert [c["path"] for c in plan["conflicts"]] == ["src/app.py"]


def test_the_refusal_path_waits_for_the_calls_own_transcript_entry(tmp_path: Path) -> None:
    """Claude Code writes its transcript behind the hooks: the refusal path reads it once
    the call's own entry is there (everything before it is then on disk)."""
    import threading

    from gitguard.integrations.rewind import wait_written

    path = tmp_path / "t.jsonl"
    path.write_text('{"type": "user"}\n' * 1000)
    writer = threading.Timer(0.1, lambda: path.open("a").write(
        '{"type": "assistant", "id": "toolu_01late"}\n'))
    writer.start()
    assert wait_written(str(path), "toolu_01late")
    writer.join()
    assert not wait_written(str(path), "toolu_01never", timeout=0.1)
    assert not wait_written(str(tmp_path / "missing.jsonl"), "toolu_01late")
