"""Tool definitions from the project config, and the classification of one call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gitguard.errors import GitguardError
from gitguard.models import ToolDefinition
from gitguard.settings import Settings

if TYPE_CHECKING:
    # Imported where a call is classified: `call end` and the ending hooks (a fresh
    # process each, with no daemon) never classify, and classify brings the shell parser
    # and the rule tables (~10-15 ms of CPU).
    from gitguard.calls.classify import Classification, ToolPolicy


def definitions(settings: Settings) -> dict[str, ToolDefinition]:
    """`[tools.NAME]` tables of .gitguard.toml as ToolDefinitions (camelCase or snake_case keys)."""
    result: dict[str, ToolDefinition] = {}
    for name, table in settings.tools.items():
        if not isinstance(table, dict):
            raise GitguardError(f"[tools.{name}] must be a table", "see docs/configuration.md")
        try:
            result[name] = ToolDefinition.model_validate({"name": name, **table})
        except ValueError as exc:
            first = str(exc).splitlines()
            raise GitguardError(f"[tools.{name}] in the gitguard config is invalid: "
                                f"{first[1] if len(first) > 1 else first[0]}",
                                "idempotency: idempotent|conditional|non_idempotent; "
                                "replayPolicy: auto|ask|never; probe: [argv, ...] or a table "
                                "(docs/configuration.md)") from None
    return result


def _policy(definition: ToolDefinition, table: Mapping[str, Any]) -> ToolPolicy:
    from gitguard.calls.classify import ToolPolicy

    def given(*keys: str) -> bool:
        return any(k in table for k in keys)

    return ToolPolicy(
        idempotency=definition.idempotency if given("idempotency") else None,
        replay_policy=definition.replay_policy if given("replayPolicy", "replay_policy") else None,
        risk_level=definition.risk_level,
        side_effects=definition.side_effects,
    )


def declared_replay_key(settings: Settings, tool: str) -> tuple[str, ...] | None:
    """The `replayKey` of the config table that governs `tool` (as classification picks it)."""
    from gitguard.calls.classify import matching

    pattern = matching(settings.tools, tool)
    return None if pattern is None else definitions(settings)[pattern].replay_key


def classify(settings: Settings, tool: str, tool_input: Mapping[str, Any]) -> Classification:
    from gitguard.calls.classify import classify_call

    defs = definitions(settings)
    overrides = {name: _policy(d, settings.tools[name]) for name, d in defs.items()}
    return classify_call(tool, tool_input, overrides)
