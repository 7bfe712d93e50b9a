"""Demo chapter: a store that stays small, private and observable.

Dependency dirs and big files stay out of snapshots; secrets are redacted before they
are stored while the snapshot stays exact; an encrypted store and gc run on a second
throwaway repository, so the chapters after this one find the demo repository as the
earlier chapters left it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from gitguard import errors
from gitguard.api import Guard
from gitguard.git import packing
from gitguard.retention import collect
from gitguard.storage import sealing, trace_log, trace_view

Echo = Callable[[str], None]

AWS_KEY = "AKIA" + "FAKEDEMO7Q2XJ4LM"
TOKEN = "ghp_" + "FAKEdemo0123456789abcdefghijklmnopqr"


@contextmanager
def _env(**values: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def chapter_storage(echo: Echo, repo: Path, guard: Guard) -> None:
    from gitguard.demo.demo_repo import _git

    echo("== Storage: small, private, observable ==")
    (repo / "node_modules" / "left-pad").mkdir(parents=True)
    (repo / "node_modules" / "left-pad" / "index.js").write_text("module.exports = pad\n")
    (repo / "dump.bin").write_bytes(b"\0" * (guard.settings.untracked_size_cap + 1))
    secret_file = f"aws_access_key_id = {AWS_KEY}\n"
    (repo / "deploy.ini").write_text(secret_file)
    command = f"curl -H 'Authorization: Bearer {TOKEN}' https://api.example.com/deploy"
    with guard.tool_call("Bash", {"command": command}, step_id="storage_1") as call:
        call.result = f"deployed with key {AWS_KEY}\n"
    ckpt = guard.checkpoint("manual", "storage_1",
                            messages=[{"role": "user", "content": f"my token is {TOKEN}"}])
    echo(f"left out of the snapshot: {', '.join(ckpt.skipped)} (dependency dir, over the cap)")
    entry = guard.ledger()[-1]
    echo(f"ledger summary as stored: {entry.summary}")
    stored = guard.store.read_artifact(entry.result_ref or "").decode().strip()
    echo(f"tool output as stored:    {stored}")
    echo(f"message as stored:        {guard.messages(ckpt)[-1]['content']}")
    snapshot_copy = _git(repo, "show", f"{ckpt.snapshot_commit}:deploy.ini")
    echo(f"the snapshot keeps deploy.ini byte for byte: {snapshot_copy == secret_file}")
    status = guard.status()
    echo(f"store size (status): {status.store_bytes / 1e3:.1f} kB")
    shutil.rmtree(repo / "node_modules")
    (repo / "dump.bin").unlink()
    (repo / "deploy.ini").unlink()

    echo("\ntrace summary (per session):")
    for row in trace_view.summarize(trace_log.read(guard.store)):
        echo(f"  {row.session_id:<22} calls={row.calls} in tools={row.tool_ms:.0f} ms "
             f"snapshots={row.checkpoints} ({row.snapshot_ms:.0f} ms) "
             f"stored={row.bytes_stored} B")

    _encrypted_and_collected(echo, repo.parent / "storage-demo")


def _encrypted_and_collected(echo: Echo, root: Path) -> None:
    from gitguard.demo.demo_repo import _git, make_repo

    root.mkdir()
    repo = make_repo(root)
    echo(f"\na second repository, encrypted at rest: {repo}")
    (repo / ".gitguard.toml").write_text("[encryption]\nenabled = true\n")
    key = sealing.new_key_text()
    with _env(GITGUARD_KEY=key, GITGUARD_GC_KEEP_DAYS="0", GITGUARD_GC_KEEP_LAST="3"):
        guard = Guard.open(repo)
        guard.start_session("encrypted-session")
        for i in range(12):
            with guard.tool_call("Edit", {"file_path": "app.py", "n": i},
                                 writes=["app.py"]) as call:
                (repo / "app.py").write_text(f"def greet(name):\n    return 'hi {i} ' + name\n")
                call.result = f"edit {i}"
        guard.checkpoint("post", "done", state={"plan": "secret plan"},
                         messages=[{"role": "user", "content": "confidential request"}])
        raw = guard.store.stored_artifact("artifacts/result_call_1.txt")
        echo(f"result_call_1.txt as stored starts {raw[:4]!r} (key id {raw[4:12].hex()}), "
             f"plaintext inside: {b'edit 0' in raw}")
        with _env(GITGUARD_KEY=sealing.new_key_text()):
            try:
                Guard.open(repo).store.read_artifact("artifacts/result_call_1.txt")
            except errors.KeyProblem as exc:
                echo(f"with another key: Error: {exc.message}")
        echo(f"with the key: {guard.store.read_artifact('artifacts/result_call_1.txt')!r}")
        objects = packing.objects_dir(guard.ws)
        echo(f"loose objects before gc: {packing.loose_count(objects)[0]}")
        report = collect.run(guard.store, guard.snap, guard.settings)
        echo(f"gc kept {len(report.kept)} checkpoints, dropped {len(report.pruned)} and "
             f"{report.commits_dropped} snapshot commits, freed {report.freed_bytes} bytes; "
             f"loose objects now {packing.loose_count(objects)[0]}")
        if report.repack is not None:
            echo(f"then repacked the repository, so gitguard's objects are deltas of yours: "
                 f"{report.repack.packs_before} packs -> {report.repack.packs_after}, "
                 f"every unreachable object kept")
        _git(repo, "gc", "--prune=now", "-q")
        restored = sum(1 for row in guard.checkpoints()
                       if _git(repo, "cat-file", "-t", row.snapshot_commit).strip() == "commit")
        echo(f"after `git gc --prune=now`: {restored}/{len(guard.checkpoints())} kept "
             "checkpoints still restore")
