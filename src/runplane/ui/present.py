"""How values read on a page: times, durations, sizes, resources (Jinja filters)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from runplane.runs import RunRecord
from runplane.spec.quantity import unit_of


def when(epoch: float | None) -> str:
    """A time as this machine's local clock shows it."""
    if not epoch:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


def iso(epoch: float | None) -> str:
    if not epoch:
        return ""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(epoch))


def duration(seconds: float | None) -> str:
    """``1h 02m``, ``3m 05s``, ``4.2s``: as short as stays exact enough to read."""
    if seconds is None:
        return ""
    if seconds < 10:
        return f"{max(seconds, 0):.1f}s"
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def run_duration(run: RunRecord) -> str:
    """How long the run ran (or has run so far); empty before it started."""
    if run.started_at is None:
        return ""
    end = run.ended_at if run.ended_at is not None else time.time()
    return duration(end - run.started_at)


def size(amount: int | float | None) -> str:
    """Bytes in binary units, as Kubernetes writes memory (``512Mi``)."""
    if not amount:
        return "0"
    value = float(amount)
    for unit in ("", "Ki", "Mi", "Gi", "Ti"):
        if abs(value) < 1024 or unit == "Ti":
            return f"{value:.0f}{unit}" if unit == "" else f"{value:.1f}{unit}".replace(".0", "")
        value /= 1024
    return str(amount)


def cpu_time(seconds: float | None) -> str:
    """CPU seconds to the precision that says something: a short run's few milliseconds
    are not "0.00 s"."""
    if not seconds:
        return "0 s"
    if seconds < 0.1:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds:.2f} s" if seconds < 100 else f"{seconds:.0f} s"


def millicores(amount: int | None) -> str:
    """CPU in placement's millicores, as a user writes it (``500m``, ``2``)."""
    if amount is None:
        return ""
    return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"


def limit_size(amount: int | None) -> str:
    """A memory limit: its size, or ``unlimited``."""
    return "unlimited" if amount is None else size(amount)


def limit_cores(amount: int | None) -> str:
    """A CPU limit in millicores: as a user writes it, or ``unlimited``."""
    return "unlimited" if amount is None else millicores(amount)


def resource(name: str, amount: int) -> str:
    """One of placement's integer amounts in its usual unit."""
    unit = unit_of(name)
    if unit == "millicores":
        return millicores(amount)
    if unit == "bytes":
        return size(amount)
    return str(amount)


def resources(requests: Mapping[str, Any], limits: Mapping[str, Any]) -> str:
    """``cpu 100m/1 · memory 32Mi/1Gi · nvidia.com/gpu 1``: request/limit per resource."""
    parts = []
    for key in sorted({*requests, *limits}, key=lambda k: (k not in ("cpu", "memory"), k)):
        request, limit = requests.get(key), limits.get(key)
        if key in ("cpu", "memory"):
            parts.append(f"{key} {request if request is not None else '-'}/{limit or '-'}")
        else:
            parts.append(f"{key} {limit}")
    return " · ".join(parts) or "none set"


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


FILTERS: dict[str, Callable[..., Any]] = {
    "when": when,
    "iso": iso,
    "duration": duration,
    "run_duration": run_duration,
    "size": size,
    "limit_size": limit_size,
    "limit_cores": limit_cores,
    "cpu_time": cpu_time,
    "resource": resource,
    "resource_of": resource,
    "resources": resources,
    "pretty": pretty,
}
