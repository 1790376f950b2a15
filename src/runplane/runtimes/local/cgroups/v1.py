"""cgroup v1: a hierarchy per controller (``memory``, ``cpu``, ``cpuacct``, ``pids``,
``freezer``), a group per run in each; killing freezes the group first."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from runplane.runtimes.local.cgroups.files import (
    executor_name,
    keyed_text,
    left_behind,
    number,
    number_text,
    processes_in,
    remove_group,
    rmdir_if_empty,
    rmdir_tree,
    sigkill,
    tree,
    wait_until,
)
from runplane.runtimes.local.cgroups.model import (
    KILL_TIMEOUT,
    Counters,
    Hierarchy,
    Limits,
    RunGroup,
    Unavailable,
    cfs_quota,
    cpu_shares,
)
from runplane.runtimes.local.cgroups.steps import read, write

#: The controllers a run's group needs.
CONTROLLERS = ("memory", "cpu", "cpuacct", "pids", "freezer")


def freeze_and_kill(freezer: Path, timeout: float) -> None:
    """Freeze the group (so nothing forks while it is being killed), SIGKILL every process in it
    and its descendants, and thaw it so the signals are delivered."""
    if not processes_in(tree(freezer)):
        return
    state = freezer / "freezer.state"
    write(state, "FROZEN")
    try:
        wait_until(lambda: read(state) == "FROZEN", min(timeout, 1.0))
        sigkill(processes_in(tree(freezer)))
    finally:
        write(state, "THAWED")


class V1Group(RunGroup):
    def __init__(
        self, dirs: dict[str, Path], writes: Sequence[tuple[str, str | int, bool]] = ()
    ) -> None:
        self._dirs = dirs
        self.path = str(dirs["memory"])
        memory, cpuacct, pids = dirs["memory"], dirs["cpuacct"], dirs["pids"]
        self._peak = str(memory / "memory.max_usage_in_bytes")
        self._cpu = str(cpuacct / "cpuacct.usage")
        self._oom = str(memory / "memory.oom_control")
        self._refused = str(pids / "pids.events")
        self.steps = {
            "dirs": [str(directory) for directory in dirs.values()],
            "writes": list(writes),
            "joins": [str(directory / "cgroup.procs") for directory in dirs.values()],
            # pids.current counts the groups beneath too: 0, and no process is left anywhere.
            "empty": [str(pids / "pids.current"), "0"],
            "counters": [self._peak, self._cpu, self._oom, self._refused],
            "removes": [str(directory) for directory in dirs.values()],
        }

    def counted(self, texts: Mapping[str, str]) -> Counters:
        return Counters(
            peak_memory=number_text(texts.get(self._peak, "")),
            cpu_seconds=number_text(texts.get(self._cpu, "")) / 1e9,
            oom_kills=keyed_text(texts.get(self._oom, "")).get("oom_kill", 0),
            pids_refused=keyed_text(texts.get(self._refused, "")).get("max", 0),
        )

    def kill(self) -> None:
        if number(self._dirs["pids"] / "pids.current") == 0:
            return  # no process is left anywhere beneath (or the group is gone)
        deadline = time.monotonic() + KILL_TIMEOUT
        groups = [group for top in self._dirs.values() for group in tree(top)]
        try:
            while processes_in(groups) and time.monotonic() < deadline:
                freeze_and_kill(self._dirs["freezer"], deadline - time.monotonic())
                wait_until(
                    lambda: not processes_in(groups),
                    min(0.5, max(deadline - time.monotonic(), 0)),
                )
        except FileNotFoundError:
            pass  # removed meanwhile, which only an empty group is

    def remove(self) -> None:
        for directory in self._dirs.values():
            remove_group(directory)


class V1(Hierarchy):
    version = "cgroup v1"

    def __init__(self, bases: dict[str, Path], own: dict[str, str], node_millicores: int) -> None:
        self._bases = bases
        self.where = own["memory"]
        name = executor_name()
        self._groups: dict[str, Path] = {}
        self._memsw = False
        try:
            for controller, base in bases.items():
                if not os.access(base, os.W_OK):
                    raise Unavailable(f"{base} is not writable by uid {os.geteuid()}")
                group = base / name
                group.mkdir(exist_ok=True)
                self._groups[controller] = group
            write(self._groups["cpu"] / "cpu.shares", cpu_shares(node_millicores))
            # Whether swap is accounted (``memsw`` files): then the limit covers swap too.
            self._memsw = (self._groups["memory"] / "memory.memsw.limit_in_bytes").exists()
        except OSError as error:
            self.close()
            raise Unavailable(f"cannot create a cgroup under {base}: {error.strerror}") from None
        except Unavailable:
            self.close()
            raise
        self._sweep()

    def _sweep(self) -> None:
        """Kill and remove what runplane processes that are gone left behind (a run's daemon
        outlives its executor's SIGKILL; its group does not outlive the next runplane)."""
        for name in left_behind(self._bases["freezer"]):
            with contextlib.suppress(OSError):
                freeze_and_kill(self._bases["freezer"] / name, KILL_TIMEOUT)
                for base in self._bases.values():
                    rmdir_tree(base / name)

    def group(self, name: str, limits: Limits) -> RunGroup:
        dirs = {controller: group / name for controller, group in self._groups.items()}
        memory, cpu = dirs["memory"], dirs["cpu"]
        writes: list[tuple[str, str | int, bool]] = []
        if limits.memory is not None:
            writes.append((str(memory / "memory.limit_in_bytes"), limits.memory, False))
            if self._memsw:  # the limit covers swap too
                writes.append((str(memory / "memory.memsw.limit_in_bytes"), limits.memory, False))
            else:
                writes.append((str(memory / "memory.swappiness"), 0, True))
        # A new group starts with the default period and no quota, and without a pids limit:
        # only what differs is written.
        writes.append((str(cpu / "cpu.shares"), cpu_shares(limits.cpu_request), False))
        if limits.cpu is not None:
            writes.append((str(cpu / "cpu.cfs_quota_us"), cfs_quota(limits.cpu), False))
        if limits.pids is not None:
            writes.append((str(dirs["pids"] / "pids.max"), limits.pids, False))
        return V1Group(dirs, writes)

    def close(self) -> None:
        for group in self._groups.values():
            rmdir_if_empty(group)
        self._groups = {}
