"""Settings resolve in one place: argument, GITGUARD_* environment, .gitguard.toml, default."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitguard.errors import GitguardError

DEFAULT_SIZE_CAP = 10 * 1024 * 1024


@dataclass(frozen=True)
class Settings:
    untracked_size_cap: int = DEFAULT_SIZE_CAP
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    redact_patterns: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict)
    daemon_autostart: bool = True


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise GitguardError(f"{path.name} is not valid TOML: {exc}",
                            f"fix the syntax in {path}") from exc


def project_config(root: Path) -> dict[str, Any]:
    """`.gitguard.toml` wins over `[tool.gitguard]` in pyproject.toml."""
    own = _read_toml(root / ".gitguard.toml")
    if own:
        return own
    pyproject = _read_toml(root / "pyproject.toml")
    section = pyproject.get("tool", {}).get("gitguard", {})
    return section if isinstance(section, dict) else {}


def load(root: Path, *, untracked_size_cap: int | None = None) -> Settings:
    config = project_config(root)
    cap = untracked_size_cap
    if cap is None and os.environ.get("GITGUARD_SIZE_CAP"):
        cap = _int("GITGUARD_SIZE_CAP", os.environ["GITGUARD_SIZE_CAP"])
    if cap is None:
        cap = _int("untracked_size_cap", config.get("untracked_size_cap", DEFAULT_SIZE_CAP))
    tools = config.get("tools", {})
    if not isinstance(tools, dict):
        raise GitguardError("[tools] in the gitguard config must be a table",
                            "write one [tools.NAME] table per tool")
    redact = config.get("redact", {}).get("patterns", [])
    return Settings(untracked_size_cap=cap, tools=tools, redact_patterns=tuple(redact), raw=config,
                    daemon_autostart=daemon_autostart(config))


def daemon_autostart(config: dict[str, Any]) -> bool:
    """`GITGUARD_NO_DAEMON=1` or `[daemon] autostart = false` keep the daemon from starting
    on its own (`gitguard daemon start` still starts it)."""
    if os.environ.get("GITGUARD_NO_DAEMON", "") not in ("", "0"):
        return False
    section = config.get("daemon", {})
    value = section.get("autostart", True) if isinstance(section, dict) else True
    if not isinstance(value, bool):
        raise GitguardError(f"[daemon] autostart must be true or false, not {value!r}",
                            "write autostart = false to keep the daemon from starting itself")
    return value


def _int(name: str, value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        raise GitguardError(f"{name} must be a whole number of bytes, not {value!r}",
                            "for example 10485760 for 10 MiB") from None
