"""Right-sizing from what runs really used: requests and limits a function's recorded attempts
suggest, and a warning when what it asks for is far above what it ever used.

Pure: it reads run records (each attempt's peak memory and CPU seconds), so the same answer
comes from the embedded default and from a service, for any runtime that measures usage.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runplane.rendering.resources import Quantities
from runplane.runs import RunRecord
from runplane.spec.quantity import mebibytes

#: Suggested = observed peak x this: room for the run that uses a little more.
HEADROOM = 1.2
#: A request above this many times the observed peak is reported as oversized.
OVERSIZED = 4.0


@dataclass(frozen=True, slots=True)
class Suggestion:
    """What a function's measured attempts suggest it ask for, and from how many attempts."""

    attempts: int
    peak_memory_bytes: int
    #: The highest average CPU use of an attempt, in cores (CPU seconds / seconds running).
    peak_cores: float
    requests: dict[str, str]
    limits: dict[str, str]
    warnings: list[str] = field(default_factory=list)

    @property
    def call(self) -> str:
        """The calls that apply it."""
        requests = ", ".join(f"{_arg(k)}={v!r}" for k, v in self.requests.items())
        limits = ", ".join(f"{_arg(k)}={v!r}" for k, v in self.limits.items())
        return f"fn.with_requests({requests}).with_limits({limits})"


def _arg(resource: str) -> str:
    return "mem" if resource == "memory" else resource


def _millicores(cores: float) -> str:
    return f"{max(math.ceil(cores * 100) * 10, 10)}m"  # whole tens of millicores, at least 10m


def suggest(
    records: Sequence[RunRecord], current: Mapping[str, Any] | None = None
) -> Suggestion | None:
    """Requests and limits for the function of ``records`` (its runs), from the attempts that
    measured usage: memory request = limit = the highest peak x :data:`HEADROOM`, CPU request =
    the highest average use x :data:`HEADROOM` (no CPU limit: throttling costs more than it
    saves); ``None`` when no attempt was measured. ``current`` (the function's requests) is
    checked against what was observed."""
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
    peak = max(attempt.peak_memory_bytes for attempt in measured)
    cores = max(
        attempt.cpu_seconds / max((attempt.ended_at or 0) - (attempt.started_at or 0), 1e-3)
        for attempt in measured
    )
    memory = mebibytes(max(peak * HEADROOM, 1), up=True)
    warnings = [text for text in oversized(current or {}, peak, cores) if text]
    return Suggestion(
        attempts=len(measured),
        peak_memory_bytes=peak,
        peak_cores=round(cores, 3),
        requests={"cpu": _millicores(cores * HEADROOM), "memory": memory},
        limits={"memory": memory},
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
            f"{OVERSIZED:g}x the observed peak {mebibytes(peak_memory, up=True)}"
        )
    if asked.cpu is not None and peak_cores and asked.cpu / 1000 > OVERSIZED * peak_cores:
        found.append(
            f"oversized-request (cpu): requests {requests['cpu']}, more than "
            f"{OVERSIZED:g}x the observed average use {peak_cores:.2f} cores"
        )
    return found
