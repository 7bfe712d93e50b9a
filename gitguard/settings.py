"""Settings resolve in one place: argument, GITGUARD_* environment, .gitguard.toml, default."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitguard.errors import GitguardError

DEFAULT_SIZE_CAP = 10 * 1024 * 1024
DEFAULT_PROBE_TIMEOUT = 5.0     # seconds a probe may run (recovery/probes.py)
# Untracked, not-ignored directories with these names are dependency or build output:
# left out of snapshots (and listed), so a fresh `npm install` never lands in the store.
DEFAULT_SKIP_DIRS = ("node_modules", ".venv", "venv", "target", "dist", "build", "__pycache__",
                     ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".gradle",
                     ".next", ".nuxt", ".parcel-cache", ".terraform", "bower_components")


@dataclass(frozen=True)
class Settings:
    untracked_size_cap: int = DEFAULT_SIZE_CAP
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    redact_patterns: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict)
    skip_dirs: tuple[str, ...] = DEFAULT_SKIP_DIRS
    retention: Retention = field(default_factory=lambda: Retention())
    encryption: bool = False
    keyring_user: str = "default"
    daemon_autostart: bool = True
    probe_timeout: float = DEFAULT_PROBE_TIMEOUT


@dataclass(frozen=True)
class Retention:
    """What `gitguard gc` keeps: `[gc]` in the config, GITGUARD_GC_* in the environment."""

    keep_first: int = 1          # oldest checkpoints of each session
    keep_last: int = 10          # newest checkpoints of each session (at least 1)
    keep_days: float = 7.0       # sessions active more recently than this are kept whole
    pinned: tuple[str, ...] = ()
    trace_days: float = 30.0     # trace events older than this are dropped
    repack_repository: bool = True   # then `git repack` the whole repository (retention.repack)
    repack_max_mb: float = 1024.0    # ... when its packs take at most this many MB


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return {}
    import tomllib  # only for a file that exists: its import is paid by every fresh process

    with fh:
        try:
            return tomllib.load(fh)
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
    encryption = _table(config, "encryption")
    return Settings(untracked_size_cap=cap, tools=tools, redact_patterns=tuple(redact), raw=config,
                    skip_dirs=_skip_dirs(config), retention=_retention(config),
                    encryption=_bool("GITGUARD_ENCRYPT", encryption.get("enabled", False)),
                    keyring_user=str(encryption.get("keyring_user", "default")),
                    daemon_autostart=daemon_autostart(config),
                    probe_timeout=_probe_timeout(config))


def _probe_timeout(config: dict[str, Any]) -> float:
    """`GITGUARD_PROBE_TIMEOUT`, else `[probes] timeout`: seconds each probe may run."""
    if os.environ.get("GITGUARD_PROBE_TIMEOUT"):
        name, value = "GITGUARD_PROBE_TIMEOUT", os.environ["GITGUARD_PROBE_TIMEOUT"]
    else:
        name, value = "probes.timeout", _table(config, "probes").get(
            "timeout", DEFAULT_PROBE_TIMEOUT)
    try:
        seconds = float(str(value))
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= 3600:
        raise GitguardError(f"{name} must be a number of seconds above 0, not {value!r}",
                            "for example [probes] timeout = 5 in .gitguard.toml")
    return seconds

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


def _table(config: dict[str, Any], name: str) -> dict[str, Any]:
    value = config.get(name, {})
    if not isinstance(value, dict):
        raise GitguardError(f"[{name}] in the gitguard config must be a table",
                            "see docs/storage.md and docs/configuration.md")
    return value


def _strings(name: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise GitguardError(f"{name} must be a list of names", 'for example ["node_modules"]')
    return tuple(value)


def _skip_dirs(config: dict[str, Any]) -> tuple[str, ...]:
    if "GITGUARD_SKIP_DIRS" in os.environ:
        return _strings("GITGUARD_SKIP_DIRS", os.environ["GITGUARD_SKIP_DIRS"])
    return _strings("skip_dirs", config.get("skip_dirs", list(DEFAULT_SKIP_DIRS)))


def _number(name: str, value: object, minimum: float) -> float:
    try:
        number = float(str(value))
    except ValueError:
        number = minimum - 1
    if number < minimum:
        raise GitguardError(f"{name} must be a number of at least {minimum:g}, not {value!r}",
                            "fix it in the [gc] table of .gitguard.toml or the environment")
    return number


def _retention(config: dict[str, Any]) -> Retention:
    table = _table(config, "gc")
    default = Retention()

    def pick(key: str, fallback: float, minimum: float) -> float:
        env = f"GITGUARD_GC_{key.upper()}"
        if os.environ.get(env):
            return _number(env, os.environ[env], minimum)
        return _number(f"gc.{key}", table.get(key, fallback), minimum)

    return Retention(
        keep_first=int(pick("keep_first", default.keep_first, 0)),
        keep_last=int(pick("keep_last", default.keep_last, 1)),
        keep_days=pick("keep_days", default.keep_days, 0),
        pinned=_strings("gc.pinned", table.get("pinned", [])),
        trace_days=pick("trace_days", default.trace_days, 0),
        repack_repository=_bool("GITGUARD_GC_REPACK_REPOSITORY",
                                table.get("repack_repository", True),
                                "[gc] repack_repository = false in .gitguard.toml"),
        repack_max_mb=pick("repack_max_mb", default.repack_max_mb, 0),
    )


def _bool(env: str, configured: object,
          example: str = "[encryption] enabled = true in .gitguard.toml") -> bool:
    raw = os.environ.get(env)
    value: object = raw if raw else configured
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise GitguardError(f"{env} must be true or false, not {value!r}",
                        f"{example}, or {env}=1")
