"""What every runtime shares of live right-sizing: when a right-sized run is due for a resize
(:func:`wanted`, the same decision here and on a cluster), and a resize in words."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from runplane.runs import ResizeRecord
from runplane.spec.autoresize import AutoResizePlan
from runplane.spec.quantity import mebibytes

#: The share of CFS periods throttled, over the window, that counts as CPU-starved.
THROTTLED_SHARE = 0.5


def millicores(amount: int | None) -> str:
    return "unlimited" if amount is None else f"{amount}m"


def memory(amount: int | None) -> str:
    return "unlimited" if amount is None else mebibytes(amount)


def described(record: ResizeRecord) -> str:
    """A resize in words, for the run's status text."""
    parts = []
    if record.memory_to != record.memory_from:
        parts.append(f"memory {memory(record.memory_from)} → {memory(record.memory_to)}")
    if record.cpu_to != record.cpu_from:
        parts.append(f"CPU {millicores(record.cpu_from)} → {millicores(record.cpu_to)}")
    who = "right-sized" if record.mode == "auto" else f"resized by {record.by or 'a person'}"
    return f"{who} in place: {', '.join(parts)} ({record.why})"


@dataclass
class Watch:
    """What a right-sized run's supervisor remembers between two looks."""

    plan: AutoResizePlan
    above_since: float | None = None
    #: (when, periods, throttled periods) at the start of the current window.
    cpu_mark: tuple[float, int, int] | None = None
    #: The most recent reason a resize was refused, so the same refusal is told once.
    refused: str = ""


@dataclass
class Sizes:
    """A running run's limits and requests as they are now (bytes, millicores)."""

    memory: int | None
    cpu: int | None
    #: What the group is limited to below the run's limit (a warm run's inherited pages).
    inherited: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def wanted(
    watch: Watch,
    sizes: Sizes,
    held: int,
    throttling: tuple[int, int] | None,
    now: float,
) -> tuple[int | None, int | None, str] | None:
    """The limits a right-sized run should have now (``None`` for one that stays), and why;
    ``None`` when nothing is due. ``held``: the memory it holds now; ``throttling``: the CFS
    periods it ran in and was throttled in so far (``None``: not known, CPU stays)."""
    plan = watch.plan
    memory_to: int | None = None
    cpu_to: int | None = None
    reasons = []
    if sizes.memory is not None:
        if held >= plan.threshold * sizes.memory and sizes.memory < plan.max_memory:
            if watch.above_since is None:
                watch.above_since = now
            elif now - watch.above_since >= plan.window:
                memory_to = min(plan.max_memory, int(sizes.memory * plan.step))
                reasons.append(
                    f"memory {mebibytes(held)} stayed above {plan.threshold:.0%} of its limit "
                    f"{mebibytes(sizes.memory)} for {plan.window:g} s"
                )
        else:
            watch.above_since = None
    if (
        plan.max_cpu is not None
        and throttling is not None
        and sizes.cpu is not None
        and sizes.cpu < plan.max_cpu
    ):
        periods, throttled = throttling
        if watch.cpu_mark is None:
            watch.cpu_mark = (now, periods, throttled)
        elif now - watch.cpu_mark[0] >= plan.window:
            _, first_periods, first_throttled = watch.cpu_mark
            ran, held_back = periods - first_periods, throttled - first_throttled
            watch.cpu_mark = (now, periods, throttled)
            if ran > 0 and held_back >= THROTTLED_SHARE * ran:
                cpu_to = min(plan.max_cpu, int(sizes.cpu * plan.step))
                reasons.append(
                    f"CPU was throttled in {held_back} of {ran} periods at its limit "
                    f"{millicores(sizes.cpu)}"
                )
    if memory_to is None and cpu_to is None:
        return None
    return memory_to, cpu_to, "; ".join(reasons)
