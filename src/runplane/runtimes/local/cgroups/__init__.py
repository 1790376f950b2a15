"""Each run in a cgroup of its own: the kernel enforces its limits and holds its processes.

A run's cgroup lies beneath the cgroup this process is in (``/proc/self/cgroup``), inside a
group of this process's own, ``runplane-<pid>-<start>``: every limit above keeps applying, and
nothing is created at a hierarchy's root or moved out of its subtree. Memory is limited with swap
off, CPU by a CFS quota with requests as relative weights (converted as the kubelet converts
them), processes by a ``pids`` limit. Every descendant of the run's first process stays in the
group (a ``setsid`` or a double fork cannot leave it), so killing the group kills the run, and
its counters (memory peak, CPU time, OOM kills, refused forks) are the run's usage.

cgroup v1 (a hierarchy per controller) and v2 (one unified hierarchy, delegated to a non-root
user or not) sit behind one interface, :class:`Hierarchy`; :func:`open_hierarchy` picks the one
this machine offers, or says why none is writable.
"""

from __future__ import annotations

from pathlib import Path

from runplane.runtimes.local.cgroups.files import (
    executor_name,
    inside,
    maybe_read,
    mounts,
    own_cgroups,
)
from runplane.runtimes.local.cgroups.model import (
    Counters,
    Hierarchy,
    Limits,
    RunGroup,
    Unavailable,
    cfs_quota,
    cpu_shares,
    cpu_weight,
)
from runplane.runtimes.local.cgroups.v1 import CONTROLLERS as V1_CONTROLLERS
from runplane.runtimes.local.cgroups.v1 import V1
from runplane.runtimes.local.cgroups.v2 import CONTROLLERS as V2_CONTROLLERS
from runplane.runtimes.local.cgroups.v2 import V2

__all__ = [
    "Counters",
    "Hierarchy",
    "Limits",
    "RunGroup",
    "Unavailable",
    "cfs_quota",
    "cpu_shares",
    "cpu_weight",
    "delegated",
    "executor_name",
    "open_hierarchy",
    "open_v2",
    "unified_mount",
]


def open_hierarchy(node_millicores: int) -> Hierarchy:
    """This machine's cgroup hierarchy as this process may use it for runs: v2 when the unified
    hierarchy has the memory controller, else v1 when its controllers are mounted. Raises
    :class:`Unavailable` with the reason when neither is writable here."""
    found = mounts()
    own = own_cgroups()
    for mount in found:
        if mount.fstype != "cgroup2" or "" not in own:
            continue
        base = inside(mount, own[""])
        if base is None:
            continue
        root_controllers = maybe_read(mount.point / "cgroup.controllers").split()
        if "memory" in root_controllers or "memory" in maybe_read(base / "cgroup.controllers"):
            return V2(base, own[""], node_millicores, delegated(base))
    bases: dict[str, Path] = {}
    for controller in V1_CONTROLLERS:
        v1 = next((m for m in found if m.fstype == "cgroup" and controller in m.options), None)
        if v1 is None or controller not in own:
            raise Unavailable(f"no cgroup hierarchy with the {controller} controller is mounted")
        base = inside(v1, own[controller])
        if base is None or not base.is_dir():
            raise Unavailable(f"this process's {controller} cgroup is not visible here")
        bases[controller] = base
    return V1(bases, own, node_millicores)


def delegated(base: Path) -> tuple[str, ...]:
    """The controllers of :data:`V2_CONTROLLERS` that the cgroup at ``base`` is given. Hosts
    often delegate only some (a VM's agent that hands commands ``memory`` alone): memory is
    what runs need the kernel for; a CPU limit is kept as whole-core affinity without ``cpu``,
    and no pids limit is set without ``pids``. With no ``memory`` all of them are asked for,
    so that :class:`V2` names what is missing."""
    offered = maybe_read(base / "cgroup.controllers").split()
    if "memory" not in offered:
        return V2_CONTROLLERS
    return tuple(c for c in V2_CONTROLLERS if c in offered)


def open_v2(base: Path, own: str, controllers: tuple[str, ...]) -> Hierarchy:
    """A v2 hierarchy at ``base`` handing runs only ``controllers`` (the unified hierarchy of a
    hybrid machine offers none, yet holds and kills processes as any v2 group does)."""
    return V2(base, own, 1000, controllers)


def unified_mount() -> tuple[Path, str] | None:
    """This process's cgroup directory on a cgroup v2 mount, and its path, if one is mounted."""
    own = own_cgroups()
    for mount in mounts():
        if mount.fstype == "cgroup2" and "" in own:
            base = inside(mount, own[""])
            if base is not None:
                return base, own[""]
    return None
