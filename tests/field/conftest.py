"""The field suite's base: real files nobody here wrote, a repository whose history is
made of them, and real tools run as the agent's shell calls.

Synthetic fixtures are small and regular and let memory and format bugs through (issue
20: every stored patch read freed memory, unseen by 900 tests). Field tests work on
installed packages' own sources (click, pydantic) in a repository with a real-shaped
history, a tag, a stash, a staged edit, untracked and ignored files, and drive gitguard
as an agent does: `gitguard run -- black ...`, `sed -i`, an Edit through `call
begin`/`call end`. Every call made through these helpers is checked where it ends: its
stored patch reverses with `git apply -R --check` on the files it left.

Helpers are plain functions (`from tests.field.conftest import agent_shell`); fixtures are
`field_repo` (a fresh repository, `gitguard init` done) and `guard_mode` (the daemon
running or not, as two parameters).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.commands import gg, git
from tests.helpers.daemons import running_daemon
from tests.helpers.gitstate import GitState, capture
from tests.helpers.realfiles import module_file, package_sources

# Where the real files sit in the test repository.
CLICK = "src/click"
MODELS = "src/models"
CLICK_CORE = f"{CLICK}/core.py"
PLUGGY = "src/pluggy"        # pytest's plugin system: 13 modules, what black rewrites whole

# The user's own work, present before any agent call; no agent call may lose a byte of it.
USER_NOTES = "notes/todo.md"
USER_NOTES_BYTES = "- review the agent's change to core.py\n- caf\u00e9 \u2014 ship 8.2\n".encode()
STAGED = f"{MODELS}/fields.py"
STAGED_LINE = b"\n# staged by the user, not committed\n"
STASHED = f"{CLICK}/utils.py"
STASHED_LINE = b"\n# stashed by the user\n"


@dataclass(frozen=True)
class Field:
    """A field repository after `gitguard init`, with what the user had at that point."""

    repo: Path
    state: GitState                 # HEAD, refs (stash included), index bytes, config
    user_files: dict[str, bytes]    # the user's uncommitted files: never lost

    def assert_user_state_kept(self) -> None:
        """The user's git state is as it was and every byte of the user's own work is
        where the user left it (the untracked notes, the staged edit, the stash)."""
        self.state.assert_unchanged(self.repo)
        for path, data in self.user_files.items():
            assert (self.repo / path).read_bytes() == data, f"user bytes of {path} lost"
        stashed = git(self.repo, "show", f"stash@{{0}}:{STASHED}").encode(
            errors="surrogateescape")
        assert stashed.endswith(STASHED_LINE), "the user's stash lost its change"


def build_history(repo: Path) -> None:
    """A repository whose history is made of real files: click's package added in two
    commits, pydantic's models in a third, pluggy in a fourth, core.py trimmed and
    restored (a real-shaped edit in history), a tag; then the user's stash, staged edit,
    untracked notes and an ignored build output."""
    repo.mkdir()
    git(repo, "init", "-q")
    click = package_sources("click")
    core = click.pop("core.py")
    _write(repo, {f"{CLICK}/{name}": data for name, data in click.items()})
    _write(repo, {".gitignore": b"build/\n*.log\n__pycache__/\n",
                  "README.md": b"# field repository\n\nReal sources, real history.\n"})
    _commit(repo, "import click without core")
    _write(repo, {CLICK_CORE: core})
    _commit(repo, "add click.core")
    _write(repo, {f"{MODELS}/main.py": module_file("pydantic.main").read_bytes(),
                  f"{MODELS}/fields.py": module_file("pydantic.fields").read_bytes()})
    _commit(repo, "vendor pydantic models")
    _write(repo, {f"{PLUGGY}/{name}": data for name, data in package_sources("pluggy").items()})
    _commit(repo, "vendor pluggy")
    lines = core.splitlines(keepends=True)
    _write(repo, {CLICK_CORE: b"".join(lines[: len(lines) // 2])})
    _commit(repo, "trim core")
    _write(repo, {CLICK_CORE: core})
    _commit(repo, "restore core")
    git(repo, "tag", "-a", "v1", "-m", "first release")
    _append(repo / STASHED, STASHED_LINE)
    git(repo, "stash", "-q")
    _append(repo / STAGED, STAGED_LINE)
    git(repo, "add", STAGED)
    _write(repo, {USER_NOTES: USER_NOTES_BYTES, "build/out.log": b"ignored output\n"})


def _write(repo: Path, files: dict[str, bytes]) -> None:
    for path, data in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(data)


def _append(path: Path, data: bytes) -> None:
    path.write_bytes(path.read_bytes() + data)


def _commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


@pytest.fixture
def field_repo(tmp_path: Path) -> Field:
    """A fresh field repository with gitguard initialised (no daemon: `guard_mode` starts
    one where a test asks for it)."""
    repo = tmp_path / "field"
    build_history(repo)
    gg(repo, "init", "--no-daemon")
    user = {path: (repo / path).read_bytes() for path in (USER_NOTES, STAGED)}
    return Field(repo, capture(repo), user)


@pytest.fixture(params=["no daemon", "daemon"])
def guard_mode(request: pytest.FixtureRequest, field_repo: Field) -> Iterator[Field]:
    """The field repository with and without a running daemon (stopped afterwards)."""
    if request.param == "daemon":
        with running_daemon(field_repo.repo):
            yield field_repo
    else:
        yield field_repo


def ledger(repo: Path) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = json.loads(gg(repo, "ledger", "--json").stdout)
    return entries


def entry(repo: Path, call_id: str) -> dict[str, Any]:
    return next(e for e in ledger(repo) if e["callId"] == call_id)


def tool(name: str) -> str:
    """A real tool of the venv (black) or of the system (sed), as an absolute path."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    assert found, f"{name} is not installed"
    return found


def agent_shell(repo: Path, *argv: str) -> str:
    """One shell call of the agent through `gitguard run`; returns its callId after
    checking that its stored patch reverses on the files it left."""
    ran = gg(repo, "run", "--", *argv, check=False)
    last = ledger(repo)[-1]
    assert last["status"] in ("succeeded", "failed"), (ran.returncode, ran.stderr)
    assert ran.returncode == 0, f"{argv} exited {ran.returncode}:\n{ran.stderr}"
    assert_reverses(repo, last["callId"])
    return str(last["callId"])


def agent_edit(repo: Path, path: str, old: bytes, new: bytes) -> str:
    """An Edit tool call as Claude Code makes one: declared, the first `old` replaced by
    `new`, ended; returns its callId after checking its patch reverses."""
    file_input = json.dumps({"file_path": path, "old_string": old.decode(errors="replace"),
                             "new_string": new.decode(errors="replace")})
    begun = json.loads(gg(repo, "call", "begin", "--tool", "Edit", "--input", file_input,
                          "--writes", path, "--json").stdout)
    call_id = str(begun["callId"])
    data = (repo / path).read_bytes()
    assert old in data, f"{old!r} is not in {path}"
    (repo / path).write_bytes(data.replace(old, new, 1))
    ended = gg(repo, "call", "end", call_id, "--status", "succeeded", "--json", check=False)
    assert ended.returncode == 0, f"call end exited {ended.returncode}:\n{ended.stderr}"
    assert json.loads(ended.stdout)["status"] == "succeeded"
    assert_reverses(repo, call_id)
    return call_id


def call_diff(repo: Path, call_id: str) -> bytes:
    """`gitguard diff CALL` as bytes (a patch may hold any bytes)."""
    proc = subprocess.run([sys.executable, "-m", "gitguard", "diff", call_id], cwd=repo,
                          capture_output=True, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout


def assert_reverses(repo: Path, call_id: str) -> None:
    """`gitguard diff CALL | git apply -R --check` succeeds on the working tree (the
    README's promise), for a call that changed files."""
    patch = call_diff(repo, call_id)
    if not entry(repo, call_id)["filePatches"]:
        assert patch == b"", patch[:400]
        return
    assert patch.startswith(b"diff --git "), patch[:400]
    proc = subprocess.run(["git", "apply", "-R", "--check", "-"], cwd=repo, input=patch,
                          capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")


def worktree_bytes(repo: Path) -> dict[str, bytes]:
    """Every file of the working tree outside `.git`, ignored ones included: regular
    files by content, symlinks by target (prefixed so the two never compare equal)."""
    found: dict[str, bytes] = {}
    for root, dirs, files in os.walk(repo):
        dirs[:] = [d for d in dirs if not (root == str(repo) and d == ".git")]
        for name in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            full = os.path.join(root, name)
            rel = os.path.relpath(full, repo)
            found[rel] = (b"link:" + os.fsencode(os.readlink(full)) if os.path.islink(full)
                          else Path(full).read_bytes())
    return found


def roll_back_call(repo: Path, call_id: str) -> subprocess.CompletedProcess[str]:
    """`rollback-files --to` the call's pre checkpoint (output decoded as the file system
    names are: a path need not be UTF-8)."""
    pre = entry(repo, call_id)["preCheckpointId"]
    assert pre, f"{call_id} has no pre checkpoint"
    proc = subprocess.run([sys.executable, "-m", "gitguard", "rollback-files", "--to", pre],
                          cwd=repo, capture_output=True, env=dict(os.environ))
    return subprocess.CompletedProcess(proc.args, proc.returncode, os.fsdecode(proc.stdout),
                                       os.fsdecode(proc.stderr))
