"""workspace.safe_relpath works on strings now; it must answer exactly as the pathlib
version did (kept here as the reference): the same relative path, or the same refusal
with the same message, for odd spellings, escapes and symlinked parents."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gitguard.errors import UnsafePath
from gitguard.workspace import NON_GIT_STORE, Workspace, discover, safe_relpath


def reference(ws: Workspace, path: str | os.PathLike[str]) -> str:
    """The pathlib version safe_relpath replaced."""
    raw = os.fspath(path)
    if not raw:
        raise UnsafePath("an empty path is not a workspace file",
                         "name a file inside the workspace")
    candidate = Path(raw)
    absolute = candidate if candidate.is_absolute() else ws.root / candidate
    normal = Path(os.path.normpath(absolute))
    try:
        rel = normal.relative_to(ws.root)
    except ValueError:
        raise UnsafePath(f"{raw} is outside the workspace {ws.root}",
                         "gitguard only reads and writes files inside the workspace") from None
    if not rel.parts:
        raise UnsafePath(f"{raw} is the workspace itself, not a file in it",
                         "name a file inside the workspace")
    if rel.parts[0] in (".git", NON_GIT_STORE):
        raise UnsafePath(f"{raw} is inside gitguard's or git's own store",
                         "gitguard never writes there on an agent's behalf")
    parent = ws.root
    for part in rel.parts[:-1]:
        parent = parent / part
        if parent.is_symlink():
            try:
                target = parent.resolve()
            except RuntimeError:    # a loop: an error with a hint, never a traceback
                raise UnsafePath(f"{raw} goes through {parent}, a symlink that leads nowhere "
                                 "(a loop, or a path the system cannot follow)",
                                 "fix or remove that symlink; gitguard never follows it"
                                 ) from None
            if target != ws.root and ws.root not in target.parents:
                raise UnsafePath(f"{raw} goes through the symlink {parent} out of the workspace",
                                 "gitguard never follows a link out of the workspace")
    return rel.as_posix()


def answer(check: object, ws: Workspace, path: str | os.PathLike[str]) -> tuple[str, str]:
    try:
        return "ok", check(ws, path)  # type: ignore[operator]
    except UnsafePath as exc:
        return "refused", f"{exc.message} | {exc.hint}"
    except (RuntimeError, OSError, ValueError) as exc:
        return type(exc).__name__, str(exc)


def test_strings_answer_as_pathlib_did(repo: Path, tmp_path: Path) -> None:
    ws = discover(repo)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (repo / "src" / "deep" / "er").mkdir(parents=True)
    (repo / "out").symlink_to(outside)
    (repo / "in").symlink_to(repo / "src")
    (repo / "src" / "up").symlink_to(repo)
    (repo / "loop").symlink_to(repo / "loop")
    odd = b"caf\xe9".decode("utf-8", "surrogateescape")
    root = str(ws.root)
    paths = [
        "", ".", "./", "src/app.py", "src//app.py", "src/./app.py", "src/app.py/",
        "src/deep/er/x.py", "src/deep/../app.py", "../x", "src/../../x", "a/b/../../..",
        ".git", ".git/config", "./.git/HEAD", f"{NON_GIT_STORE}/x", "src/.git/x",
        "out/f.txt", "out", "in/app.py", "src/up/README.md", "src/up/out/f", "loop/x",
        "missing/dir/file", f"{odd}/{odd}.txt", "nul\0byte/x", "new file with spaces.txt",
        root, root + "/", root + "/src/app.py", root + "//src/app.py", "/" + root + "/x",
        "//" + root.lstrip("/") + "/x", "///" + root.lstrip("/") + "/x", root + "/../x",
        root + "x/y", str(outside / "f"), "/", "/etc/passwd",
    ]
    for path in paths:
        assert answer(safe_relpath, ws, path) == answer(reference, ws, path), repr(path)
        assert answer(safe_relpath, ws, Path(path) if path else path) == \
            answer(reference, ws, Path(path) if path else path), repr(path)


def test_it_refuses_an_escape(repo: Path) -> None:
    with pytest.raises(UnsafePath, match="outside the workspace"):
        safe_relpath(discover(repo), "../x")
