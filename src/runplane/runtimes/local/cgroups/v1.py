"""cgroup v1: a hierarchy per controller (``memory``, ``cpu``, ``cpuacct``, ``pids``,
``freezer``), a group per run in each; killing freezes the group first."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from runplane.runtimes.local.cgroups.files import (
    executor_name,
    keyed,
    left_behind,
    number,
    processes_in,
    read,
    remove_group,
    rmdir_if_empty,
    rmdir_tree,
    sigkill,
    tree,
    wait_until,
    write,
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
    def __init__(self, dirs: dict[str, Path]) -> None:
        self._dirs = dirs
        self.path = str(dirs["memory"])

    def add(self, pid: int) -> None:
        for directory in self._dirs.values():
            write(directory / "cgroup.procs", pid)

    def joins(self) -> list[str]:
        return [str(directory / "cgroup.procs") for directory in self._dirs.values()]

    def counters(self) -> Counters:
        memory, cpuacct, pids = self._dirs["memory"], self._dirs["cpuacct"], self._dirs["pids"]
        return Counters(
            peak_memory=number(memory / "memory.max_usage_in_bytes"),
            cpu_seconds=number(cpuacct / "cpuacct.usage") / 1e9,
            oom_kills=keyed(memory / "memory.oom_control").get("oom_kill", 0),
            pids_refused=keyed(pids / "pids.events").get("max", 0),
        )

    def kill(self) -> None:
        if number(self._dirs["pids"] / "pids.current") == 0:
            return  # the count covers the groups beneath: no process is left anywhere
        deadline = time.monotonic() + KILL_TIMEOUT
        groups = [group for top in self._dirs.values() for group in tree(top)]
        while processes_in(groups) and time.monotonic() < deadline:
            freeze_and_kill(self._dirs["freezer"], deadline - time.monotonic())
            wait_until(
                lambda: not processes_in(groups), min(0.5, max(deadline - time.monotonic(), 0))
            )

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

    def create(self, name: str, limits: Limits) -> RunGroup:
        dirs = {controller: group / name for controller, group in self._groups.items()}
        try:
            dirs["freezer"].mkdir()
        except FileExistsError:  # left by an earlier attempt whose removal failed
            stale = V1Group(dirs)
            stale.kill()
            stale.remove()
            dirs["freezer"].mkdir()
        try:
            for controller, directory in dirs.items():
                if controller != "freezer":
                    directory.mkdir()
            memory = dirs["memory"]
            if limits.memory is not None:
                write(memory / "memory.limit_in_bytes", limits.memory)
                if self._memsw:
                    write(memory / "memory.memsw.limit_in_bytes", limits.memory)
                else:
                    with contextlib.suppress(OSError):
                        write(memory / "memory.swappiness", 0)
            cpu = dirs["cpu"]
            # A new group starts with the default period and no quota, and without a pids
            # limit: only what differs is written.
            write(cpu / "cpu.shares", cpu_shares(limits.cpu_request))
            if limits.cpu is not None:
                write(cpu / "cpu.cfs_quota_us", cfs_quota(limits.cpu))
            if limits.pids is not None:
                write(dirs["pids"] / "pids.max", limits.pids)
        except OSError:
            group = V1Group(dirs)
            group.remove()
            raise
        return V1Group(dirs)

    def close(self) -> None:
        for group in self._groups.values():
            rmdir_if_empty(group)
        self._groups = {}
