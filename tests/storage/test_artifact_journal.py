"""The calls' artifact journals (gitguard.storage.artifact_journal): a call's input, patch and
result are appended to one file per session instead of a file each. They read back as
the files did, a torn append is repaired, stores with per-file artifacts stay readable,
and gc bundles both and drops the journals."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gitguard import verify
from gitguard.api import Guard
from gitguard.errors import CorruptRecord
from gitguard.git import patch_text
from gitguard.models import ToolLedgerEntry
from gitguard.snapshot import checkpoints
from gitguard.storage import artifact_journal, durable
from tests.helpers.commands import gg
from tests.helpers.storage import calls


def _journal(guard: Guard) -> Path:
    (journal,) = artifact_journal.journals(guard.store.artifacts_dir)
    return journal


def test_lines_round_trip_text_binary_and_odd_names(tmp_path: Path) -> None:
    journal = tmp_path / "journal-s.log"
    items = [("input_call 1%.json", b'{"a": "b\\n"}'), ("patch_x.diff", "é\n\t\0".encode()),
             ("result_y.txt", bytes(range(256))), ("empty.txt", b"")]
    artifact_journal.append(journal, items)
    assert artifact_journal.read(journal) == dict(items)
    found = artifact_journal.Journals(tmp_path)
    assert found.find("result_y.txt") == bytes(range(256))
    assert found.find("nothing") is None
    artifact_journal.append(journal, [("later.txt", b"appended after the index was read")])
    assert found.find("later.txt") == b"appended after the index was read"
    # A line whose sum does not match is not returned: it is reported as damaged, which a
    # name no line has is not.
    raw = journal.read_bytes().replace(b"appended", b"Appended")
    journal.write_bytes(raw)
    with pytest.raises(CorruptRecord, match="the line of later.txt fails its checksum"):
        artifact_journal.Journals(tmp_path).find("later.txt")
    assert artifact_journal.Journals(tmp_path).find("nothing") is None
    assert artifact_journal.read(journal)["empty.txt"] == b""


def _one_edit(repo: Path, result: str) -> tuple[Guard, ToolLedgerEntry, ToolLedgerEntry]:
    """A new store and one finished Edit call of src/app.py: (guard, begun, ended)."""
    guard = Guard.init(repo)
    begun = guard.begin_call("Edit", {"file_path": "src/app.py"}, writes=["src/app.py"])
    (repo / "src" / "app.py").write_text("def main():\n    return 2\n")
    return guard, begun, guard.end_call(begun.call_id, "succeeded", result)


def test_a_call_writes_no_artifact_file_and_reads_back_what_the_files_held(repo: Path) -> None:
    guard, begun, ended = _one_edit(repo, "done")
    journal = _journal(guard)
    assert sorted(os.listdir(guard.store.artifacts_dir)) == [journal.name]
    assert journal.stat().st_mode & 0o777 == durable.FILE_MODE
    store = Guard.open(repo).store      # a fresh reader, as another process
    assert store.read_artifact(begun.input_ref or "") == durable.canonical_json(
        {"file_path": "src/app.py"})
    assert store.read_artifact(ended.result_ref or "") == b"done"
    # The patch equals the one rendered from the call's two checkpoints' trees.
    patch = Guard.open(repo).diff(begun.call_id)
    assert b"+    return 2" in patch
    fresh = Guard.open(repo)
    index = checkpoints.read_index(fresh.store)
    pre, post = (fresh.snap.tree_of(index.find(i).snapshot_commit)
                 for i in (ended.pre_checkpoint_id or "", ended.post_checkpoint_id or ""))
    assert patch == patch_text.render(fresh.snap.repo, fresh.snap.diff(pre, post))
    shown = gg(repo, "diff", begun.call_id).stdout
    assert "+    return 2" in shown
    assert verify.problems(fresh.store, fresh.snap) == []


def test_a_torn_append_is_moved_aside_and_the_next_one_reads(repo: Path) -> None:
    guard = Guard.init(repo)
    calls(repo, guard, 1)
    journal = _journal(guard)
    whole = journal.read_bytes()
    with open(journal, "ab") as fh:     # a call killed halfway through its append
        fh.write(artifact_journal.encode("input_call_9.json", b"{}")[:20])
    again = Guard.open(repo)
    calls(repo, again, 1, start=1)
    assert journal.read_bytes().startswith(whole)
    assert not again.store.has_artifact("artifacts/input_call_9.json")
    for entry in Guard.open(repo).ledger():
        for ref in (entry.input_ref, entry.result_ref, entry.file_patches[0].patch_ref):
            assert Guard.open(repo).store.has_artifact(ref or "")
    assert verify.problems(again.store, again.snap) == []


def test_a_store_with_artifact_files_stays_readable_and_gc_bundles_both(repo: Path) -> None:
    """Stores written before the journals hold a file per artifact: both are read, and
    gc moves both into its bundle."""
    guard = Guard.init(repo)
    calls(repo, guard, 2)
    journal = _journal(guard)
    # Rewrite the first session's artifacts as the old code stored them: a file each.
    old = artifact_journal.read(journal)
    for name, stored in old.items():
        durable.atomic_write(guard.store.artifacts_dir / name, stored)
    journal.unlink()
    calls(repo, Guard.open(repo), 2, start=2)     # new calls go to a journal again
    expected = {}
    for entry in Guard.open(repo).ledger():
        for ref in (entry.input_ref, entry.result_ref, entry.file_patches[0].patch_ref):
            expected[ref] = Guard.open(repo).store.read_artifact(ref or "")
    assert set(old) <= {r.removeprefix("artifacts/") for r in expected if r}
    fresh = Guard.open(repo)
    assert verify.problems(fresh.store, fresh.snap) == []
    done = json.loads(gg(repo, "gc", "--json").stdout)
    assert done["artifactsBundled"] == len(expected) == 12
    left = os.listdir(fresh.store.artifacts_dir)
    assert len(left) == 1 and left[0].startswith("bundle-")
    after = Guard.open(repo)
    assert {r: after.store.read_artifact(r or "") for r in expected} == expected
    assert verify.problems(after.store, after.snap) == []


def test_a_background_fsync_writes_what_a_waited_one_writes(tmp_path: Path) -> None:
    """The call path appends with the fsync in the background (overlapping the checkpoint
    write): the journal's bytes are the same, durable once `wait` returns, and an fsync
    that fails is raised by `wait`."""
    items = [("input_call_1.json", b'{"a": 1}'), ("result_call_1.txt", bytes(range(256)))]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    artifact_journal.append(tmp_path / "a" / "journal-s.log", items)()
    waits = [artifact_journal.append(tmp_path / "b" / "journal-s.log", [item], background=True)
             for item in items]
    for wait in waits:
        wait()
    assert (tmp_path / "b" / "journal-s.log").read_bytes() == \
        (tmp_path / "a" / "journal-s.log").read_bytes()

    def broken() -> None:
        raise OSError(5, "Input/output error")

    with pytest.raises(OSError, match="Input/output error"):
        artifact_journal._in_background(broken)()


def test_an_edited_journal_line_is_reported_as_damaged_not_missing(repo: Path) -> None:
    guard, begun, ended = _one_edit(repo, "the result text")
    journal = _journal(guard)
    raw = journal.read_bytes()
    assert raw.count(b"the result text") == 1
    journal.write_bytes(raw.replace(b"the result text", b"the resulT text"))

    checked = gg(repo, "verify", check=False)
    assert checked.returncode != 0
    assert (f"{ended.call_id} names {ended.result_ref}, whose journal line fails its "
            "checksum") in checked.stdout + checked.stderr
    assert "missing" not in checked.stdout + checked.stderr
    # Reading it back is a clear error, not a traceback and not "missing".
    with pytest.raises(CorruptRecord, match="fails its checksum"):
        Guard.open(repo).store.read_artifact(ended.result_ref or "")
    # What the other lines hold still reads.
    assert Guard.open(repo).store.read_artifact(begun.input_ref or "") == \
        durable.canonical_json({"file_path": "src/app.py"})
    # gc refuses to change anything while it is so, and says why: the journal, evidence
    # included, stays as it is.
    refused = gg(repo, "gc", "--no-repack-repository", check=False)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "whose journal line fails its checksum" in refused.stderr
    assert journal.read_bytes() == raw.replace(b"the result text", b"the resulT text")
