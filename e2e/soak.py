"""A randomized session fuzz through the real Claude Code CLI (issue 31, `make soak`).

One seed is one session. `plan(seed, root, out)` writes, from the seed alone, a script for
the scripted model (e2e/modelserver.py) of about 30 tool calls: Read, Edit, Write over
existing files and new ones, `sed -i`, `echo >>`, `echo >`, `mv`, `rm`, parallel batches
(several tool_use blocks in one model response) and slow shell commands that wait on a
marker file outside the repository; and a person's edits: inserted, changed and deleted
lines and new files, made while the model "thinks" between steps, WHILE a slow command
runs, and after the session. About half of them land on files the agent wrote. The base
repository holds real text: modules of the installed click package.

`run(seed, repo)` replays it, then `rollback-files --to <the session's first
checkpoint>`, `conflicts resolve --merge` on every pending conflict, and `rollback-files
--to <safetyCheckpointId>` (the undo). Every check is made against the session's own
record of every user write (path, bytes before, bytes after, when: before step k, during
step k, after the session), never against gitguard's bookkeeping.

Definitions (what the counts count):
- A *user line* is a line a user write added (in its bytes after, not before; every such
  line carries a unique `# user SEED.N` token) that is still in the working tree right
  before the rollback, at any path (an agent `mv` may have carried it). A line the agent
  later rewrote (a `sed` suffix on it, a Write without it, an `rm` of its file) is not
  counted: it is not the user's any more.
- A user line is *lost* when it is in no file of the tree after the rollback, or when the
  rollback kept it and a merge dropped it. Counted apart, as the documented cost of
  window attribution (docs/rollback.md, Ownership): a line the person added or deleted
  WHILE a command whose writes cannot be read from its words ran (the slow `sh
  wait.sh` step) is that command's on window confidence. The rollback may revert it only
  on a path it lists in `windowReverted` (else it is lost, and fails the seed); a merge
  may take it out as the command's hunk (`user_lines_window_merged`). Also apart (item 4
  of issue 31, moves): a line lost at the destination of an agent `mv`.
- A *user-deleted line* is a line a user write removed from a path (the person only
  deletes lines that occur once in the file) that is still absent from that path right
  before the rollback. It is *back* when that path holds it after the rollback, or after
  a merge that exited 0; a merge that exited 5 may show it inside a marked region only.
- An *agent-only file* is a path the agent wrote that no user write touched, and not
  either end of an agent `mv` whose other end a user write touched. After the rollback
  and the merges it must hold its committed bytes (or be absent if it was not
  committed); any other state is a *leftover*.
- HEAD, the branches, `.git/index` (bytes) and the stash are the same before the
  rollback, after it, after the merges and after the undo; `git fsck` is clean.
- The undo is byte-exact: after the merges, `rollback-files --to <safetyCheckpointId>`
  gives back every file of the pre-rollback tree, bytes and exec bit, and no other.

Not counted: a person writing the very path a running shell command then writes (inotify
cannot say which process wrote, so the person here only writes other paths during a
command); sessions in which the replay diverged from the plan (a tool call failing) fail
as a harness error, not as a gitguard finding.

Seeds: GITGUARD_SOAK_SEEDS, e.g. `0-199` or `3,17` (default `0-2`, what `make e2e`
runs). Every failure prints its seed and the command that reproduces it; with
GITGUARD_SOAK_LOG set, each seed appends one JSON line of counts there, and
`python -m e2e.soak summary FILE` adds them up.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WORDS = ("amber", "birch", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo",
         "juniper", "kelp", "lumen", "maple", "nectar", "onyx", "pebble", "quartz", "raven",
         "saffron", "tundra", "umber", "violet", "willow", "yarrow", "zephyr")
BASE_MODULES = ("__init__", "_utils", "_textwrap", "exceptions", "formatting", "globals",
                "parser", "utils")
REPRO = ("GITGUARD_SOAK_SEEDS={seed} PYTHONPATH=. .venv/bin/python -m pytest -q "
         "-p no:cacheprovider -c e2e/pytest.ini e2e/test_soak.py")


def seeds_from_env() -> list[int]:
    spec = os.environ.get("GITGUARD_SOAK_SEEDS", "0-2")
    out: list[int] = []
    for part in spec.replace(" ", "").split(","):
        if "-" in part:
            lo, hi = part.split("-", 1)
            out += range(int(lo), int(hi) + 1)
        elif part:
            out.append(int(part))
    return out


def base_files() -> dict[str, str]:
    """The committed repository: real click modules and a README."""
    import importlib.util

    spec = importlib.util.find_spec("click")
    assert spec is not None and spec.submodule_search_locations
    pkg = Path(next(iter(spec.submodule_search_locations)))
    files = {f"src/click/{m}.py": (pkg / f"{m}.py").read_text() for m in BASE_MODULES}
    files["README.md"] = "# soak\n\nThe click sources, edited by an agent and a person.\n"
    return files


# --- the plan ---------------------------------------------------------------------------

@dataclass
class UserWrite:
    """One write the person makes: the whole file before and after (None: absent)."""

    path: str
    before: str | None
    after: str | None
    when: str                   # "before 3", "during 7", "after"
    rename: bool = False        # saved as an editor does: a temp file renamed over it


@dataclass
class Plan:
    seed: int
    script: list[dict[str, Any]]
    before: dict[int, list[UserWrite]]          # step index -> writes while paused before it
    during: dict[int, list[UserWrite]]          # slow step index -> writes while it runs
    after: list[UserWrite]
    expected: dict[str, str]                    # the tree before the rollback (planned)
    base: dict[str, str]
    agent_paths: set[str]                       # every path an agent call wrote
    moves: list[tuple[str, str]]
    calls: int
    slow: dict[int, bool] = field(default_factory=dict)   # slow step -> predictable words

    def user_writes(self) -> list[UserWrite]:
        return [w for k in sorted(self.before) for w in self.before[k]] + \
            [w for k in sorted(self.during) for w in self.during[k]] + self.after


class _Planner:
    def __init__(self, seed: int, root: Path, out: Path) -> None:
        self.seed, self.root, self.out = seed, root, out
        self.rng = random.Random(seed)
        self.base = base_files()
        self.tree = dict(self.base)
        self.n = 0
        self.script: list[dict[str, Any]] = []
        self.before: dict[int, list[UserWrite]] = {}
        self.during: dict[int, list[UserWrite]] = {}
        self.after: list[UserWrite] = []
        self.agent_paths: set[str] = set()
        self.moves: list[tuple[str, str]] = []
        self.calls = 0
        self.slow: dict[int, bool] = {}

    # tokens ---------------------------------------------------------------------------
    def _line(self, who: str) -> str:
        self.n += 1
        words = " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(2, 5)))
        return f"# {who} {self.seed}.{self.n}: {words}"

    def _abs(self, rel: str) -> str:
        return str(self.root / rel)

    # choosing -------------------------------------------------------------------------
    def _files(self) -> list[str]:
        return sorted(self.tree)

    def _pick_file(self, prefer_agent: bool) -> str:
        touched = sorted(p for p in self.agent_paths if p in self.tree)
        if prefer_agent and touched:
            return self.rng.choice(touched)
        return self.rng.choice(self._files())

    def _unique_lines(self, text: str) -> list[int]:
        lines = text.split("\n")[:-1]
        return [i for i, line in enumerate(lines)
                if len(line.strip()) >= 6 and line == line.rstrip()
                and text.count(line) == 1]

    # the person -----------------------------------------------------------------------
    def _user_write(self, when: str, avoid: set[str]) -> UserWrite:
        rng = self.rng
        kind = rng.choices(["insert", "change", "delete", "create"], [4, 3, 2, 1])[0]
        candidates = [p for p in self._files() if p not in avoid]
        if kind == "create" or not candidates:
            d = rng.choice(["src/click", "scratch", "docs/notes"])
            path = f"{d}/user_{self.seed}_{self.n + 1}.txt"
            after = "".join(self._line("user") + "\n" for _ in range(rng.randint(1, 4)))
            return self._apply_user(UserWrite(path, None, after, when))
        touched = [p for p in self.agent_paths if p in self.tree and p not in avoid]
        path = rng.choice(sorted(touched)) if touched and rng.random() < 0.5 \
            else rng.choice(candidates)
        text = self.tree[path]
        lines = text.split("\n")[:-1]
        unique = self._unique_lines(text)
        if kind in ("change", "delete") and not unique:
            kind = "insert"
        if kind == "insert":
            at = rng.randint(0, len(lines))
            lines[at:at] = [self._line("user") for _ in range(rng.randint(1, 3))]
        elif kind == "change":
            i = rng.choice(unique)
            lines[i] = self._line("user")
        else:
            i = rng.choice(unique)
            del lines[i]
        after = "".join(line + "\n" for line in lines)
        return self._apply_user(UserWrite(path, text, after, when, rename=rng.random() < 0.2))

    def _apply_user(self, w: UserWrite) -> UserWrite:
        if w.after is None:
            self.tree.pop(w.path, None)
        else:
            self.tree[w.path] = w.after
        return w

    # the agent ------------------------------------------------------------------------
    def _wrote(self, *paths: str) -> None:
        self.agent_paths.update(paths)

    def _read(self, path: str) -> dict[str, Any]:
        self.calls += 1
        return {"name": "Read", "input": {"file_path": self._abs(path)}}

    def _bash(self, command: str) -> dict[str, Any]:
        self.calls += 1
        return {"name": "Bash", "input": {"command": command, "description": "scripted step"}}

    def _edit(self, path: str) -> list[dict[str, Any]] | None:
        text = self.tree[path]
        unique = self._unique_lines(text)
        if not unique:
            return None
        old = text.split("\n")[self.rng.choice(unique)]
        mine = self._line("agent")
        new = self.rng.choice([f"{old}\n{mine}", f"{mine}\n{old}", mine])
        self.tree[path] = text.replace(old, new, 1)
        self._wrote(path)
        self.calls += 1
        return [self._read(path), {"name": "Edit", "input": {
            "file_path": self._abs(path), "old_string": old, "new_string": new,
            "replace_all": False}}]

    def _write(self, path: str) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        if path in self.tree:
            tools.append(self._read(path))
            lines = self.tree[path].split("\n")[:-1]
            at = self.rng.randint(0, max(0, len(lines) - 3))
            lines[at:at + self.rng.randint(0, 3)] = [self._line("agent")
                                                      for _ in range(self.rng.randint(1, 3))]
            content = "".join(line + "\n" for line in lines)
        else:
            content = "".join(self._line("agent") + "\n"
                              for _ in range(self.rng.randint(2, 6)))
        self.tree[path] = content
        self._wrote(path)
        self.calls += 1
        tools.append({"name": "Write", "input": {"file_path": self._abs(path),
                                                 "content": content}})
        return tools

    def _sed(self, path: str) -> str | None:
        lines = self.tree[path].split("\n")[:-1]
        if not lines:
            return None
        i = self.rng.randrange(len(lines))
        if self.rng.random() < 0.5:
            tag = f"  # agent {self.seed}.{self.n + 1}"
            self.n += 1
            lines[i] += tag
            command = f"sed -i '{i + 1}s/$/{tag}/' {shlex.quote(path)}"
        else:
            del lines[i]
            command = f"sed -i '{i + 1}d' {shlex.quote(path)}"
        self.tree[path] = "".join(line + "\n" for line in lines)
        self._wrote(path)
        return command

    def _append(self, path: str) -> str:
        line = self._line("agent")
        self.tree[path] = self.tree.get(path, "") + line + "\n"
        self._wrote(path)
        return f"echo {shlex.quote(line)} >> {shlex.quote(path)}"

    def _new_name(self, d: str | None = None) -> str:
        """A new path in an existing directory (`echo >` and `mv` create no directory)."""
        self.n += 1
        d = self.rng.choice(["src/click", "notes"]) if d is None else d
        return f"{d}/agent_{self.seed}_{self.n}.py" if d else f"agent_{self.seed}_{self.n}.py"

    def _shell_write(self) -> str | None:
        """One file-changing shell command, applied to the plan."""
        rng = self.rng
        kind = rng.choices(["sed", "append", "create", "mv", "rm"], [4, 4, 2, 2, 1])[0]
        path = self._pick_file(prefer_agent=rng.random() < 0.3)
        if kind == "sed":
            return self._sed(path)
        if kind == "append":
            return self._append(path)
        if kind == "create":
            new = self._new_name("src/click")
            line = self._line("agent")
            self.tree[new] = line + "\n"
            self._wrote(new)
            return f"echo {shlex.quote(line)} > {shlex.quote(new)}"
        if kind == "mv":
            new = self._new_name(os.path.dirname(path))
            self.tree[new] = self.tree.pop(path)
            self.moves.append((path, new))
            self._wrote(path, new)
            return f"mv {shlex.quote(path)} {shlex.quote(new)}"
        if path in self.base and sum(p in self.tree for p in self.base) <= 4:
            return self._append(path)      # keep most of the real files around
        del self.tree[path]
        self._wrote(path)
        return f"rm {shlex.quote(path)}"

    def _step_tools(self, k: int) -> list[dict[str, Any]]:
        rng = self.rng
        kind = rng.choices(["edit", "write", "write_new", "shell", "batch", "slow", "read"],
                           [5, 2, 1, 5, 3, 2, 1])[0]
        if kind == "slow":
            return self._slow(k)
        if kind == "batch":
            tools: list[dict[str, Any]] = []
            for _ in range(rng.randint(2, 3)):
                tools += self._single(rng.choice(["edit", "write_new", "shell", "read"]))
            return tools
        return self._single(kind)

    def _single(self, kind: str) -> list[dict[str, Any]]:
        if kind == "edit":
            found = self._edit(self._pick_file(prefer_agent=self.rng.random() < 0.4))
            if found:
                return found
            kind = "shell"
        if kind == "write":
            return self._write(self._pick_file(prefer_agent=self.rng.random() < 0.4))
        if kind == "write_new":
            return self._write(self._new_name())
        if kind == "read":
            return [self._read(self._pick_file(prefer_agent=False))]
        command = self._shell_write()
        while command is None:
            command = self._shell_write()
        return [self._bash(command)]

    def _slow(self, k: int) -> list[dict[str, Any]]:
        """A command that waits until the person has written (a marker outside the repo),
        then changes a file; the person writes other paths while it waits."""
        predictable = self.rng.random() < 0.6
        self.slow[k] = predictable
        out = shlex.quote(str(self.out))
        if predictable:
            wait = (f"touch {out}/started-{k}; while [ ! -e {out}/go-{k} ]; "
                    f"do sleep 0.05; done")
        else:
            wait = f"sh {out}/wait.sh {k}"
        # the person's writes happen before the command's own write
        target = self._pick_file(prefer_agent=self.rng.random() < 0.3)
        writes = [self._user_write(f"during {k}", avoid={target})
                  for _ in range(self.rng.randint(1, 2))]
        self.during[k] = writes
        if target not in self.tree:          # a write above cannot remove it, but be sure
            target = self._pick_file(prefer_agent=False)
        change = self._sed(target) if self.rng.random() < 0.5 else None
        return [self._bash(f"{wait}; {change or self._append(target)}")]

    def build(self, steps: int) -> Plan:
        rng = self.rng
        for k in range(steps):
            if rng.random() < 0.45:
                self.before[k] = [self._user_write(f"before {k}", set())
                                  for _ in range(rng.randint(1, 2))]
            step: dict[str, Any] = {"tools": self._step_tools(k)}
            if k in self.before:
                step["pause"] = f"s{k}"
            self.script.append(step)
        self.script.append({"text": "done"})
        self.after = [self._user_write("after", set()) for _ in range(rng.randint(1, 3))]
        return Plan(self.seed, self.script, self.before, self.during, self.after,
                    dict(self.tree), self.base, self.agent_paths, self.moves, self.calls,
                    self.slow)


def plan(seed: int, root: Path, out: Path, steps: int = 20) -> Plan:
    return _Planner(seed, root, out).build(steps)


WAIT_SH = """#!/bin/sh
# the unpredictable slow command: a script (its writes cannot be read from its words)
touch "$(dirname "$0")/started-$1"
while [ ! -e "$(dirname "$0")/go-$1" ]; do sleep 0.05; done
"""


# --- replay -----------------------------------------------------------------------------

def apply_user(root: Path, w: UserWrite) -> str | None:
    """Make the person's write; the divergence, if the file is not as planned."""
    path = root / w.path
    now = path.read_text() if path.exists() else None
    if now != w.before:
        return f"{w.when}: {w.path} is not as planned before the person's write"
    if w.after is None:
        path.unlink()
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    if w.rename:
        tmp = path.parent / f".{path.name}.swp"
        tmp.write_text(w.after)
        os.replace(tmp, path)
    else:
        path.write_text(w.after)
    return None


def wait_for(path: Path, what: str, timeout: float = 180.0) -> None:
    """Wait for a condition (the marker a command creates), not for a guessed time."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: {path} never appeared")
        time.sleep(0.02)


def tree(root: Path) -> dict[str, tuple[bytes, bool]]:
    """Every file of the working tree but .git: bytes and exec bit."""
    out: dict[str, tuple[bytes, bool]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = (p.read_bytes(), os.access(p, os.X_OK))
    return out


def git_state(root: Path, env: dict[str, str]) -> dict[str, str]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, env=env, text=True,
                              capture_output=True).stdout

    index = root / ".git" / "index"
    return {"HEAD": git("rev-parse", "HEAD"), "symbolic": git("symbolic-ref", "-q", "HEAD"),
            "refs": git("for-each-ref", "refs/heads", "refs/tags", "refs/stash"),
            "stash": git("stash", "list"),
            "index": index.read_bytes().hex() if index.exists() else ""}


def fsck_clean(root: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(["git", "fsck", "--no-progress"], cwd=root, env=env, text=True,
                          capture_output=True)
    return "" if proc.returncode == 0 else f"git fsck -> {proc.returncode}: {proc.stderr}"


def _lines(text: str | None) -> Counter[str]:
    return Counter((text or "").split("\n")[:-1] if text else [])


def _text(blob: tuple[bytes, bool] | None) -> str:
    return blob[0].decode("utf-8", "surrogateescape") if blob else ""


def _outside_markers(text: str) -> str:
    """The file without its conflict-marked regions (a 5-exit merge's markers)."""
    out, inside = [], False
    for line in text.split("\n"):
        if line.startswith("<<<<<<< "):
            inside = True
        elif line.startswith(">>>>>>> "):
            inside = False
        elif not inside:
            out.append(line)
    return "\n".join(out)


@dataclass
class Counts:
    seed: int
    calls: int = 0
    user_writes: int = 0
    user_writes_during: int = 0
    user_writes_on_agent_paths: int = 0
    user_lines: int = 0
    user_lines_lost: int = 0
    user_lines_lost_moved: int = 0          # at an agent mv's destination (issue 31, item 4)
    user_lines_lost_merge: int = 0
    user_lines_window_reverted: int = 0     # written inside an unpredictable command's window
    user_lines_window_merged: int = 0
    user_lines_agent_removed: int = 0       # not user lines: an agent call removed them
    user_lines_agent_removed_back: int = 0  # ... and the rollback or a merge put them back
    user_deleted: int = 0
    user_deleted_back: int = 0
    user_deleted_back_merge: int = 0
    user_deleted_window_back: int = 0
    agent_only: int = 0
    agent_only_leftovers: int = 0
    window_reverted: int = 0
    conflicts: int = 0
    merged: int = 0
    merge_exit5: int = 0
    merge_refused: int = 0
    merge_errors: list[str] = field(default_factory=list)
    undo_exact: bool = False
    git_untouched: bool = False
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)


def check(seed: int, repo: Any, p: Plan) -> Counts:
    """After the session: rollback, merges, undo, and every count (see the docstring)."""
    c = Counts(seed, calls=p.calls)
    writes = p.user_writes()
    c.user_writes = len(writes)
    c.user_writes_during = sum(len(v) for v in p.during.values())
    user_paths = {w.path for w in writes}
    c.user_writes_on_agent_paths = sum(w.path in p.agent_paths for w in writes)
    fail = c.failures.append
    root, env = repo.root, repo.env

    pre = tree(root)
    planned = {k: (v.encode(), False) for k, v in p.expected.items()}
    for rel in set(planned) | {r for r in pre if not r.startswith(".claude/")}:
        if pre.get(rel, (None,))[0] != planned.get(rel, (None,))[0]:
            fail(f"harness: before the rollback {rel} is not as planned (a tool call failed?)")
    if c.failures:
        return c
    git_before = git_state(root, env)

    # user lines and user-deleted lines, from the record alone
    added: set[str] = set()
    deleted: dict[str, set[str]] = {}
    claimed: set[str] = set()             # added or deleted inside an unpredictable window
    user_gone: set[str] = set()
    for w in writes:
        gone = _lines(w.before) - _lines(w.after)
        user_gone |= set(gone)
        new = set(_lines(w.after) - _lines(w.before))
        added |= new
        deleted.setdefault(w.path, set()).update(gone)
        deleted[w.path] -= set(_lines(w.after))
        if w.when.startswith("during ") and not p.slow[int(w.when.split()[1])]:
            claimed |= new | set(gone)
    pre_where = {line: rel for rel, blob in pre.items() for line in _text(blob).split("\n")}
    user_lines = {line: pre_where[line] for line in added if line in pre_where}
    user_deleted = {(rel, line) for rel, lines in deleted.items() for line in lines
                    if line not in _text(pre.get(rel)).split("\n")}
    c.user_lines, c.user_deleted = len(user_lines), len(user_deleted)
    # not counted as user lines: those an agent call removed (rm, mv, a Write, sed) before
    # the rollback; how many of them the rollback and the merges bring back is told apart
    agent_removed = {line for line in added if line not in pre_where and line not in user_gone}
    c.user_lines_agent_removed = len(agent_removed)
    tainted = set(user_paths)
    for src, dst in p.moves:
        if src in user_paths or dst in user_paths:
            tainted |= {src, dst}
    agent_only = sorted(p.agent_paths - tainted)
    c.agent_only = len(agent_only)

    first = repo.gg_json("checkpoints")[0]["checkpointId"]
    proc = repo.gitguard("rollback-files", "--to", first, "--json", check=False)
    if proc.returncode not in (0, 5):
        fail(f"rollback-files --to {first} -> {proc.returncode}: {proc.stderr[-2000:]}")
        return c
    result = json.loads(proc.stdout)
    safety = result["safetyCheckpointId"]
    window = {r["path"] for r in result["windowReverted"]}
    c.window_reverted = len(window)
    c.conflicts = len(result["conflicts"])

    def all_text(t: dict[str, tuple[bytes, bool]]) -> set[str]:
        return {line for blob in t.values() for line in _text(blob).split("\n")}

    rolled = tree(root)
    moved_to = {dst for _, dst in p.moves}
    present = all_text(rolled)
    for line, rel in sorted(user_lines.items()):
        if line not in present:
            if line in claimed and rel in window:
                c.user_lines_window_reverted += 1
            elif line in claimed:
                c.user_lines_lost += 1
                fail(f"rollback took a user line written during a command's window from {rel} "
                     f"and did not list the path in windowReverted: {line!r}")
            elif rel in moved_to:
                c.user_lines_lost_moved += 1
                fail(f"rollback lost a user line of {rel} (where an agent mv put it): "
                     f"{line!r}")
            else:
                c.user_lines_lost += 1
                fail(f"rollback lost a user line of {rel}: {line!r}")
    for rel, line in sorted(user_deleted):
        if line in _text(rolled.get(rel)).split("\n"):
            if line in claimed and rel in window:
                c.user_deleted_window_back += 1
            else:
                c.user_deleted_back += 1
                fail(f"rollback brought back a line the user deleted from {rel}: {line!r}")
    conflicted = {x["path"] for x in result["conflicts"]}

    # every pending conflict: --merge
    merged_exit0: set[str] = set()
    for item in repo.gg_json("conflicts"):
        if item.get("resolution") != "pending":
            continue
        m = repo.gitguard("conflicts", "resolve", item["path"], "--merge", check=False)
        if m.returncode == 0:
            c.merged += 1
            merged_exit0.add(item["path"])
        elif m.returncode == 5 and "Error:" not in m.stderr:
            c.merge_exit5 += 1                  # written, with marked regions
        else:
            c.merge_refused += 1                # nothing written, the conflict stays
            c.merge_errors.append(f"{item['path']} -> {m.returncode}: "
                                  f"{m.stderr.strip().splitlines()[:1]}")
    merged = tree(root)
    present_merged = all_text(merged)
    for line, rel in sorted(user_lines.items()):
        if line in present and line not in present_merged:    # the rollback had kept it
            if line in claimed:
                c.user_lines_window_merged += 1
            else:
                c.user_lines_lost_merge += 1
                fail(f"--merge dropped a user line of {rel}: {line!r}")
    c.user_lines_agent_removed_back = len(agent_removed & present_merged)
    for rel, line in sorted(user_deleted):
        text = _text(merged.get(rel))
        if rel not in merged_exit0 and rel in conflicted:
            text = _outside_markers(text)
        if line in text.split("\n") and line not in _text(rolled.get(rel)).split("\n"):
            if line in claimed:
                c.user_deleted_window_back += 1
            else:
                c.user_deleted_back_merge += 1
                fail(f"--merge brought back a line the user deleted from {rel}: {line!r}")
    for rel in agent_only:
        want = p.base.get(rel)
        have = merged.get(rel)
        if (have[0] if have else None) != (want.encode() if want is not None else None):
            c.agent_only_leftovers += 1
            state = "conflict" if rel in conflicted else "not a conflict"
            fail(f"agent-only {rel} is not back to its base ({state})")

    after_merge = git_state(root, env)
    undo = repo.gitguard("rollback-files", "--to", safety, "--json", check=False)
    back = tree(root)
    undone = json.loads(undo.stdout) if undo.returncode in (0, 5) else {}
    # exit 5 says conflicts are pending (the merges that left markers); the undo adds none
    if undo.returncode not in (0, 5) or undone.get("conflicts"):
        fail(f"the undo (rollback-files --to {safety}) -> {undo.returncode}: "
             f"{undo.stdout[-1500:]} {undo.stderr[-1500:]}")
    diff = sorted(r for r in set(pre) | set(back) if pre.get(r) != back.get(r))
    c.undo_exact = not diff
    if diff:
        fail(f"the undo is not byte-exact: {diff[:10]}")
    states = {"after the rollback+merges": after_merge, "after the undo": git_state(root, env)}
    c.git_untouched = True
    for when, now in states.items():
        for key in git_before:
            if now[key] != git_before[key]:
                c.git_untouched = False
                fail(f"{key} changed ({when})")
    if bad := fsck_clean(root, env):
        c.git_untouched = False
        fail(bad)
    return c


def run(seed: int, repo: Any) -> Counts:
    """Replay the seed's session through the real CLI, then check it."""
    from e2e.harness import claude_start

    started = time.monotonic()
    out = repo.home / "soak"
    out.mkdir()
    (out / "wait.sh").write_text(WAIT_SH)
    p = plan(seed, repo.root, out)
    live = claude_start(repo, f"soak seed {seed}", p.script)
    diverged: list[str] = []
    try:
        for k in range(len(p.script)):
            if k in p.before:
                repo.server.wait_paused(f"s{k}", timeout=300)
                diverged += [d for w in p.before[k] if (d := apply_user(repo.root, w))]
                repo.server.release(f"s{k}")
            if k in p.during:
                wait_for(out / f"started-{k}", f"slow step {k}")
                diverged += [d for w in p.during[k] if (d := apply_user(repo.root, w))]
                (out / f"go-{k}").touch()
    finally:
        for k in p.before:
            repo.server.release(f"s{k}")
        for k in p.during:
            (out / f"go-{k}").touch()
    session = live.finish(timeout=600)
    c = Counts(seed)
    if session.returncode != 0:
        c.failures.append(f"claude -> {session.returncode}: {session.stderr[-2000:]}")
    if session.hook_failures():
        c.failures.append(f"hook failures: {session.hook_failures()[:3]}")
    if repo.hook_errors():
        c.failures.append(f"hook errors: {repo.hook_errors()[-2000:]}")
    errors = [r for r in session.tool_results() if r.get("is_error")]
    if errors:
        c.failures.append(f"harness: tool calls failed: {errors[:3]}")
    diverged += [d for w in p.after if (d := apply_user(repo.root, w))]
    if diverged:
        c.failures.append(f"harness: {diverged[:3]}")
    if not c.failures:
        c = check(seed, repo, p)
    c.seconds = round(time.monotonic() - started, 1)
    return c


def log(c: Counts) -> None:
    path = os.environ.get("GITGUARD_SOAK_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(c.__dict__) + "\n")


def summary(path: str) -> str:
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    total: dict[str, float] = {}
    for r in rows:
        for k, v in r.items():
            if isinstance(v, bool | int | float) and k != "seed":
                total[k] = total.get(k, 0) + v
    failed = sorted(r["seed"] for r in rows if r["failures"])
    secs = sorted(r["seconds"] for r in rows)
    lines = [f"{len(rows)} seeds, {len(failed)} failed: {failed}"]
    lines += [f"  {k}: {round(v, 1)}" for k, v in total.items() if k != "seconds"]
    if secs:
        lines.append(f"  seconds per seed: median {secs[len(secs) // 2]}, max {secs[-1]}, "
                     f"sum {round(sum(secs))}")
    for r in rows:
        if r["failures"]:
            lines.append(f"  seed {r['seed']}: {r['failures'][0][:160]}")
            lines.append(f"    {REPRO.format(seed=r['seed'])}")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["summary"]:
        print(summary(sys.argv[2]))
