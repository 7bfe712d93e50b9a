"""`compensate_external_action`: undo a call's effect outside the workspace, when declared.

A ToolDefinition may declare `compensation = ["gh", "issue", "close", "{number}"]`:
an argv template whose `{name}` placeholders are filled from the call's recorded
result (when it is a JSON object) and input; `{input.x}` and `{result.x}` pick one
side, dots reach into nested objects. Each filled template element stays exactly
one argv element: nothing is ever pasted into a shell string. The compensation
runs as a new ledgered call linked to the original (`compensates`).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gitguard.calls import lifecycle, tools
from gitguard.errors import GitguardError, ReplayRefused, StoreError
from gitguard.ledger import journal
from gitguard.models import CompensateExternalAction, ToolDefinition, ToolLedgerEntry
from gitguard.storage import trace_log

if TYPE_CHECKING:
    from gitguard.guard_context import GuardContext

TOOL_NAME = "gitguard.recovery.compensate"
_FIELD = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


@dataclass(frozen=True)
class Compensation:
    entry: ToolLedgerEntry
    definition: ToolDefinition
    argv: tuple[str, ...]

    @property
    def display(self) -> str:
        return shlex.join(self.argv)


def _load_json(g: GuardContext, ref: str | None) -> Any:
    if ref is None:
        return None
    try:
        data = g.store.read_artifact(ref)  # plaintext even when the store is encrypted
    except StoreError:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return data.decode(errors="replace").strip()


def _walk(value: Any, dotted: list[str]) -> Any:
    for key in dotted:
        if isinstance(value, Mapping) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            raise KeyError(key)
    return value


def _text(value: Any, name: str) -> str:
    if value is None:
        raise GitguardError(f"the placeholder {{{name}}} has no value (null)",
                            "the call's recorded input or result does not say it")
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if "\0" in text:
        raise GitguardError(f"the value of {{{name}}} contains a NUL byte",
                            "it cannot be passed as a command argument")
    return text


def fill(template: tuple[str, ...], tool_input: Any, result: Any) -> tuple[str, ...]:
    """Each template element with its placeholders replaced; one element stays one argument."""
    sides: dict[str, Any] = {"input": tool_input, "result": result}

    def value(name: str) -> str:
        parts = name.split(".")
        if parts[0] in sides:
            search = [(sides[parts[0]], parts[1:])]
        else:
            search = [(result, parts), (tool_input, parts)]
        for side, path in search:
            try:
                return _text(_walk(side, path), name)
            except KeyError:
                continue
        known = sorted({k for side in (tool_input, result) if isinstance(side, Mapping)
                        for k in side})
        raise GitguardError(f"the compensation needs {{{name}}}, which neither the call's "
                            "input nor its result holds",
                            f"available: {', '.join(known) or 'nothing'}; fix the template "
                            "in .gitguard.toml")

    def one(element: str) -> str:
        def swap(match: re.Match[str]) -> str:
            token = match.group(0)
            if token in ("{{", "}}"):
                return token[0]
            return value(match.group(1).strip())
        return _FIELD.sub(swap, element)

    return tuple(one(element) for element in template)


def _no_compensation(entry: ToolLedgerEntry, definition: ToolDefinition | None) -> GitguardError:
    outside = [e for e in entry.side_effects if e != "filesystem"]
    files = (f"its file changes can be undone with "
             f"`gitguard rollback-files --to {entry.pre_checkpoint_id}`"
             if entry.file_patches and entry.pre_checkpoint_id else "")
    if definition is not None and definition.cannot_undo:
        what = definition.cannot_undo
    elif outside:
        what = f"its effect outside this workspace ({', '.join(outside)}) cannot be undone here"
    elif entry.side_effects or entry.file_patches:
        what = "it only changed files; there is nothing outside the workspace to undo"
    else:
        what = "gitguard does not know what it changed outside the workspace"
    hint = ("undo it by hand where it happened (for a sent email: send a correction); to let "
            f"gitguard do it next time, declare compensation = [...] under "
            f"[tools.{entry.tool_name}] in .gitguard.toml")
    if files:
        hint = f"{files}; {hint}" if outside else files
    return GitguardError(f"{entry.tool_name} ({entry.call_id}) has no compensation: {what}", hint)


def plan(g: GuardContext, entry_id: str) -> Compensation:
    """What would run, without running anything."""
    state = journal.read(g.store)
    entry = state.get(entry_id)
    definition = tools.definitions(g.settings).get(entry.tool_name)
    if entry.status in ("planned", "approved"):
        raise GitguardError(f"{entry_id} never ran ({entry.status}): there is nothing to undo",
                            "nothing to do")
    earlier = [e for e in state.in_order() if e.compensates == entry_id
               and e.status in ("started", "succeeded", "uncertain")]
    if earlier:
        raise ReplayRefused(f"{entry_id} was already compensated by {earlier[-1].call_id} "
                            f"({earlier[-1].status})",
                            "a compensation runs once; check the outside world, and "
                            f"`gitguard reconcile {earlier[-1].call_id}` if it is uncertain")
    if definition is None or not definition.compensation:
        raise _no_compensation(entry, definition)
    argv = fill(definition.compensation, _load_json(g, entry.input_ref),
                _load_json(g, entry.result_ref))
    return Compensation(entry, definition, argv)


def run(g: GuardContext, compensation: Compensation) -> ToolLedgerEntry:
    """Run the filled argv as a ledgered call that compensates the original entry."""
    entry = compensation.entry
    tool_input = {"argv": list(compensation.argv), "compensates": entry.call_id}
    began = lifecycle.begin(g, TOOL_NAME, tool_input, step_id=f"compensate_{entry.call_id}",
                            idempotency="non_idempotent", replay="never",
                            side_effects=compensation.definition.side_effects,
                            compensates=entry.call_id)
    try:
        proc = subprocess.run(list(compensation.argv), cwd=g.ws.root, capture_output=True,
                              check=False)
        output, code = proc.stdout + proc.stderr, proc.returncode
    except OSError as exc:
        output, code = f"cannot run {compensation.argv[0]}: {exc.strerror}".encode(), 127
    finished = lifecycle.end(g, began.call_id, "succeeded" if code == 0 else "failed", output)
    with g.store.writing():
        state = journal.read(g.store)
        detail: dict[str, Any] = {"compensationCallId": began.call_id,
                                  "argv": list(compensation.argv), "exitCode": code}
        journal.append_action(g.store, state, CompensateExternalAction(
            ledger_entry_id=entry.call_id), began.session_id, detail)
        trace_log.emit(g.store, "recovery", "recovery.compensate", session_id=began.session_id,
                       entryId=entry.call_id, **detail)
    return finished
