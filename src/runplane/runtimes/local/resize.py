"""Live right-sizing of a run on this machine: its cgroup's limits raised in place, never a
restart.

A right-sized run (``with_autoresize``, :mod:`runplane.rendering.autoresize`) is watched by its
supervisor every :data:`LOOK_INTERVAL` seconds: when its memory stays above the plan's
threshold of its limit for the plan's window, its memory limit grows ``step`` times (at most
``max_mem``); when its CPU was throttled in most periods over the window and ``max_cpu`` allows,
its CPU quota does too. A person's resize (``runplane resize``) takes the same path. Either is
granted only within the machine's free room: the capacity ledger's unreserved requests (the
run's requests grow by what its limits grew), its project's quota, and the memory the kernel
has available now. A resize that cannot be granted is refused with the reason, and the run goes
on as it was. A memory grow right-sizing asked for and the machine refused is recorded as a
``fallback`` (the supervisor's), as a node's ``Infeasible`` is on a cluster: an OOM kill of
that attempt is retried with at least the memory asked for (``service/retries.py``), capped at
the machine's memory; right-sizing keeps looking meanwhile, since room frees as other runs
end.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Callable, Mapping

import psutil

from runplane.runs import ResizeRecord
from runplane.runtimes.local.cgroups import RunGroup
from runplane.runtimes.resizing import Sizes
from runplane.spec.quantity import mebibytes

#: Seconds between two looks at a right-sized run's memory and CPU.
LOOK_INTERVAL = 0.25

#: Grants ``(uid, more requests)`` on the machine's ledger: ``""`` when granted, else why not.
Room = Callable[[str, Mapping[str, int]], str]


class QuotaShort(str):
    """A refusal by the run's project's quota (a :data:`Room`'s answer): a larger retry would
    wait on the same quota, so it is no reason to retry at the size asked."""


class Refused(Exception):
    """A resize that cannot be granted; the message says why, in words for the run's page.
    ``for_room``: refused for the machine's room (its unreserved capacity, the kernel's free
    memory), which a retry at the size asked may find elsewhere in time; not for the
    project's quota, the run's own state or its cgroup."""

    def __init__(self, message: str, for_room: bool = False) -> None:
        super().__init__(message)
        self.for_room = for_room


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
                held = group.gauges().memory + sizes.inherited
                if memory_to < held:
                    raise Refused(
                        f"the run holds {mebibytes(held)} now, more than {mebibytes(memory_to)}"
                    )
        if cpu_to is not None and cpu_from is not None and cpu_to > cpu_from:
            more["cpu"] = cpu_to - cpu_from
        if more:
            not_granted = room(uid, more)
            if not_granted:
                raise Refused(not_granted, for_room=not isinstance(not_granted, QuotaShort))
        available = psutil.virtual_memory().available
        if more.get("memory", 0) > available:
            room(uid, {name: -amount for name, amount in more.items()})
            raise Refused(
                f"this machine has {mebibytes(available)} of memory available, less than the "
                f"{mebibytes(more['memory'])} more asked",
                for_room=True,
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
        less = {
            name: after - before
            for name, before, after in (
                ("memory", memory_from, memory_to),
                ("cpu", cpu_from, cpu_to),
            )
            if before is not None and after is not None and after < before
        }
        if less:  # what a smaller limit no longer needs is given back to the machine
            room(uid, less)
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
