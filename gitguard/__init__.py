"""gitguard: a workspace guard for coding agents.

The package root stays import-light: the per-tool-call hook path imports
`gitguard.ipc.client` alone. `from gitguard import Guard` loads the full API lazily.
"""

from __future__ import annotations

__version__ = "0.1.0"

TYPE_CHECKING = False   # typing itself costs milliseconds on the per-call path
if TYPE_CHECKING:
    from typing import Any

    from gitguard.api import Guard as Guard


def __getattr__(name: str) -> Any:
    if name == "Guard":
        from gitguard.api import Guard

        return Guard
    raise AttributeError(name)
