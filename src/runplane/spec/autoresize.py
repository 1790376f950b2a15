"""Live right-sizing as a function states it: how far a running job's memory and CPU limits
may be raised in place, by how much at a time, and when.

A job that nears its memory limit is otherwise OOM-killed and, with an OOM retry, started again
from the beginning with more memory. With ``fn.with_autoresize(max_mem=..., max_cpu=...)`` the
runtime raises the running job's limits where it runs instead (its cgroup here, the pod's
``resize`` subresource on Kubernetes), never past ``max_*``; this module only says what a valid
setting is (the runtimes apply it, see docs/resilience.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pydantic

from runplane.errors import InvalidValueError
from runplane.spec.base import SpecModel, checked
from runplane.spec.durations import parse_duration
from runplane.spec.quantity import parse_quantity, resource_amount

#: The shortest and longest time memory must stay above the threshold before a resize.
MIN_WINDOW, MAX_WINDOW = 0.2, 600.0
#: The default window: long enough to ignore a spike, short enough to act before the limit.
DEFAULT_WINDOW = "2s"
EXAMPLE = "with_autoresize(max_mem='4Gi', max_cpu='2')"


def check_window(field: str, value: object) -> float:
    """Seconds in a window: a duration (``'2s'``) or a number of seconds."""
    if isinstance(value, bool):
        raise InvalidValueError(field, value, "a duration such as '2s', or seconds", EXAMPLE)
    seconds = float(value) if isinstance(value, int | float) else parse_duration(field, value)
    if not MIN_WINDOW <= seconds <= MAX_WINDOW:
        raise InvalidValueError(
            field,
            value,
            f"a window between {MIN_WINDOW} seconds and {MAX_WINDOW:.0f} seconds",
            "window='2s'",
        )
    return seconds


def _check_memory(field: str, value: object) -> str:
    if parse_quantity(field, value, "memory") <= 0:
        raise InvalidValueError(field, value, "a memory amount above zero", EXAMPLE)
    return str(value)


def _check_cpu(field: str, value: object) -> str:
    if parse_quantity(field, value, "cpu") <= 0:
        raise InvalidValueError(field, value, "a CPU amount above zero", EXAMPLE)
    return str(value)


class AutoResize(SpecModel):
    """How a running job's limits grow in place (``spec.autoresize``)."""

    field_path = "spec.autoresize"

    #: The most memory the job's limit is raised to (a quantity, ``'4Gi'``).
    max_mem: str
    #: The most CPU its limit is raised to, or ``None``: the CPU limit is never changed.
    max_cpu: str | None = None
    #: Each resize multiplies the limit by this much (capped at ``max_*``).
    step: float = pydantic.Field(default=1.5, ge=1.1, le=8)
    #: The share of the memory limit in use that counts as near it.
    threshold: float = pydantic.Field(default=0.9, ge=0.5, le=0.99)
    #: How long memory must stay above the threshold (or CPU be throttled) before a resize.
    window: str | float = DEFAULT_WINDOW

    _max_mem = checked("max_mem", by=_check_memory)
    _max_cpu = checked("max_cpu", by=_check_cpu, optional=True)
    _window = checked("window", by=check_window, keep=True)


@dataclass(frozen=True, slots=True)
class AutoResizePlan:
    """A function's :class:`AutoResize` as numbers, as a runtime applies it: bytes,
    millicores (``None``: CPU is never resized), seconds. It travels on the rendered pod as
    one annotation (:meth:`to_text`), so each runtime reads it from what it runs."""

    max_memory: int
    max_cpu: int | None
    step: float
    threshold: float
    window: float

    @classmethod
    def of(cls, setting: AutoResize) -> AutoResizePlan:
        return cls(
            max_memory=resource_amount("memory", setting.max_mem),
            max_cpu=None if setting.max_cpu is None else resource_amount("cpu", setting.max_cpu),
            step=setting.step,
            threshold=setting.threshold,
            window=check_window("spec.autoresize.window", setting.window),
        )

    def to_text(self) -> str:
        return json.dumps(
            {
                "max_memory": self.max_memory,
                "max_cpu": self.max_cpu,
                "step": self.step,
                "threshold": self.threshold,
                "window": self.window,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_text(cls, text: str) -> AutoResizePlan | None:
        """The plan an annotation holds; ``None`` for anything else (a pod edited by hand
        is not resized, never refused)."""
        try:
            data: Any = json.loads(text)
            max_cpu = data["max_cpu"]
            return cls(
                max_memory=int(data["max_memory"]),
                max_cpu=None if max_cpu is None else int(max_cpu),
                step=float(data["step"]),
                threshold=float(data["threshold"]),
                window=float(data["window"]),
            )
        except (ValueError, TypeError, KeyError):
            return None
