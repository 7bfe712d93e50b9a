"""gitguard: a workspace guard for coding agents.

The package root stays import-light: the per-tool-call hook path imports
`gitguard.client` alone. `from gitguard import Guard` loads the full API lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from gitguard.api import Guard as Guard


def __getattr__(name: str) -> Any:
    if name == "Guard":
        from gitguard.api import Guard

        return Guard
    raise AttributeError(name)
