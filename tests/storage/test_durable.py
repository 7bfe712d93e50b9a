"""The durable primitives: atomic write, checksummed JSONL, torn-tail repair, the lock."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitguard.errors import CorruptRecord, StoreError
from gitguard.storage import durable

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
records = st.lists(st.dictionaries(st.text(min_size=1, max_size=8), json_values, max_size=4),
                   min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(records=records, data=st.data())
def test_cut_at_any_byte_reads_a_clean_prefix_and_reports_the_tear(
        tmp_path_factory: pytest.TempPathFactory, records: list[dict[str, object]],
        data: st.DataObject) -> None:
    path = tmp_path_factory.mktemp("jsonl") / "ledger.jsonl"
    durable.append_jsonl(path, records)
    whole = path.read_bytes()
    cut = data.draw(st.integers(min_value=0, max_value=len(whole)))
    path.write_bytes(whole[:cut])

    read = durable.read_jsonl(path)

    complete_lines = whole[:cut].count(b"\n")
    assert read.records == records[:complete_lines]
    assert read.torn == whole[:cut][read.good_bytes:]
    assert bool(read.torn) == (cut not in _line_ends(whole))

    torn = durable.repair_torn_tail(path)
    assert torn == read.torn
    assert path.read_bytes() == whole[:read.good_bytes]
    if torn:
        aside = list(path.parent.glob("ledger.jsonl.torn-*"))
        assert [p.read_bytes() for p in aside] == [torn], "torn bytes are kept aside"
    durable.append_jsonl(path, [{"after": "repair"}])
    assert durable.read_jsonl(path).records == [*records[:complete_lines], {"after": "repair"}]


def _line_ends(data: bytes) -> set[int]:
    return {0} | {i + 1 for i, byte in enumerate(data) if byte == ord("\n")}


@settings(max_examples=100, deadline=None)
@given(records=records)
def test_records_round_trip(tmp_path_factory: pytest.TempPathFactory,
                            records: list[dict[str, object]]) -> None:
    path = tmp_path_factory.mktemp("rt") / "x.jsonl"
    for record in records:
        durable.append_jsonl(path, [record])
    assert durable.read_jsonl(path).records == records


def test_a_corrupt_middle_line_is_refused_not_skipped(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    durable.append_jsonl(path, [{"n": 1}, {"n": 2}, {"n": 3}])
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b'"n":2', b'"n":9')
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(CorruptRecord, match="line 2"):
        durable.read_jsonl(path)


def test_non_utf8_names_round_trip(tmp_path: Path) -> None:
    import os

    name = os.fsdecode(b"caf\xe9.txt")
    path = tmp_path / "x.jsonl"
    durable.append_jsonl(path, [{"path": name}])
    assert durable.read_jsonl(path).records == [{"path": name}]


def test_atomic_write_replaces_whole_file_with_private_mode(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    durable.atomic_write(target, b"one")
    durable.atomic_write(target, b"two")
    assert target.read_bytes() == b"two"
    assert target.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"], "no temp file left behind"


def _hold_lock(path: str, ready: multiprocessing.synchronize.Event,
               release: multiprocessing.synchronize.Event) -> None:
    lock = durable.StoreLock(Path(path))
    with lock.held():
        ready.set()
        release.wait(10)


def test_lock_excludes_another_process(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    holder = ctx.Process(target=_hold_lock, args=(str(tmp_path / "lock"), ready, release))
    holder.start()
    try:
        assert ready.wait(20)
        with pytest.raises(StoreError, match="locked by another process"):
            durable.StoreLock(tmp_path / "lock", timeout=0.2).acquire()
    finally:
        release.set()
        holder.join(20)
    with durable.StoreLock(tmp_path / "lock", timeout=5).held():
        pass


_SHORT_WRITE = """
import resource, signal, sys
from pathlib import Path
from gitguard.storage import durable
from gitguard.errors import StoreError
path = Path(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)      # EFBIG instead of being killed
size = path.stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 10, resource.RLIM_INFINITY))
try:
    durable.append_jsonl(path, [{"call": "c2", "text": "x" * 200}])
except StoreError as exc:
    print("refused:", exc, "|", exc.hint)
    sys.exit(7)
"""


def test_a_short_write_leaves_no_partial_line(tmp_path: Path) -> None:
    # A file size limit makes os.write write 10 bytes of the line and then fail, as a
    # full disk would: the append must fail whole, with the file cut back.
    path = tmp_path / "ledger.jsonl"
    durable.append_jsonl(path, [{"call": "c1"}])
    before = path.read_bytes()

    done = subprocess.run([sys.executable, "-c", _SHORT_WRITE, str(path)],
                          capture_output=True, text=True, timeout=60)

    assert done.returncode == 7, done.stderr
    assert "cannot append to ledger.jsonl" in done.stdout
    assert "nothing was recorded" in done.stdout
    assert path.read_bytes() == before
    read = durable.read_jsonl(path)
    assert read.records == [{"call": "c1"}] and read.torn == b""
