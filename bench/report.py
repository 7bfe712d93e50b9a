"""Rows of results, the plain-text table, the verdict and the JSON file."""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.anchors import GIT_STATUS, SHADOW_FIRST, SHADOW_PER_CALL
from bench.cases import Case, Measurement
from bench.cases_daemon import GG_DAEMON_CALL
from bench.cases_history import GG_HISTORY
from bench.gitguard_cases import GG_CLI_PER_CALL, GG_FIRST, GG_PER_CALL


@dataclass(frozen=True)
class Row:
    case: str
    group: str
    size: str
    target: str
    first: bool  # a once-per-repository row (bytes are a total, not per call)
    status: str  # "ok", "skipped" or "error"
    samples_ms: tuple[float, ...] = ()
    bytes_added: int | None = None
    note: str = ""
    index: str = ""
    disk_before_ms: tuple[float, ...] = ()  # fsync_probe before each measured copy
    disk_after_ms: tuple[float, ...] = ()
    create_us: tuple[float, ...] = ()  # create_probe before each measured copy

    @classmethod
    def measured(cls, case: Case, size: str, parts: list[Measurement]) -> Row:
        """One row from a case's measurements (several when a `first` case repeats)."""
        sizes = [p.bytes_added for p in parts if p.bytes_added is not None]
        notes = " | ".join(dict.fromkeys(p.note for p in parts if p.note))
        index = " | ".join(dict.fromkeys(p.index for p in parts if p.index))
        disks = [p.disk_ms for p in parts if p.disk_ms is not None]
        return cls(case.name, case.group, size, case.target, case.first, "ok",
                   tuple(s for p in parts for s in p.samples_ms),
                   int(statistics.median(sizes)) if sizes else None, notes, index,
                   tuple(d[0] for d in disks), tuple(d[1] for d in disks),
                   tuple(p.create_us for p in parts if p.create_us is not None))

    @classmethod
    def failed(cls, case: Case, size: str, status: str, why: str) -> Row:
        return cls(case.name, case.group, size, case.target, case.first, status, note=why)

    @property
    def median_ms(self) -> float | None:
        return Measurement(self.samples_ms).median_ms if self.samples_ms else None

    @property
    def p90_ms(self) -> float | None:
        return Measurement(self.samples_ms).p90_ms if self.samples_ms else None

    def to_json(self) -> dict[str, Any]:
        return {
            "case": self.case, "group": self.group, "size": self.size, "status": self.status,
            "target": self.target, "first": self.first, "n": len(self.samples_ms),
            "medianMs": _round(self.median_ms), "p90Ms": _round(self.p90_ms),
            "samplesMs": [round(s, 3) for s in self.samples_ms],
            "bytesAdded": self.bytes_added,
            "bytesAddedPer": None if self.bytes_added is None else
            ("snapshot" if self.first else "call"),
            "userIndex": self.index or None,
            "note": self.note,
            "fsyncProbeMs": {"before": [round(d, 3) for d in self.disk_before_ms],
                             "after": [round(d, 3) for d in self.disk_after_ms]},
            "createProbeUs": [round(c, 1) for c in self.create_us],
        }

    @property
    def disk_text(self) -> str:
        """`before/after` medians of the fsync probe, `-` when the case was not measured."""
        if not self.disk_before_ms:
            return "-"
        return (f"{statistics.median(self.disk_before_ms):.1f}/"
                f"{statistics.median(self.disk_after_ms):.1f}")

    @property
    def create_text(self) -> str:
        """The create probe's median before the case, `-` when it was not measured."""
        return f"{statistics.median(self.create_us):.0f}" if self.create_us else "-"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def fmt_ms(value: float | None) -> str:
    """Milliseconds for the table's numeric columns."""
    return "-" if value is None else f"{value:.1f}"


def fmt_time(value: float) -> str:
    """A duration for sentences: `12.3 ms` or `13.71 s`."""
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.1f} ms"


def fmt_bytes(value: int | None, per_call: bool = False) -> str:
    if value is None:
        return "-"
    text = f"{value} B"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(value) >= scale:
            text = f"{value / scale:.1f} {unit}"
            break
    return f"{text}/call" if per_call else text


def table(rows: list[Row], note_width: int = 70) -> str:
    header = ["case", "size", "n", "median ms", "p90 ms", "bytes added", "target", "user index",
              "fsync ms", "create us", "note"]
    cells: list[list[str]] = []
    for r in rows:
        median = fmt_ms(r.median_ms) if r.status == "ok" else r.status
        note = r.note if len(r.note) <= note_width else r.note[: note_width - 3] + "..."
        cells.append([r.case, r.size, str(len(r.samples_ms)), median, fmt_ms(r.p90_ms),
                      fmt_bytes(r.bytes_added, per_call=not r.first), r.target or "-",
                      r.index or "-", r.disk_text, r.create_text, note])
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(len(header))]
    numeric = {2, 3, 4, 5, 8, 9}

    def line(values: list[str]) -> str:
        parts = [v.rjust(w) if i in numeric else v.ljust(w)
                 for i, (v, w) in enumerate(zip(values, widths, strict=True))]
        return "  ".join(parts).rstrip()

    out = [line(header), line(["-" * w for w in widths])]
    previous = None
    for r, c in zip(rows, cells, strict=True):
        if previous is not None and r.size != previous:
            out.append("")
        out.append(line(c))
        previous = r.size
    return "\n".join(out)


def _ratio(a: float, b: float) -> str:
    if b == 0:
        return "n/a"
    r = a / b
    return f"{1 / r:.1f}x faster" if r < 1 else f"{r:.1f}x slower"


def verdict(rows: list[Row]) -> list[str]:
    """Plain sentences comparing gitguard to the shadow-repository method, per size."""
    ok = {(r.size, r.case): r for r in rows if r.status == "ok"}
    sizes = list(dict.fromkeys(r.size for r in rows))
    lines: list[str] = []

    def get(size: str, name: str) -> Row | None:
        return ok.get((size, name))

    for size in sizes:
        shadow_call, shadow_first = get(size, SHADOW_PER_CALL), get(size, SHADOW_FIRST)
        status = get(size, GIT_STATUS)
        for name in (GG_PER_CALL, GG_CLI_PER_CALL, GG_DAEMON_CALL):
            mine = get(size, name)
            if mine is None or mine.median_ms is None:
                continue
            text = f"[{size}] {name}: {fmt_time(mine.median_ms)}"
            if shadow_call is not None and shadow_call.median_ms is not None:
                text += (f"; shadow per call {fmt_time(shadow_call.median_ms)}"
                         f" -> {_ratio(mine.median_ms, shadow_call.median_ms)}")
            if status is not None and status.median_ms is not None:
                text += (f"; git status {fmt_time(status.median_ms)}"
                         f" -> {mine.median_ms / status.median_ms:.2f}x git status"
                         f" (target {mine.target})")
            lines.append(text)
        first = get(size, GG_FIRST)
        if first is not None and first.median_ms is not None:
            text = (f"[{size}] {GG_FIRST}: {fmt_time(first.median_ms)}, "
                    f"{fmt_bytes(first.bytes_added)}")
            if shadow_first is not None and shadow_first.median_ms is not None:
                text += (f"; shadow first {fmt_time(shadow_first.median_ms)}, "
                         f"{fmt_bytes(shadow_first.bytes_added)}"
                         f" -> time {_ratio(first.median_ms, shadow_first.median_ms)}")
                if first.bytes_added is not None and shadow_first.bytes_added:
                    text += f", {first.bytes_added / shadow_first.bytes_added:.3g}x the bytes"
            lines.append(text + f" (target {first.target})")
        done = (GG_PER_CALL, GG_CLI_PER_CALL, GG_DAEMON_CALL, GG_FIRST)
        for r in rows:
            if r.size != size or r.case in done or r.status != "ok" or r.median_ms is None:
                continue
            limit = time_limit_ms(r.target)
            if r.case == GG_HISTORY:            # its note holds both figures and verdicts
                lines.append(f"[{size}] {r.case}: {r.note}")
            elif limit is not None:
                met = "met" if r.median_ms < limit or (
                    r.median_ms == limit and r.target.startswith("<=")) else "MISSED"
                lines.append(f"[{size}] {r.case}: {fmt_time(r.median_ms)} "
                             f"(target {r.target}: {met})")
        if not any(line.startswith(f"[{size}]") for line in lines):
            missing = [r for r in rows if r.size == size and r.group == "gitguard"]
            why = missing[0].note if missing else "no gitguard rows selected"
            lines.append(f"[{size}] no gitguard measurement: {why}")
    return lines


_UNITS_MS = {"ms": 1.0, "s": 1000.0}


def time_limit_ms(target: str | None) -> float | None:
    """The time bound a target starts with ("< 100 ms", "<= 25 ms, ..."), in ms; else None."""
    words = (target or "").replace(",", " ").split()
    if len(words) < 3 or words[0] not in ("<", "<="):
        return None
    try:
        value = float(words[1])
    except ValueError:
        return None
    unit = _UNITS_MS.get(words[2])
    return value * unit if unit is not None else None


def write_json(path: Path, meta: dict[str, Any], rows: list[Row], lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"schemaVersion": 1, "meta": meta, "results": [r.to_json() for r in rows],
               "verdict": lines}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n")
    os.replace(tmp, path)
