"""The package's import graph has no cycle, counting every import a module can run.

A function-local import still ties two modules together at run time; only imports under
`if TYPE_CHECKING:` (never executed) are left out. `make check` runs this file, so a
cycle fails the build before review (tests/test_no_patches.py checks for stand-in
modules and compiler calls). It also keeps the `Guard` facade out of the layers below it.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "gitguard"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _run_time_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except the bodies of `if TYPE_CHECKING:`."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def imported(path: Path, modules: set[str], name: str | None = None, *,
             type_checking: bool = False) -> set[str]:
    """The package modules `path` (module `name`) imports at run time, module-level or
    local; with `type_checking`, those under `if TYPE_CHECKING:` too."""
    name = name or module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree) if type_checking else _run_time_nodes(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import mod` imports pkg.mod when that is a module, else pkg.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    # The edges the source spells. (Importing pkg.mod also runs pkg/__init__.py first; a
    # package __init__ that re-exports its modules would make every module a cycle with
    # it, so those implicit edges are left out, as in the count.)
    return {module_name(p): imported(p, modules) for p in paths}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _cycle_path(edges: dict[str, set[str]], component: list[str]) -> str:
    """One concrete loop inside a component, for the failure message."""
    members = set(component)
    start = component[0]
    path, seen, node = [start], {start}, start
    while True:
        node = sorted(edges[node] & members)[0]
        if node in seen:
            return " -> ".join(path[path.index(node):] + [node])
        path.append(node)
        seen.add(node)


def test_the_package_has_no_import_cycle() -> None:
    edges = graph()
    found = cycles(edges)
    assert not found, "import cycles (local imports count):\n" + "\n".join(
        f"  {len(c)} modules: {_cycle_path(edges, c)}" for c in found)


# Only the layers the architecture draws above the `Guard` facade may name it, even for
# the type checker: the package root (`from gitguard import Guard`, loaded lazily), the
# CLI and the daemon (they open a Guard per command line; the daemon's DaemonGuard is
# one), the integrations (a hook in a fresh process opens one, and the handlers drive its
# sessions, calls and checkpoints as an agent runtime would) and the demo. Everything
# below takes a `gitguard.guard_context.GuardContext` instead.
ABOVE_API = ("gitguard.cli", "gitguard.daemon", "gitguard.integrations", "gitguard.demo")


def _may_import_api(module: str) -> bool:
    return module in ("gitguard", "gitguard.api") or ".".join(module.split(".")[:2]) in ABOVE_API


def test_only_the_layers_above_the_facade_import_it() -> None:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    below = [module_name(p) for p in paths if not _may_import_api(module_name(p))
             and "gitguard.api" in imported(p, modules, type_checking=True)]
    assert not below, ("gitguard.api imported below the facade (TYPE_CHECKING imports "
                       "count); take a GuardContext instead:\n  " + "\n  ".join(below))


def test_the_graph_sees_local_imports_and_skips_type_checking(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n    from gitguard import api\n"
                      "def f():\n    from gitguard import errors\n")
    assert imported(source, {"gitguard", "gitguard.api", "gitguard.errors"}, "m") == {
        "gitguard.errors"}
    assert imported(source, {"gitguard", "gitguard.api", "gitguard.errors"}, "m",
                    type_checking=True) == {"gitguard.api", "gitguard.errors"}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_is_named_like_the_standard_library() -> None:
    """A module called `gc` or `trace` reads as the standard library's at a glance (issue
    22, item 6), even where a package keeps it from shadowing the import."""
    named = sorted(str(p.relative_to(PACKAGE.parent)) for p in PACKAGE.rglob("*.py")
                   if p.stem in sys.stdlib_module_names)
    assert not named, f"modules named like the standard library's: {named}"
