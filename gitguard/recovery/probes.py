"""Probes: ask the outside world whether an uncertain call's effect happened (DESIGN.md
"Resume"; docs/recovery.md, "Probes").

A probe is a read-only command (an argv template, never a shell string) declared for a
tool (`[tools.NAME] probe`) or a command pattern (`[commands."GLOB"] probe`), or built in
for the effects the classifier recognises (gitguard.recovery.probe_rules). `resume` runs
the probes of the uncertain calls in parallel, each bounded by a timeout, with the user's
environment (never written anywhere); the run's argv, exit code and trimmed output,
redacted, are kept as an artifact. A run that reads as "it happened" settles the call
`succeeded`, "it did not" settles it `failed` (legal: uncertain -> succeeded | failed), with
`probedAt`, `probeResult` and `probeRef`. Anything else (a timeout, an absent command, an
unexpected exit code, output neither reading matches) leaves the call uncertain, recorded
all the same (`probedAt`, `probeResult` "unknown", the evidence, and why in its note): the
recovery note says the probe could not tell and why, and gives today's advice.

Probes run outside the store lock (`run_all`): planning reads under it, recording takes it
again and re-reads the ledger, so a call settled meanwhile is not overwritten.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shlex
import signal
import subprocess
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gitguard import clock
from gitguard.calls import probe_facts, tools
from gitguard.calls.classify import command_of, matching
from gitguard.calls.shell_parse import split_argv, split_commands
from gitguard.errors import GitguardError, StoreError
from gitguard.ledger import journal
from gitguard.models import ProbeCheck, ProbeDefinition, ProbeResult, ToolLedgerEntry
from gitguard.recovery import probe_rules
from gitguard.storage import durable, trace_log

if TYPE_CHECKING:
    from gitguard.guard_context import GuardContext

_FIELD = re.compile(r"\{\{|\}\}|\{(\w+)\}")
_KEEP = 4000            # characters of stdout and stderr kept as evidence
_JUDGED = 65536         # characters of output a reading looks at
_GRACE = 2.0            # seconds to collect a killed probe's last output


@dataclass(frozen=True)
class Probe:
    """A probe ready to run for one call."""

    call_id: str
    definition: ProbeDefinition
    argv: tuple[str, ...]
    values: Mapping[str, str]
    source: str                 # "built in (npm_publish)", "[tools.deploy]", '[commands."x *"]'
    timeout: float
    read_at: str = "begin"      # when the facts it asks about were read

    @property
    def display(self) -> str:
        return shlex.join(self.argv)


@dataclass(frozen=True)
class Outcome:
    """What probing one call found. `result` None: the call has no probe (`why` says)."""

    call_id: str
    result: ProbeResult | None
    why: str
    probe: Probe | None = None
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    evidence_ref: str | None = None
    settled: ToolLedgerEntry | None = None

    def to_json(self) -> dict[str, Any]:
        return {"callId": self.call_id, "probeResult": self.result, "why": self.why,
                "argv": list(self.probe.argv) if self.probe else None,
                "source": self.probe.source if self.probe else None,
                "exitCode": self.exit_code, "evidenceRef": self.evidence_ref,
                "status": self.settled.status if self.settled else None}


# --- which probe -----------------------------------------------------------------------

def plan(g: GuardContext, entry: ToolLedgerEntry) -> Probe | str:
    """The probe of an uncertain call, or why it has none."""
    stored = _stored_input(g, entry)
    timeout = g.settings.probe_timeout
    defs = tools.definitions(g.settings)
    pattern = matching(defs, entry.tool_name)
    declared = defs[pattern].probe if pattern is not None else None
    if declared is not None:
        fields = {k: _scalar(v) for k, v in stored.items()}
        return _filled(entry, declared, {k: v for k, v in fields.items() if v is not None},
                       f"[tools.{pattern}]", timeout)
    command = command_of(entry.tool_name, stored)
    if command is None:
        return "no probe is declared for this tool"
    by_pattern = _command_probe(g, command)
    if by_pattern is not None:
        source, definition, values = by_pattern
        return _filled(entry, definition, values, source, timeout)
    facts = entry.probe_facts
    if facts is None:
        if not probe_facts.PROBED_EFFECTS.intersection(entry.side_effects):
            return "no probe exists for this command"
        # A ledger from before probes: what the workspace holds now stands in for what
        # the call saw (the note says so).
        facts = probe_facts.gather(g.ws.root, g.ws.root, g.snap.repo if g.ws.is_git else None,
                                   command, read_at="probe")
    if facts is None:
        return "no built-in probe can check this command"
    if facts.get("redacted"):
        return f"its {facts['redacted']} held a secret, which gitguard never stores"
    builtin = probe_rules.builtin(facts)
    if builtin is None:
        return "no built-in probe can check this command"
    extra = probe_rules.extra_args(facts)
    if extra:
        at = builtin.argv.index("--") if "--" in builtin.argv else len(builtin.argv)
        builtin = builtin.model_copy(
            update={"argv": builtin.argv[:at] + extra + builtin.argv[at:]})
    values = {**facts, "short": facts.get("sha", "")[:12]}
    return _filled(entry, builtin, values, f"built in ({facts['kind']})", timeout,
                   facts.get("readAt", "begin"))


def _stored_input(g: GuardContext, entry: ToolLedgerEntry) -> dict[str, Any]:
    if entry.input_ref is None:
        return {}
    try:
        value = json.loads(g.store.read_artifact(entry.input_ref))
    except (StoreError, OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return None


def _command_probe(g: GuardContext, command: str | list[str]
                   ) -> tuple[str, ProbeDefinition, dict[str, str]] | None:
    """A `[commands."GLOB"] probe` whose glob matches a simple command of the call; its
    fields: `{command}` and the words `{0}`, `{1}`, ..."""
    table = g.settings.raw.get("commands", {})
    if not isinstance(table, dict) or not table:
        return None
    parsed = split_commands(command) if isinstance(command, str) else split_argv(command)
    for cmd in parsed.commands:
        text = " ".join(cmd.argv)
        for glob in sorted(table, key=len, reverse=True):
            entry = table[glob]
            if not fnmatchcase(text, glob) or not isinstance(entry, dict) or "probe" not in entry:
                continue
            definition = _definition(entry["probe"], f'[commands."{glob}"]')
            values = {"command": text, **{str(i): w for i, w in enumerate(cmd.argv)}}
            return f'[commands."{glob}"]', definition, values
    return None


def _definition(raw: Any, where: str) -> ProbeDefinition:
    try:
        return ProbeDefinition.model_validate({"argv": raw} if isinstance(raw, list) else raw)
    except ValueError as exc:
        first = str(exc).splitlines()
        raise GitguardError(f"{where} probe in the gitguard config is invalid: "
                            f"{first[1] if len(first) > 1 else first[0]}",
                            "probe = [\"argv\", ...] or a table with argv, happened, "
                            "notHappened (see docs/configuration.md)") from None


def _filled(entry: ToolLedgerEntry, definition: ProbeDefinition, values: Mapping[str, str],
            source: str, timeout: float, read_at: str = "begin") -> Probe | str:
    argv: list[str] = []
    for element in definition.argv:
        try:
            argv.append(_fill(element, values, literal=True))
        except KeyError as missing:
            return f"its probe needs {{{missing.args[0]}}}, which the call's input does not hold"
        whole = _FIELD.fullmatch(element)
        if whole and whole.group(1) and argv[-1].startswith("-"):
            # `{ref}` = `--upload-pack=...` must never become an option of the probe.
            return f"the value of {element} starts with '-' and would be read as an option"
        if "[REDACTED:" in argv[-1]:
            return f"the value of {element} was redacted (a secret is never stored)"
        if "\0" in argv[-1]:
            return f"the value of {element} holds a NUL byte"
    if not argv or not argv[0]:
        return "its probe has no command"
    return Probe(entry.call_id, definition, tuple(argv), dict(values), source,
                 definition.timeout or timeout, read_at)


def _fill(template: str, values: Mapping[str, str], *, literal: bool) -> str:
    """`{name}` replaced: as it is in argv (`literal`), escaped in a regex. In a regex an
    unknown `{...}` stays (a quantifier such as `{40,64}` or `{3}`)."""
    def swap(match: re.Match[str]) -> str:
        token, name = match.group(0), match.group(1)
        if token in ("{{", "}}"):
            return token[0] if literal else token
        if name not in values:
            if literal:
                raise KeyError(name)
            return token
        return values[name] if literal else re.escape(values[name])
    return _FIELD.sub(swap, template)


# --- running ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _Run:
    exit_code: int | None
    stdout: str
    stderr: str
    error: str | None           # it could not run to its end: timeout, no such command


def _run(probe: Probe, cwd: Path) -> _Run:
    """One probe in its own process group (a timeout kills everything it started), stdin
    closed and no terminal (nothing can prompt for a password), the caller's environment."""
    env = dict(os.environ)
    env.setdefault("GIT_TERMINAL_PROMPT", "0")
    try:
        proc = subprocess.Popen(list(probe.argv), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    except FileNotFoundError:
        return _Run(None, "", "", f"its command `{probe.argv[0]}` is not installed here")
    except OSError as exc:
        return _Run(None, "", "", f"`{probe.argv[0]}` could not start: "
                                  f"{exc.strerror or exc}")
    try:
        out, err = proc.communicate(timeout=probe.timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        try:
            out, err = proc.communicate(timeout=_GRACE)
        except subprocess.TimeoutExpired:   # a descendant left the group and holds a pipe
            out, err = b"", b""
        return _Run(None, _text(out), _text(err),
                    f"it did not answer within {probe.timeout:g} s and was stopped")
    return _Run(proc.returncode, _text(out), _text(err), None)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.kill()


def _text(data: bytes | None) -> str:
    return (data or b"")[:_JUDGED * 4].decode(errors="replace")


def _matches(check: ProbeCheck, run: _Run, values: Mapping[str, str]) -> bool:
    if run.exit_code not in check.exit:
        return False
    out, err = run.stdout[:_JUDGED], run.stderr[:_JUDGED]
    try:
        return (all(re.search(_fill(r, values, literal=False), out) for r in check.stdout)
                and all(re.search(_fill(r, values, literal=False), err) for r in check.stderr)
                and not any(re.search(_fill(r, values, literal=False), out)
                            for r in check.stdout_lacks))
    except re.error:
        return False            # a declared regex that does not compile reads as no match


def judge(probe: Probe, run: _Run) -> tuple[ProbeResult, str]:
    """The reading of one run, and the clause the note gives for it."""
    if run.error is not None:
        return "unknown", run.error
    yes = any(_matches(c, run, probe.values) for c in probe.definition.happened)
    no = any(_matches(c, run, probe.values) for c in probe.definition.not_happened)
    d = probe.definition
    if yes and not no:
        return "happened", _fill(d.happened_because, probe.values, literal=True) \
            if d.happened_because else f"`{probe.display}` exited {run.exit_code}"
    if no and not yes:
        return "not_happened", _fill(d.not_happened_because, probe.values, literal=True) \
            if d.not_happened_because else f"`{probe.display}` exited {run.exit_code}"
    said = _first_line(run.stderr) or _first_line(run.stdout)
    what = "both readings match its output" if yes else "its output matches neither reading"
    return "unknown", (f"it exited {run.exit_code} and {what}"
                       + (f": {said}" if said else ""))


def _first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= 120 else line[:119] + "…"


def effect_words(probe: Probe) -> str:
    if probe.definition.effect:
        return _fill(probe.definition.effect, probe.values, literal=True)
    return "take effect"


# --- probing calls and recording what was found ---------------------------------------

def plan_all(g: GuardContext, entries: Sequence[ToolLedgerEntry]) -> dict[str, Probe | str]:
    """The probe of each uncertain call, or why it has none. Reads only (under the lock)."""
    plans: dict[str, Probe | str] = {}
    for entry in entries:
        try:
            plans[entry.call_id] = plan(g, entry)
        except GitguardError as exc:        # a config error must not stop resume
            plans[entry.call_id] = f"{exc.message} ({exc.hint})"
    return plans


def run_all(g: GuardContext, plans: Mapping[str, Probe | str]) -> dict[str, _Run]:
    """Run the planned probes in parallel, each bounded by its timeout. Outside the store
    lock: hooks and other commands must not wait for a slow registry."""
    ready = [p for p in plans.values() if isinstance(p, Probe)]
    if not ready:
        return {}
    with ThreadPoolExecutor(max_workers=min(8, len(ready)),
                            thread_name_prefix="gitguard-probe") as pool:
        return {probe.call_id: run for probe, run in
                zip(ready, pool.map(lambda p: _run(p, g.ws.root), ready), strict=True)}


def record(g: GuardContext, state: journal.LedgerState, plans: Mapping[str, Probe | str],
           runs: Mapping[str, _Run]) -> dict[str, Outcome]:
    """What the runs found, recorded against the ledger as it is now (`state`, read under
    the lock after the probes ran): a call someone settled meanwhile is left as they
    settled it."""
    outcomes = {call_id: Outcome(call_id, None, planned) for call_id, planned in plans.items()
                if isinstance(planned, str)}
    found: dict[str, tuple[Probe, _Run, ProbeResult, str]] = {}
    for call_id, planned in plans.items():
        if not isinstance(planned, Probe):
            continue
        run = runs[call_id]
        result, why = judge(planned, run)
        now = state.entries.get(call_id)
        if now is None or now.status != "uncertain":
            said = now.status if now is not None else "gone"
            outcomes[call_id] = Outcome(call_id, result, f"{why}; not recorded: the call was "
                                        f"settled meanwhile ({said})", planned, run.exit_code,
                                        run.stdout[:_KEEP], run.stderr[:_KEEP], settled=now)
            continue
        found[call_id] = (planned, run, result, why)
    outcomes.update(_record(g, state, {c: state.entries[c] for c in found}, found))
    return outcomes


def could_not_tell(probe: Probe, why: str) -> str:
    """The ledger's note of a call a probe could not settle, which the recovery note repeats."""
    return f"its probe `{probe.display}` could not tell ({why})"


def _record(g: GuardContext, state: journal.LedgerState, entries: Mapping[str, ToolLedgerEntry],
            found: Mapping[str, tuple[Probe, _Run, ProbeResult, str]]) -> dict[str, Outcome]:
    """The evidence (one artifact append per session), then the probed calls (one ledger
    append: settled, or still uncertain with why), then the trace: a crash in between
    leaves evidence no record names, and the call uncertain for the next resume to probe
    again. Under the store lock."""
    if not found:
        return {}
    now = clock.stamp()
    refs: dict[str, str] = {}
    by_session: dict[str, list[tuple[str, bytes]]] = {}
    for call_id, (probe, run, result, why) in found.items():
        # Named by what it holds (the time is in the ledger or the trace): a probe that
        # answers the same again names the same evidence, stored once, and resume answers
        # the same twice (the kill loop checks it).
        evidence = {"schemaVersion": 1, "callId": call_id,
                    "source": probe.source, "argv": list(probe.argv), "cwd": str(g.ws.root),
                    "timeoutSeconds": probe.timeout, "exitCode": run.exit_code,
                    "error": run.error, "stdout": run.stdout[:_KEEP],
                    "stderr": run.stderr[:_KEEP], "probeResult": result, "why": why,
                    "factsReadAt": probe.read_at}
        data = durable.canonical_json(g.store.privacy.redact_json(evidence))
        name = f"probe_{call_id}_{hashlib.sha256(data).hexdigest()[:16]}.json"
        refs[call_id] = f"artifacts/{name}"
        if not g.store.has_artifact(refs[call_id]):
            by_session.setdefault(entries[call_id].session_id, []).append((name, data))
    for session_id, items in by_session.items():
        g.store.append_artifacts(session_id, items)
    settled: list[ToolLedgerEntry] = []
    outcomes: dict[str, Outcome] = {}
    for call_id, (probe, run, result, why) in found.items():
        entry = entries[call_id]
        outcome = Outcome(call_id, result, why, probe, run.exit_code, run.stdout[:_KEEP],
                          run.stderr[:_KEEP], refs[call_id])
        if result != "unknown":
            done = settle_fields(entry, "succeeded" if result == "happened" else "failed",
                                 _fact(probe, result, why))
            done = done.model_copy(update={"probed_at": now, "probe_result": result,
                                           "probe_ref": refs[call_id]})
            outcome = replace(outcome, settled=done)
        else:
            # It stays uncertain, and the ledger says it was asked and why it could not
            # tell: an unsettled event, the evidence beside it.
            done = entry.model_copy(update={"probed_at": now, "probe_result": result,
                                            "probe_ref": refs[call_id],
                                            "note": could_not_tell(probe, why)})
        settled.append(done)
        outcomes[call_id] = outcome
    if settled:
        journal.append_entries(g.store, state, settled)
    for call_id, outcome in outcomes.items():
        trace_log.emit(g.store, "recovery", "recovery.probe",
                       session_id=entries[call_id].session_id, **outcome.to_json())
    return outcomes


def _fact(probe: Probe, result: ProbeResult, why: str) -> str:
    """The ledger's note of a settled call, which the recovery note repeats."""
    verb = "did" if result == "happened" else "did not"
    when = ("" if probe.read_at == "begin" else
            "; what it would send was read from the workspace at probe time, not when it ran")
    return f"{verb} {effect_words(probe)} ({why}{when})"


def settle_fields(entry: ToolLedgerEntry, status: str, said: str) -> ToolLedgerEntry:
    """An uncertain call settled: `reconcile` and a probe write the same fields."""
    return entry.model_copy(update={
        "status": status, "finished_at": clock.stamp(), "note": said,
        "error_summary": said if status == "failed" else entry.error_summary})
