"""Right-sizing from what runs really used: requests and limits a function's recorded attempts
suggest, and a warning when what it asks for is far above what it ever used.

Pure: it reads run records (each attempt's peak memory and CPU seconds), so the same answer
comes from the embedded default and from a service, for any runtime that measures usage.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runplane import names
from runplane.rendering.resources import Quantities
from runplane.runs import AttemptRecord, RunRecord
from runplane.spec.quantity import MEBIBYTE, mebibytes, resource_amount

#: Suggestions rest on this percentile of the measured attempts, times :data:`MARGIN`, as
#: Kubernetes' Vertical Pod Autoscaler recommends (its target is a high percentile plus a
#: safety margin): one unusual run neither sets nor escapes the figure.
PERCENTILE = 95
MARGIN = 1.15
#: Fewer measured attempts than this, and no figure is suggested: one run is not a pattern.
MIN_RUNS = 3
#: The least memory a suggestion gives: a fresh ``python3`` running runplane's bootstrap in a
#: container, as its cgroup is charged (interpreter, standard library and bootstrap imports,
#: their page cache) is 20-30 MiB; a limit below it is OOMKilled in a pod before the handler
#: runs, whatever a run here measured.
MEMORY_FLOOR = 32 * MEBIBYTE
#: The shortest run whose CPU use counts: below a second, start-up dominates the average and a
#: 0.2 s run "uses" most of a core.
MIN_CPU_SECONDS = 1.0
#: A request above this many times the observed figure is reported as oversized.
OVERSIZED = 4.0


@dataclass(frozen=True, slots=True)
class Spread:
    """How a figure ranged over the attempts a suggestion rests on."""

    count: int
    low: float
    median: float
    high_percentile: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        ordered = sorted(values)
        return cls(
            len(ordered), ordered[0], statistics.median(ordered), percentile(ordered), ordered[-1]
        )


def percentile(ordered: Sequence[float], rank: int = PERCENTILE) -> float:
    """The nearest-rank percentile of sorted ``ordered``: the smallest value that ``rank``
    percent of them do not exceed (with few values, the highest)."""
    return ordered[max(math.ceil(rank / 100 * len(ordered)) - 1, 0)]


@dataclass(frozen=True, slots=True)
class Suggestion:
    """What a function's measured attempts suggest it ask for, and what that rests on.

    ``requests`` and ``limits`` are empty while fewer than :data:`MIN_RUNS` attempts were
    measured (:attr:`enough`); ``notes`` say what the figures leave out (short runs' CPU,
    GPU use)."""

    #: Attempts that measured their usage, and how many a suggestion needs.
    attempts: int
    memory: Spread
    #: Average CPU use of each attempt long enough to count (:data:`MIN_CPU_SECONDS`), in
    #: cores; ``None`` when none was.
    cores: Spread | None
    #: The most GPUs an attempt was given (their use is not measured).
    gpus: int
    requests: dict[str, str]
    limits: dict[str, str]
    needed: int = MIN_RUNS
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def enough(self) -> bool:
        return self.attempts >= self.needed

    @property
    def peak_memory_bytes(self) -> int:
        return int(self.memory.high)

    @property
    def peak_cores(self) -> float:
        return round(self.cores.high, 3) if self.cores else 0.0

    @property
    def basis(self) -> str:
        """What the suggestion rests on, in words."""
        memory = self.memory
        said = (
            f"{self.attempts} measured attempt(s); peak memory {mebibytes(memory.low)} to "
            f"{mebibytes(memory.high)} (median {mebibytes(memory.median)}, p{PERCENTILE} "
            f"{mebibytes(memory.high_percentile)})"
        )
        if self.cores is not None:
            cores = self.cores
            said += (
                f"; average cpu {cores.low:.2f} to {cores.high:.2f} cores (median "
                f"{cores.median:.2f}, p{PERCENTILE} {cores.high_percentile:.2f}) over "
                f"{cores.count} attempt(s) of {MIN_CPU_SECONDS:g} s or more"
            )
        return said

    @property
    def call(self) -> str:
        """The calls that apply it ("" while there are too few runs)."""
        if not self.enough:
            return ""
        requests = ", ".join(f"{_arg(k)}={v!r}" for k, v in self.requests.items())
        limits = ", ".join(
            f"gpus={v}" if k == names.GPU else f"{_arg(k)}={v!r}" for k, v in self.limits.items()
        )
        return f"fn.with_requests({requests}).with_limits({limits})"

    @property
    def verdict(self) -> str:
        """The suggestion, or why there is none yet."""
        if not self.enough:
            return (
                f"too few runs: {self.attempts} of {self.needed} measured attempts needed "
                "before a suggestion is made"
            )
        return (
            f"{self.call}  # p{PERCENTILE} x {MARGIN:g}, at least "
            f"{mebibytes(MEMORY_FLOOR)} of memory"
        )

    def to_json(self) -> dict[str, Any]:
        """The suggestion as the API returns it."""
        return {
            "attempts": self.attempts,
            "needed": self.needed,
            "enough": self.enough,
            "percentile": PERCENTILE,
            "margin": MARGIN,
            "memory_floor_bytes": MEMORY_FLOOR,
            "memory_bytes": _spread_json(self.memory),
            "cpu_cores": None if self.cores is None else _spread_json(self.cores),
            "gpus": self.gpus,
            "requests": self.requests,
            "limits": self.limits,
            "call": self.call,
            "basis": self.basis,
            "verdict": self.verdict,
            "notes": self.notes,
            "warnings": self.warnings,
        }


def suggestion_json(proposal: Suggestion | None) -> dict[str, Any]:
    """A suggestion as the API and the UI give it, or why there is none (no attempt measured
    its usage: a cluster without metrics, or runs that never started)."""
    if proposal is not None:
        return proposal.to_json()
    return {
        "attempts": 0,
        "needed": MIN_RUNS,
        "enough": False,
        "requests": {},
        "limits": {},
        "call": "",
        "basis": "no attempt recorded its usage",
        "verdict": f"too few runs: 0 of {MIN_RUNS} measured attempts needed",
        "notes": [],
        "warnings": [],
    }


def _spread_json(spread: Spread) -> dict[str, float]:
    return {
        "count": spread.count,
        "min": spread.low,
        "median": spread.median,
        f"p{PERCENTILE}": spread.high_percentile,
        "max": spread.high,
    }


def _arg(resource: str) -> str:
    return "mem" if resource == "memory" else resource


def _millicores(cores: float) -> str:
    return f"{max(math.ceil(cores * 100) * 10, 10)}m"  # whole tens of millicores, at least 10m


def _seconds(attempt: AttemptRecord) -> float:
    return (attempt.ended_at or 0.0) - (attempt.started_at or 0.0)


def _gpus(attempt: AttemptRecord) -> int:
    given = attempt.limits.get(names.GPU, attempt.requests.get(names.GPU, 0))
    return resource_amount(names.GPU, given) if given else 0


def suggest(
    records: Sequence[RunRecord], current: Mapping[str, Any] | None = None
) -> Suggestion | None:
    """Requests and limits for the function of ``records`` (its runs), from the attempts that
    measured usage: memory request = limit = the :data:`PERCENTILE` of their peaks x
    :data:`MARGIN`, at least :data:`MEMORY_FLOOR`; CPU request = the same of the average use
    of the attempts that ran :data:`MIN_CPU_SECONDS` or more (no CPU limit: throttling costs
    more than it saves); GPUs as given. Nothing is suggested from fewer than
    :data:`MIN_RUNS` attempts; ``None`` when no attempt was measured. ``current`` (the
    function's requests) is checked against what was observed."""
    measured = [
        attempt
        for record in records
        for attempt in record.attempts
        if attempt.peak_memory_bytes
        and attempt.started_at is not None
        and attempt.ended_at is not None
    ]
    if not measured:
        return None
    memory = Spread.of([float(attempt.peak_memory_bytes) for attempt in measured])
    timed = [attempt for attempt in measured if _seconds(attempt) >= MIN_CPU_SECONDS]
    cores = Spread.of([a.cpu_seconds / _seconds(a) for a in timed]) if timed else None
    gpus = max(_gpus(attempt) for attempt in measured)
    notes = []
    if len(timed) < len(measured):
        notes.append(
            f"cpu: {len(measured) - len(timed)} attempt(s) ran under {MIN_CPU_SECONDS:g} s, "
            "too short to measure CPU use; they are left out"
            + ("" if timed else ", so no CPU request is suggested")
        )
    grown = [
        resize
        for record in records
        for resize in record.resizes
        if resize.applied and resize.memory_to is not None
    ]
    if grown:
        most = max(resize.memory_to or 0 for resize in grown)
        notes.append(
            f"memory: {len(grown)} resize(s) in place gave "
            f"attempts up to {mebibytes(most, up=True)}; their peaks, measured past the "
            "limits they started with, are what the memory figure rests on"
        )
    if gpus:
        notes.append(
            f"gpus: the runs were given up to {gpus}; how much of them they used is not "
            "measured, so the suggestion keeps what they were given"
        )
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if len(measured) >= MIN_RUNS:
        target = max(memory.high_percentile * MARGIN, MEMORY_FLOOR)
        if cores is not None:
            requests["cpu"] = _millicores(cores.high_percentile * MARGIN)
        requests["memory"] = limits["memory"] = mebibytes(target, up=True)
        if gpus:  # a GPU limit is its request too
            limits[names.GPU] = str(gpus)
    observed_cores = cores.high_percentile if cores else 0.0
    warnings = oversized(current or {}, int(memory.high_percentile), observed_cores)
    return Suggestion(
        attempts=len(measured),
        memory=memory,
        cores=cores,
        gpus=gpus,
        requests=requests,
        limits=limits,
        notes=notes,
        warnings=warnings,
    )


def oversized(requests: Mapping[str, Any], peak_memory: int, peak_cores: float) -> list[str]:
    """Warnings for requests above :data:`OVERSIZED` times what was observed: the scheduler
    reserves what is asked for, so the rest of the node stays idle."""
    found = []
    asked = Quantities.of({k: v for k, v in requests.items() if k in ("cpu", "memory")})
    if asked.memory is not None and peak_memory and asked.memory > OVERSIZED * peak_memory:
        found.append(
            f"oversized-request (memory): requests {requests['memory']}, more than "
            f"{OVERSIZED:g}x the observed peak {mebibytes(peak_memory, up=True)} "
            f"(p{PERCENTILE})"
        )
    if asked.cpu is not None and peak_cores and asked.cpu / 1000 > OVERSIZED * peak_cores:
        found.append(
            f"oversized-request (cpu): requests {requests['cpu']}, more than "
            f"{OVERSIZED:g}x the observed average use {peak_cores:.2f} cores (p{PERCENTILE})"
        )
    return found
