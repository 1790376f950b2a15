"""Live right-sizing of a run on this machine: its cgroup's limits raised in place, never a
restart.

A right-sized run (``with_autoresize``, :mod:`runplane.rendering.autoresize`) is watched by its
supervisor every :data:`LOOK_INTERVAL` seconds: when its memory stays above the plan's
threshold of its limit for the plan's window, its memory limit grows ``step`` times (at most
``max_mem``); when its CPU was throttled in most periods over the window and ``max_cpu`` allows,
its CPU quota does too. A person's resize (``runplane resize``) takes the same path. Either is
granted only within the machine's free room: the capacity ledger's unreserved requests (the
run's requests grow by what its limits grew) and the memory the kernel has available now. A
resize that cannot be granted is refused with the reason, and the run goes on as it was (an
OOM kill later is retried as any other, with more memory).
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import psutil

from runplane.runs import ResizeRecord
from runplane.runtimes.local.cgroups import RunGroup
from runplane.runtimes.resizing import millicores
from runplane.spec.autoresize import AutoResizePlan
from runplane.spec.quantity import mebibytes

#: Seconds between two looks at a right-sized run's memory and CPU.
LOOK_INTERVAL = 0.25
#: The share of CFS periods throttled, over the window, that counts as CPU-starved.
THROTTLED_SHARE = 0.5

#: Grants ``(uid, more requests)`` on the machine's ledger: ``""`` when granted, else why not.
Room = Callable[[str, Mapping[str, int]], str]


class Refused(Exception):
    """A resize that cannot be granted; the message says why, in words for the run's page."""


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
    watch: Watch, sizes: Sizes, group: RunGroup, now: float
) -> tuple[int | None, int | None, str] | None:
    """The limits a right-sized run should have now (``None`` for one that stays), and why;
    ``None`` when nothing is due."""
    plan = watch.plan
    memory_to: int | None = None
    cpu_to: int | None = None
    reasons = []
    if sizes.memory is not None:
        held = group.counters().memory + sizes.inherited
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
    if plan.max_cpu is not None and sizes.cpu is not None and sizes.cpu < plan.max_cpu:
        periods, throttled = group.throttling()
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


def resize(
    uid: str,
    attempt: int,
    sizes: Sizes,
    group: RunGroup | None,
    room: Room,
    memory: int | None,
    cpu: int | None,
    why: str,
    mode: str = "auto",
    by: str = "",
) -> ResizeRecord:
    """Change a running run's limits to ``memory`` and ``cpu`` (``None``: as they are), within
    the machine's free room, and the record of the change. Raises :class:`Refused` with the
    reason when it cannot be granted (nothing is changed then)."""
    with sizes.lock:
        memory_from, cpu_from = sizes.memory, sizes.cpu
        memory_to = memory_from if memory is None else memory
        cpu_to = cpu_from if cpu is None else cpu
        if memory_to == memory_from and cpu_to == cpu_from:
            raise Refused("the run has these limits already")
        more = {}
        if memory_to is not None:
            if memory_from is not None and memory_to > memory_from:
                more["memory"] = memory_to - memory_from
            if group is not None:
                held = group.counters().memory + sizes.inherited
                if memory_to < held:
                    raise Refused(
                        f"the run holds {mebibytes(held)} now, more than {mebibytes(memory_to)}"
                    )
        if cpu_to is not None and cpu_from is not None and cpu_to > cpu_from:
            more["cpu"] = cpu_to - cpu_from
        if more:
            not_granted = room(uid, more)
            if not_granted:
                raise Refused(not_granted)
        available = psutil.virtual_memory().available
        if more.get("memory", 0) > available:
            room(uid, {name: -amount for name, amount in more.items()})
            raise Refused(
                f"this machine has {mebibytes(available)} of memory available, less than the "
                f"{mebibytes(more['memory'])} more asked"
            )
        if group is not None:
            try:
                group.set_limits(
                    None if memory_to is None else max(memory_to - sizes.inherited, 1 << 20),
                    cpu_to if cpu_to != cpu_from else None,
                )
            except OSError as error:
                if more:  # given back: the limits did not change
                    room(uid, {name: -amount for name, amount in more.items()})
                if error.errno == errno.EBUSY:
                    raise Refused(
                        "the kernel could not bring the run's memory under the new limit"
                    ) from None
                raise Refused(f"the run's cgroup refused the change: {error.strerror}") from None
        sizes.memory, sizes.cpu = memory_to, cpu_to
    return ResizeRecord(
        at=time.time(),
        attempt=attempt,
        memory_from=memory_from,
        memory_to=memory_to,
        cpu_from=cpu_from,
        cpu_to=cpu_to,
        why=why,
        mode=mode,
        by=by,
    )
