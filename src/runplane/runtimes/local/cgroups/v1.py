"""cgroup v1: a hierarchy per controller (``memory``, ``cpu``, ``cpuacct``, ``pids``,
``freezer``), a group per run in each; killing freezes the group first."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from runplane.runtimes.local.cgroups import files, model
from runplane.runtimes.local.cgroups.steps import read, write

#: The controllers a run's group needs.
CONTROLLERS = ("memory", "cpu", "cpuacct", "pids", "freezer")


def freeze_and_kill(freezer: Path, timeout: float) -> None:
    """Freeze the group (so nothing forks while it is being killed), SIGKILL every process in it
    and its descendants, and thaw it so the signals are delivered. A group that is removed
    meanwhile (its last process exited) is left at the step that finds it gone: nothing of it
    is left to kill or to thaw.

    Every group of the tree is thawed, not only the top one: a group frozen on its own (a
    runplane killed between its freeze and its thaw) stays frozen when its parent thaws, and
    its processes would hold their SIGKILL, and the group, forever."""
    if not files.processes_in(files.tree(freezer)):
        return
    state = freezer / "freezer.state"
    with files.unless_gone():
        write(state, "FROZEN")
        try:
            files.wait_until(lambda: read(state) == "FROZEN", min(timeout, 1.0))
            files.sigkill(files.processes_in(files.tree(freezer)))
        finally:
            for group in files.tree(freezer):
                with files.unless_gone():
                    write(group / "freezer.state", "THAWED")


class V1Group(model.RunGroup):
    def __init__(
        self, dirs: dict[str, Path], writes: Sequence[tuple[str, str | int, bool]] = ()
    ) -> None:
        self._dirs = dirs
        self.path = str(dirs["memory"])
        memory, cpuacct, pids = dirs["memory"], dirs["cpuacct"], dirs["pids"]
        self._peak = str(memory / "memory.max_usage_in_bytes")
        self._cpu = str(cpuacct / "cpuacct.usage")
        self._now = str(memory / "memory.usage_in_bytes")
        self._oom = str(memory / "memory.oom_control")
        self._refused = str(pids / "pids.events")
        self.steps = {
            "dirs": [str(directory) for directory in dirs.values()],
            "writes": list(writes),
            "joins": [str(directory / "cgroup.procs") for directory in dirs.values()],
            # pids.current counts the groups beneath too: 0, and no process is left anywhere.
            "empty": [str(pids / "pids.current"), "0"],
            "counters": [self._peak, self._cpu, self._oom, self._refused, self._now],
            "removes": [str(directory) for directory in dirs.values()],
        }
        self._gauges = (self._now, self._peak, self._cpu)

    def counted(self, texts: Mapping[str, str]) -> model.Counters:
        return model.Counters(
            peak_memory=files.number_text(texts.get(self._peak, "")),
            cpu_seconds=files.number_text(texts.get(self._cpu, "")) / 1e9,
            oom_kills=files.keyed_text(texts.get(self._oom, "")).get("oom_kill", 0),
            pids_refused=files.keyed_text(texts.get(self._refused, "")).get("max", 0),
            memory=files.number_text(texts.get(self._now, "")),
        )

    def set_limits(self, memory: int | None, cpu: int | None) -> None:
        if memory is not None:
            limit = self._dirs["memory"] / "memory.limit_in_bytes"
            memsw = self._dirs["memory"] / "memory.memsw.limit_in_bytes"
            # memory + swap may never be below memory: raised first, lowered last.
            raising = memory >= files.number(limit)
            if raising and memsw.exists():
                write(memsw, memory)
            write(limit, memory)
            if not raising and memsw.exists():
                write(memsw, memory)
        if cpu is not None:
            write(self._dirs["cpu"] / "cpu.cfs_quota_us", model.cfs_quota(cpu))

    def throttling(self) -> tuple[int, int]:
        stat = files.keyed(self._dirs["cpu"] / "cpu.stat")
        return stat.get("nr_periods", 0), stat.get("nr_throttled", 0)

    def kill(self) -> None:
        if files.number(self._dirs["pids"] / "pids.current") == 0:
            return  # no process is left anywhere beneath (or the group is gone)
        deadline = time.monotonic() + model.KILL_TIMEOUT
        groups = [group for top in self._dirs.values() for group in files.tree(top)]
        with files.unless_gone():  # removed meanwhile, which only an empty group is
            while files.processes_in(groups) and time.monotonic() < deadline:
                freeze_and_kill(self._dirs["freezer"], deadline - time.monotonic())
                files.wait_until(
                    lambda: not files.processes_in(groups),
                    min(0.5, max(deadline - time.monotonic(), 0)),
                )

    def remove(self) -> None:
        for directory in self._dirs.values():
            files.remove_group(directory)


class V1(model.Hierarchy):
    version = "cgroup v1"
    enforced = ("memory", "cpu", "pids")

    def __init__(self, bases: dict[str, Path], own: dict[str, str], node_millicores: int) -> None:
        self._bases = bases
        self.where = own["memory"]
        name = files.executor_name()
        self._groups: dict[str, Path] = {}
        self._memsw = False
        self._set_up(lambda: self._make(name, node_millicores))

    def _make(self, name: str, node_millicores: int) -> None:
        for controller, base in self._bases.items():
            self._under = base
            if not os.access(base, os.W_OK):
                raise model.Unavailable(f"{base} is not writable by uid {os.geteuid()}")
            group = base / name
            group.mkdir(exist_ok=True)
            self._groups[controller] = group
        write(self._groups["cpu"] / "cpu.shares", model.cpu_shares(node_millicores))
        # Whether swap is accounted (``memsw`` files): then the limit covers swap too.
        self._memsw = (self._groups["memory"] / "memory.memsw.limit_in_bytes").exists()

    def _sweep(self) -> None:
        """Kill and remove what runplane processes that are gone left behind (a run's daemon
        outlives its executor's SIGKILL; its group does not outlive the next runplane)."""
        for name in files.left_behind(self._bases["freezer"]):
            with contextlib.suppress(OSError):
                freeze_and_kill(self._bases["freezer"] / name, model.KILL_TIMEOUT)
                for base in self._bases.values():
                    files.rmdir_tree(base / name)

    def group(self, name: str, limits: model.Limits) -> model.RunGroup:
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
        writes.append((str(cpu / "cpu.shares"), model.cpu_shares(limits.cpu_request), False))
        if limits.cpu is not None:
            writes.append((str(cpu / "cpu.cfs_quota_us"), model.cfs_quota(limits.cpu), False))
        if limits.pids is not None:
            writes.append((str(dirs["pids"] / "pids.max"), limits.pids, False))
        return V1Group(dirs, writes)

    def close(self) -> None:
        for group in self._groups.values():
            files.rmdir_if_empty(group)
        self._groups = {}
