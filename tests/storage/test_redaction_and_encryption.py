"""Redaction before storing, encryption at rest, and the snapshot that stays exact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gitguard.api import Guard
from gitguard.errors import CorruptRecord
from gitguard.storage import sealing
from tests.helpers.commands import gg, git

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
EXPECTED: dict[str, list[str]] = json.loads((FIXTURES / "secrets" / "EXPECTED.json").read_text())
ROOT = Path(__file__).resolve().parents[2]


def read(path: Path) -> str:
    with path.open(encoding="utf-8", newline="") as fh:
        return fh.read()


def stored_bytes(repo: Path) -> dict[str, bytes]:
    """Every store file, and every loose or packed object gitguard's refs reach, inflated."""
    store = repo / ".git" / "gitguard"
    found = {str(p.relative_to(store)): p.read_bytes() for p in store.rglob("*") if p.is_file()}
    listing = git(repo, "rev-list", "--objects", "--glob=refs/gitguard/*").split()
    oids = [t for t in listing if len(t) == 40]
    batch = subprocess.run(["git", "cat-file", "--batch"], cwd=repo, capture_output=True,
                           input="\n".join(oids).encode() + b"\n", check=True).stdout
    found["objects"] = batch
    return found


def leaks(blobs: dict[str, bytes], secrets: list[str]) -> list[str]:
    out = []
    for secret in secrets:
        needles = {secret.encode(), json.dumps(secret)[1:-1].encode()}
        out += [f"{name}: {secret[:16]}" for name, data in blobs.items()
                if any(n in data for n in needles)]
    return out


def test_secret_corpus_is_redacted_everywhere_it_is_stored(repo: Path) -> None:
    names = sorted(EXPECTED)
    assert len(names) >= 20
    guard = Guard.open(repo)
    for name in names:
        text = read(FIXTURES / "secrets" / name)
        entry = guard.begin_call("Bash", {"command": text, "description": name})
        guard.end_call(entry.call_id, "failed", text)
        guard.checkpoint(state={"scratch": text, "file": name},
                         messages=[{"role": "tool", "content": text}, {"role": "user",
                                                                         "content": name}])
    every = [s for n in names for s in EXPECTED[n]]
    assert leaks(stored_bytes(repo), every) == []
    ledger = guard.ledger()
    assert any("[REDACTED:" in e.summary for e in ledger)
    assert all(e.error_summary is None or "REDACTED" in e.error_summary or
               not any(s in e.error_summary for s in every) for e in ledger)
    # What is read back is the redacted text, and it is still the message it was.
    last = guard.load_checkpoint(guard.checkpoints()[-1].checkpoint_id)
    assert guard.messages(last)[1] == {"role": "user", "content": names[-1]}
    assert "[REDACTED:" in guard.messages(last)[0]["content"]


def test_clean_code_is_stored_unchanged(repo: Path) -> None:
    guard = Guard.open(repo)
    for path in sorted((FIXTURES / "clean_code").iterdir()):
        text = read(path)
        entry = guard.begin_call("Read", {"file_path": path.name, "content": text})
        done = guard.end_call(entry.call_id, "succeeded", text)
        made = guard.checkpoint(state={"file": text}, messages=[{"role": "tool",
                                                                 "content": text}])
        assert guard.store.read_artifact(done.result_ref or "") == text.encode(), path.name
        stored_input = json.loads(guard.store.read_artifact(entry.input_ref or ""))
        assert stored_input["content"] == text, path.name
        assert guard.messages(made) == [{"role": "tool", "content": text}], path.name
        assert guard.load_checkpoint(made.checkpoint_id).run_state == {"file": text}


def test_snapshots_keep_secrets_byte_for_byte_and_never_take_dotenv(repo: Path) -> None:
    secret_file = read(FIXTURES / "secrets" / "aws_secret_key.ini")
    (repo / "creds.ini").write_text(secret_file)
    made = Guard.open(repo).checkpoint(messages=[{"content": secret_file}])
    assert git(repo, "show", f"{made.snapshot_commit}:creds.ini") == secret_file
    assert ".env" not in git(repo, "ls-tree", "-r", "--name-only", made.snapshot_commit).split()


def test_extra_patterns_from_the_config(repo: Path) -> None:
    (repo / ".gitguard.toml").write_text('[redact]\npatterns = ["ACME-[0-9]{6}"]\n')
    guard = Guard.open(repo)
    entry = guard.begin_call("Bash", {"command": "deploy --ticket ACME-123456"})
    done = guard.end_call(entry.call_id, "succeeded", "ticket ACME-654321 closed")
    assert guard.ledger()[0].summary == "deploy --ticket [REDACTED:custom]"
    assert guard.store.read_artifact(done.result_ref or "") == b"ticket [REDACTED:custom] closed"


def test_a_bad_extra_pattern_is_a_clear_error(repo: Path) -> None:
    (repo / ".gitguard.toml").write_text('[redact]\npatterns = ["(unclosed"]\n')
    proc = gg(repo, "call", "begin", "--tool", "Bash", "--input", '{"command": "ls"}',
              check=False)
    assert proc.returncode == 1
    assert "Error: invalid redaction pattern '(unclosed'" in proc.stderr
    assert "Hint: fix [redact] patterns" in proc.stderr


# --- encryption at rest ---------------------------------------------------------------

MARK = "PLAINTEXT-MARKER-7f3a"


def encrypted_repo(repo: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Guard, str]:
    key = sealing.new_key_text()
    monkeypatch.setenv("GITGUARD_KEY", key)
    (repo / ".gitguard.toml").write_text("[encryption]\nenabled = true\n")
    guard = Guard.open(repo)
    entry = guard.begin_call("Write", {"file_path": "a.txt", "content": MARK}, writes=["a.txt"])
    (repo / "a.txt").write_text(f"{MARK} in the workspace\n")
    guard.end_call(entry.call_id, "succeeded", f"wrote {MARK}")
    guard.checkpoint(state={"plan": MARK}, messages=[{"role": "user", "content": MARK}])
    return guard, key


def test_encrypted_store_holds_no_plaintext_and_round_trips(repo: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    guard, key = encrypted_repo(repo, monkeypatch)
    files = {n: d for n, d in stored_bytes(repo).items() if n != "objects"}
    assert [n for n in files if n.startswith("artifacts/")]
    assert [n for n, d in files.items() if MARK.encode() in d] == []
    message_blobs = git(repo, "rev-list", "--objects", "--glob=refs/gitguard/messages/*")
    for line in message_blobs.splitlines():
        oid = line.split()[0]
        if git(repo, "cat-file", "-t", oid).strip() == "blob":
            raw = subprocess.run(["git", "cat-file", "blob", oid], cwd=repo,
                                 capture_output=True, check=True).stdout
            assert sealing.is_sealed(raw) and MARK.encode() not in raw
    meta = json.loads((repo / ".git" / "gitguard" / "store.json").read_text())
    assert meta["encryption"]["keyId"] == sealing.Key.from_text(key, "k").key_id
    # The workspace snapshot is never encrypted: it must restore exactly.
    last = guard.checkpoints()[-1]
    assert git(repo, "show", f"{last.snapshot_commit}:a.txt") == f"{MARK} in the workspace\n"
    # With the key, everything reads back.
    again = Guard.open(repo)
    ckpt = again.load_checkpoint(last.checkpoint_id)
    assert ckpt.run_state == {"plan": MARK}
    assert again.messages(ckpt) == [{"role": "user", "content": MARK}]
    assert MARK in again.diff("call_1").decode()
    assert again.store.read_artifact("artifacts/result_call_1.txt") == f"wrote {MARK}".encode()
    assert json.loads(gg(repo, "key", "status", "--json").stdout)["keyId"] == meta[
        "encryption"]["keyId"]
    gg(repo, "verify")


def test_encrypted_store_refuses_without_or_with_a_wrong_key(repo: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    encrypted_repo(repo, monkeypatch)
    no_key = {"GITGUARD_KEY": "", "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
    proc = gg(repo, "diff", "call_1", check=False, env=no_key)
    assert proc.returncode == 1 and MARK not in proc.stdout
    assert "Error: the system keyring is not usable: NoKeyringError" in proc.stderr
    assert "Hint: set GITGUARD_KEY" in proc.stderr
    wrong = gg(repo, "diff", "call_1", check=False,
               env={"GITGUARD_KEY": sealing.new_key_text()})
    assert wrong.returncode == 1 and MARK not in wrong.stdout
    assert "Error: the key given is not this store's key" in wrong.stderr
    with pytest.raises(sealing.KeyProblem, match="GITGUARD_KEY is not a base64 key"):
        sealing.Key.from_text("not base64 at all!", "GITGUARD_KEY")
    with pytest.raises(sealing.KeyProblem, match="an encryption key is 32 bytes; this one is 5"):
        sealing.Key.from_text("c2hvcnQ=", "GITGUARD_KEY")
    # Turning the setting off does not make an encrypted store write plaintext.
    (repo / ".gitguard.toml").unlink()
    off = gg(repo, "call", "begin", "--tool", "Read", "--input", '{"file_path": "b"}',
             check=False, env=no_key)
    assert off.returncode == 1 and "keyring is not usable" in off.stderr
    # verify needs no key: it checks structure, not content.
    gg(repo, "verify", env=no_key)


def test_a_tampered_envelope_is_reported_not_decrypted(repo: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    guard, _ = encrypted_repo(repo, monkeypatch)
    # The call's artifacts are in the session's journal; a file of the same name is read
    # first (stores written before the journals hold files only).
    path = repo / ".git" / "gitguard" / "artifacts" / "result_call_1.txt"
    data = bytearray(guard.store.stored_artifact("artifacts/result_call_1.txt"))
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptRecord, match="cannot be decrypted"):
        Guard.open(repo).store.read_artifact("artifacts/result_call_1.txt")
    # A sealed file moved under another name does not open either.
    other = path.with_name("result_call_9.txt")
    other.write_bytes(guard.store.stored_artifact("artifacts/input_call_1.json"))
    with pytest.raises(CorruptRecord):
        guard.store.read_artifact("artifacts/result_call_9.txt")


def test_key_from_the_keyring(repo: Path) -> None:
    # gitguard runs in a subprocess from the repository: keyring imports the backend by name.
    env = {"PYTHON_KEYRING_BACKEND": "tests.helpers.filekeyring.FileKeyring",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "GITGUARD_KEY": ""}
    (repo / ".gitguard.toml").write_text("[encryption]\nenabled = true\n")
    made = json.loads(gg(repo, "key", "generate", "--keyring", "--json", env=env).stdout)
    gg(repo, "checkpoint", "--messages-file", "-", env=env, input=b'[{"content": "hi"}]')
    status = json.loads(gg(repo, "key", "status", "--json", env=env).stdout)
    assert status["storeKeyId"] == made["keyId"] == status["keyId"]
    assert "key" not in made, "a key stored in the keyring is not printed"


def test_missing_keyring_package_is_a_clear_error(repo: Path) -> None:
    (repo / ".gitguard.toml").write_text("[encryption]\nenabled = true\n")
    script = ("import sys; sys.modules['keyring'] = None\n"
              "from gitguard.cli.main import main\nmain(sys.argv[1:])\n")
    env = {k: v for k, v in os.environ.items() if k != "GITGUARD_KEY"}
    proc = subprocess.run([sys.executable, "-c", script, "checkpoint", "--messages-file", "-"],
                          cwd=repo, env=env, capture_output=True, text=True, input="[1]")
    assert proc.returncode == 1, proc.stderr
    assert "the `keyring` package is not installed" in proc.stderr
    assert "Hint: set GITGUARD_KEY, or install it" in proc.stderr


def test_envelope_format() -> None:
    key = sealing.Key.from_text(sealing.new_key_text(), "k")
    sealed = key.seal(b"hello", "message", deterministic=True)
    assert sealed[:4] == b"GGE\x01" and sealing.envelope_key_id(sealed) == key.key_id
    assert key.seal(b"hello", "message", deterministic=True) == sealed
    assert key.seal(b"hello", "state") != key.seal(b"hello", "state")
    assert key.open(sealed, "message") == b"hello"
    assert b"hello" not in sealed
