"""Real source files nobody here wrote, taken from packages installed in the venv.

Synthetic fixtures are small and regular; a real module is large, has long lines, odd
indentation, non-ASCII text and history-shaped edits. Tests that need "a real file"
take one from here rather than inventing one.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


def module_file(name: str) -> Path:
    """The source file of an installed module, e.g. `click.core` (148 KB)."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None, name
    path = Path(spec.origin)
    assert path.suffix == ".py", f"{name} is not pure Python here: {path}"
    return path


def package_dir(name: str) -> Path:
    """The directory of an installed package, e.g. `click` (17 modules)."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.submodule_search_locations, name
    return Path(next(iter(spec.submodule_search_locations)))


def package_sources(name: str) -> dict[str, bytes]:
    """Every `.py` file of an installed package by its path inside the package."""
    root = package_dir(name)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.py"))
            if "__pycache__" not in p.parts}


CLICK_CORE = "click.core"
PYDANTIC_MAIN = "pydantic.main"
LARGE_MODULES = (CLICK_CORE, PYDANTIC_MAIN, "pydantic._internal._generate_schema",
                 "hypothesis.core")
