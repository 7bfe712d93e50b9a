"""Deterministic benchmark repositories, generated once and copied per case.

A repository of size N has N tracked files (2-8 KB of code-like text) in nested
directories of about 20 files each, a `.gitignore` ignoring `build/` and
`*.log` with such files present, and a few untracked files. It has one commit
with a pinned author and date and a packed object store, like a real clone.
The cache lives in `.bench/repos/<size>`; cases only ever see a fresh copy,
and a cache found modified (someone used it in place) is generated again.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from bench.shell import FIXED_EPOCH, GIT, git, isolated_env, run

GENERATOR_VERSION = 1
SIZES: dict[str, int] = {"1k": 1_000, "20k": 20_000, "100k": 100_000}
GITIGNORE = "build/\n*.log\n"

_TOP = ["src", "lib", "tests", "docs", "tools", "services"]
_WORDS = [
    "core", "api", "utils", "models", "handlers", "storage", "net", "auth", "cache",
    "config", "events", "jobs", "parser", "render", "schema", "search", "sync", "ui",
]
_EXTS = [".py", ".py", ".py", ".ts", ".ts", ".go", ".rs", ".c", ".md", ".toml"]
_FANOUT = 6


@dataclass(frozen=True)
class RepoInfo:
    size: str
    path: Path
    tracked: int
    ignored: int
    untracked: int
    head: str
    generated_seconds: float  # time the generation took when the cache was built
    why: str  # "cached", or why this run generated it


def repos_root(base: Path) -> Path:
    return base / ".bench" / "repos"


def ensure_repo(base: Path, size: str) -> RepoInfo:
    """The cached repository of `size`, generated if missing or outdated."""
    root = repos_root(base.resolve())
    path, stamp = root / size, root / f"{size}.json"
    why = "no cache"
    if path.is_dir() and stamp.is_file():
        meta = json.loads(stamp.read_text())
        if meta.get("version") != GENERATOR_VERSION:
            why = "generator changed"
        elif "digest" not in meta:
            why = "the cache's stamp has no digest (older generator)"
        elif meta.get("digest") != tree_digest(path):
            why = "the cache was modified since it was generated"
        else:
            return _info(size, path, meta, why="cached")
    root.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(path, ignore_errors=True)
    staging = root / f"{size}.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    start = time.perf_counter()
    counts = _generate(staging, SIZES[size])
    head = git(staging, "rev-parse", "HEAD").decode().strip()
    meta = {"version": GENERATOR_VERSION, **counts, "head": head,
            "seconds": round(time.perf_counter() - start, 2), "digest": tree_digest(staging)}
    # Renaming last means an interrupted generation never looks like a cache.
    try:
        staging.rename(path)
    except OSError:
        if not path.is_dir():
            raise
        shutil.rmtree(staging)  # another run generated it meanwhile: same bytes
    stamp.write_text(json.dumps(meta, indent=2) + "\n")
    return _info(size, path, meta, why=f"generated now: {why}")


def _info(size: str, path: Path, meta: dict[str, object], why: str) -> RepoInfo:
    def num(key: str) -> int:
        value = meta[key]
        assert isinstance(value, int)
        return value

    seconds = meta["seconds"]
    assert isinstance(seconds, int | float)
    return RepoInfo(size=size, path=path, tracked=num("tracked"), ignored=num("ignored"),
                    untracked=num("untracked"), head=str(meta["head"]),
                    generated_seconds=float(seconds), why=why)


def copy_repo(info: RepoInfo, dest: Path) -> Path:
    """A private copy of the cached repository, with a refreshed index.

    `cp -a` keeps contents, modes and mtimes, so the working tree is identical
    (tracked, untracked and ignored files). Inode numbers and ctimes change,
    which would make the first git command re-hash every file; refreshing the
    index here puts the copy in the steady state a user's repository is in.
    The copy's dirty pages (~850 MB at 100k files) are flushed before any row
    measures: otherwise their writeback runs during the measured calls and every
    fsync, create and rename waits behind it (a daemon row measured 34.5 ms per
    call straight after the copy and 26.3 ms in the next run). A user's repository
    was not just written in full.
    """
    run(["cp", "-a", str(info.path), str(dest)], cwd=info.path.parent)
    git(dest, "update-index", "-q", "--refresh")
    os.sync()
    return dest


def tree_digest(root: Path) -> str:
    """A digest of every file's path, size, mode and mtime, `.git` included.

    Any git command that writes, any gitguard store, any edit changes it: a
    cache that someone used in place is detected and generated again.
    """
    manifest = sorted(worktree_manifest(root, include_git=True).items())
    return hashlib.sha256(repr(manifest).encode()).hexdigest()


def worktree_manifest(
    root: Path, include_git: bool = False
) -> dict[str, tuple[int, int, int]]:
    """path -> (size, mode, mtime_ns) for every file (outside `.git` by default)."""
    found: dict[str, tuple[int, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath == str(root) and not include_git:
            dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            found[os.path.relpath(full, root)] = (st.st_size, st.st_mode, st.st_mtime_ns)
    return found


def _generate(repo: Path, n_files: int) -> dict[str, int]:
    rng = random.Random(f"gitguard-bench-{n_files}")
    corpus = _corpus(random.Random("gitguard-bench-corpus"))
    dirs = _dir_paths(n_files)
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    tracked = _commit_tracked(repo, n_files, dirs, corpus, rng)
    git(repo, "read-tree", "HEAD")
    git(repo, "update-index", "-q", "--refresh")
    ignored = _write_ignored(repo, n_files, dirs, corpus, rng)
    untracked = ["NOTES.md", "src/scratch.py", "tools/try_me.sh", "tests/new_test_wip.py",
                 "docs/draft.md"]
    for rel in untracked:
        _write(repo / rel, _content(rel, corpus, rng))
    return {"tracked": tracked, "ignored": ignored, "untracked": len(untracked)}


def _commit_tracked(
    repo: Path, n_files: int, dirs: list[str], corpus: str, rng: random.Random
) -> int:
    """Write the tracked files and commit them; returns how many there are.

    `git add -A` plus a repack cost about 15 s per 20k files here; streaming
    each file into fast-import as it is written packs them all in one pass
    (and gives the same commit id as `git add -A && git commit` would).
    """
    importer = subprocess.Popen(
        [*GIT, "fast-import", "--quiet", "--done", "--depth=0"],
        cwd=repo, env=isolated_env(), stdin=subprocess.PIPE, bufsize=1 << 20,
    )
    assert importer.stdin is not None
    stream = importer.stdin
    message = f"Initial import ({n_files} files)\n".encode()
    who = b"Bench Author <bench@example.invalid> %d +0000\n" % FIXED_EPOCH
    stream.write(b"commit refs/heads/main\nauthor " + who + b"committer " + who)
    stream.write(b"data %d\n%s" % (len(message), message))

    def add(rel: str, text: str) -> None:
        data = text.encode()
        _write(repo / rel, data)
        stream.write(b"M 100644 inline %s\ndata %d\n%s\n" % (rel.encode(), len(data), data))

    add(".gitignore", GITIGNORE)
    tracked = 1
    for d in dirs:
        if tracked >= n_files:
            break
        for _ in range(min(rng.randint(15, 25), n_files - tracked)):
            rel = f"{d}/{rng.choice(_WORDS)}_{tracked}{rng.choice(_EXTS)}"
            add(rel, _content(rel, corpus, rng))
            tracked += 1
    stream.write(b"\ndone\n")
    stream.close()
    if importer.wait() != 0:
        raise RuntimeError(f"git fast-import exited {importer.returncode} in {repo}")
    return tracked


def _write_ignored(
    repo: Path, n_files: int, dirs: list[str], corpus: str, rng: random.Random
) -> int:
    """A `build/` tree and `*.log` files scattered in the source directories."""
    count = 0
    for i in range(max(10, n_files // 100)):
        rel = f"build/{_WORDS[i % len(_WORDS)]}/out_{i}.o.txt"
        _write(repo / rel, _content(rel, corpus, rng))
        count += 1
    for i in range(max(3, n_files // 500)):
        rel = f"{dirs[rng.randrange(min(len(dirs), n_files // 20 + 1))]}/debug_{i}.log"
        if (repo / rel).parent.is_dir():
            _write(repo / rel, _content(rel, corpus, rng))
            count += 1
    return count


def _dir_paths(n_files: int) -> list[str]:
    """Directories in breadth-first order: a tree with fan-out 6 under 6 roots."""
    wanted = n_files // 15 + 2  # enough even if every directory drew 15 files
    paths = list(_TOP)
    i = 0
    while len(paths) < wanted:
        parent = paths[i]
        offset = len(parent)  # varies the names from one parent to the next
        paths.extend(f"{parent}/{_WORDS[(j + offset) % len(_WORDS)]}" for j in range(_FANOUT))
        i += 1
    return paths[:wanted]


def _write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    # A fixed mtime in the past: deterministic, and never "racily clean".
    os.utime(path, (FIXED_EPOCH, FIXED_EPOCH))


def _content(rel: str, corpus: str, rng: random.Random) -> str:
    """2-8 KB: a unique header, then a slice of the corpus cut at line ends."""
    size = rng.randint(2048, 8192)
    start = corpus.index("\n", rng.randrange(len(corpus) - 10_000)) + 1
    end = corpus.index("\n", start + size - 80) + 1
    return f"# {rel}\n# part {start}\n{corpus[start:end]}"


def _corpus(rng: random.Random) -> str:
    """About 2 MB of Python-like lines built from a small vocabulary."""
    names = [f"{a}_{b}" for a in _WORDS for b in ("id", "data", "value", "items", "ctx", "obj")]
    classes = [w.capitalize() + s for w in _WORDS for s in ("Service", "Store", "Error")]
    templates = [
        "def {n}({m}, {k}):",
        "    {n} = {m}.{k}({o}, {i})",
        "    return {n}({m}) + {i}",
        "    if {n} is None:",
        "        raise {C}(\"{n} missing for {m}\")",
        "    for {n} in {m}.{k}:",
        "        {n}.append({m}[{i}])",
        "class {C}({D}):",
        "    \"\"\"{C} keeps {n} and {m} in sync.\"\"\"",
        "# {n}: {m} {k} {i}",
        "import {n}.{m}",
        "",
    ]
    lines: list[str] = []
    total = 0
    while total < 2_000_000:
        batch = [
            rng.choice(templates).format(
                n=rng.choice(names), m=rng.choice(names), k=rng.choice(names),
                o=rng.choice(names), i=rng.randrange(1000), C=rng.choice(classes),
                D=rng.choice(classes),
            )
            for _ in range(1000)
        ]
        lines.extend(batch)
        total += sum(map(len, batch)) + len(batch)
    return "\n".join(lines) + "\n"
