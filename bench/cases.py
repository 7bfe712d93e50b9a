"""The registry of benchmark cases: one row of the table each.

A case is a function that gets a fresh copy of a generated repository and
returns a `Measurement`. Anchors (`bench.anchors`) and gitguard's own rows
(`bench.gitguard_cases`) register themselves on import; anyone can add a row:

    from bench.cases import CaseContext, Measurement, case, per_call
    from bench.probes import Editor

    @case("my thing: per call", group="gitguard", target="<= git status")
    def my_thing(ctx: CaseContext) -> Measurement:
        editor = Editor(ctx.repo)
        return per_call(ctx, lambda i: snapshot(ctx.repo, editor.edit()),
                        grows=ctx.repo / ".git")

A `first` case measures something that happens once per repository (a first
snapshot, usually through `first_once()`): the runner calls it on a new copy
for each of its samples. Any other case takes `ctx.runs` samples itself,
usually through `per_call()` or `sample()`.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.probes import IndexProbe
from bench.shell import du_bytes


class Skip(Exception):
    """Raised by a case that cannot run here; the row shows the reason."""


@dataclass(frozen=True)
class CaseContext:
    repo: Path  # a fresh copy of the generated repository, owned by this case
    scratch: Path  # an empty directory outside the repository, also owned by it
    runs: int  # how many samples a per-call case takes


@dataclass(frozen=True)
class Measurement:
    samples_ms: tuple[float, ...]
    bytes_added: int | None = None  # per sample for per-call cases
    note: str = ""
    index: str = ""  # what happened to the user's .git/index (IndexProbe.note)
    disk_ms: tuple[float, float] | None = None  # fsync_probe before and after (the runner's)
    create_us: float | None = None  # create_probe before the case (the runner's)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def p90_ms(self) -> float:
        """Nearest-rank 90th percentile (the maximum when there are < 10 samples)."""
        ordered = sorted(self.samples_ms)
        return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


@dataclass(frozen=True)
class Case:
    name: str
    group: str
    fn: Callable[[CaseContext], Measurement] = field(repr=False)
    target: str = ""
    first: bool = False
    needs_repo: bool = True  # False: ctx.repo is an empty directory, no copy is made
    once: bool = False  # run on the first size only (what it measures does not scale)


_REGISTRY: dict[str, Case] = {}


def register(new: Case) -> Case:
    if new.name in _REGISTRY and _REGISTRY[new.name].fn is not new.fn:
        raise ValueError(f"two benchmark cases are named {new.name!r}")
    _REGISTRY[new.name] = new
    return new


CaseFn = Callable[[CaseContext], Measurement]


def case(
    name: str, group: str, target: str = "", first: bool = False, needs_repo: bool = True,
    once: bool = False,
) -> Callable[[CaseFn], CaseFn]:
    """Decorator form of `register`."""

    def wrap(fn: CaseFn) -> CaseFn:
        register(Case(name, group, fn, target=target, first=first, needs_repo=needs_repo,
                      once=once))
        return fn

    return wrap


def registered() -> list[Case]:
    """Every case, in registration order."""
    return list(_REGISTRY.values())


def sample(
    runs: int,
    step: Callable[[int], object],
    after: Callable[[], object] | None = None,
    warmup: int = 1,
) -> tuple[float, ...]:
    """Wall time of `step(i)` for `runs` calls, after `warmup` untimed calls.

    `after` runs untimed after each timed call (e.g. `IndexProbe.check`).
    """
    for i in range(warmup):
        step(-1 - i)
    times: list[float] = []
    for i in range(runs):
        start = time.perf_counter_ns()
        step(i)
        times.append((time.perf_counter_ns() - start) / 1e6)
        if after is not None:
            after()
    return tuple(times)


def timed_once(action: Callable[[], object]) -> float:
    start = time.perf_counter_ns()
    action()
    return (time.perf_counter_ns() - start) / 1e6


def per_call(
    ctx: CaseContext,
    step: Callable[[int], object],
    grows: Path | None = None,
    note: str = "",
) -> Measurement:
    """The usual per-call row: one warm-up call, then `ctx.runs` timed calls.

    `grows` is the directory whose growth (`du -sb`) is reported per call; the
    user's index is watched throughout and the note says what happened to it.
    """
    probe = IndexProbe(ctx.repo)
    step(-1)
    before = du_bytes(grows) if grows is not None else 0
    samples = sample(ctx.runs, step, after=probe.check, warmup=0)
    added = (du_bytes(grows) - before) // ctx.runs if grows is not None else None
    return Measurement(samples, added, note, probe.note())


def first_once(
    ctx: CaseContext, action: Callable[[], object], grows: Path, note: str = ""
) -> Measurement:
    """A once-per-repository row: time `action` once, report what it added to `grows`."""
    probe = IndexProbe(ctx.repo)
    before = du_bytes(grows) if grows.exists() else 0
    ms = timed_once(action)
    probe.check()
    return Measurement((ms,), du_bytes(grows) - before, note, probe.note())
