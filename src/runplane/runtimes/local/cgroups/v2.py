"""cgroup v2: one unified hierarchy, delegated to a non-root user or not; a group per run,
killed with ``cgroup.kill``."""

from __future__ import annotations

import contextlib
import errno
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
    PERIOD_US,
    Counters,
    Hierarchy,
    Limits,
    RunGroup,
    Unavailable,
    cfs_quota,
    cpu_shares,
    cpu_weight,
)

#: The controllers runs' groups are given.
CONTROLLERS = ("memory", "cpu", "pids")


class V2Group(RunGroup):
    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self.path = str(directory)

    def add(self, pid: int) -> None:
        write(self._dir / "cgroup.procs", pid)

    def joins(self) -> list[str]:
        return [str(self._dir / "cgroup.procs")]

    def counters(self) -> Counters:
        return Counters(
            peak_memory=number(self._dir / "memory.peak"),
            cpu_seconds=keyed(self._dir / "cpu.stat").get("usage_usec", 0) / 1e6,
            oom_kills=keyed(self._dir / "memory.events").get("oom_kill", 0),
            pids_refused=keyed(self._dir / "pids.events").get("max", 0),
        )

    def _populated(self) -> bool:
        return keyed(self._dir / "cgroup.events").get("populated", 0) == 1

    def kill(self) -> None:
        deadline = time.monotonic() + KILL_TIMEOUT
        while self._populated() and time.monotonic() < deadline:
            if (self._dir / "cgroup.kill").exists():  # Linux 5.14
                write(self._dir / "cgroup.kill", 1)
            else:
                write(self._dir / "cgroup.freeze", 1)
                try:
                    wait_until(
                        lambda: keyed(self._dir / "cgroup.events").get("frozen") == 1,
                        min(1.0, deadline - time.monotonic()),
                    )
                    sigkill(processes_in(tree(self._dir)))
                finally:
                    write(self._dir / "cgroup.freeze", 0)
            wait_until(lambda: not self._populated(), min(0.5, max(deadline - time.monotonic(), 0)))

    def remove(self) -> None:
        remove_group(self._dir)


class V2(Hierarchy):
    version = "cgroup v2"

    def __init__(
        self, base: Path, own: str, node_millicores: int, controllers: tuple[str, ...]
    ) -> None:
        """Make this process's group under ``base`` (its own cgroup, ``own``), handing it
        ``controllers``. A cgroup with processes cannot hand controllers to its children (v2's
        "no internal processes" rule): when this process is alone in its cgroup it moves into a
        leaf of its own beneath it (``runplane-<pid>-<start>-self``) first."""
        self.where = own
        if os.geteuid() != 0:
            self.version = "cgroup v2 (delegated)"
        self._base = base
        self._controllers = controllers
        name = executor_name()
        self._group = base / name
        try:
            if not os.access(base, os.W_OK):
                raise Unavailable(f"{base} is not writable by uid {os.geteuid()}")
            offered = set(read(base / "cgroup.controllers").split())
            missing = [c for c in controllers if c not in offered]
            if missing:
                raise Unavailable(
                    f"the cgroup {own} is not given the {', '.join(missing)} controller(s); "
                    "delegate them to it"
                )
            self._hand_down(base, own, name)
            self._group.mkdir(exist_ok=True)
            self._enable(self._group)
            if "cpu" in controllers:
                write(self._group / "cpu.weight", cpu_weight(cpu_shares(node_millicores)))
        except OSError as error:
            self.close()
            raise Unavailable(f"cannot create a cgroup under {base}: {error.strerror}") from None
        except Unavailable:
            self.close()
            raise
        self._sweep()

    def _enable(self, group: Path) -> None:
        if self._controllers:
            write(group / "cgroup.subtree_control", " ".join(f"+{c}" for c in self._controllers))

    def _hand_down(self, base: Path, own: str, name: str) -> None:
        enabled = set(read(base / "cgroup.subtree_control").split())
        if all(c in enabled for c in self._controllers):
            return
        try:
            self._enable(base)
            return
        except OSError as error:
            if error.errno != errno.EBUSY:
                raise
        others = [pid for pid in processes_in([base]) if pid != os.getpid()]
        if others:
            raise Unavailable(
                f"the cgroup {own} also holds other processes ({len(others)}), so its "
                "controllers cannot be handed to runs; start runplane in a cgroup of its own "
                "(for example systemd-run --user --scope -p Delegate=yes runplane serve)"
            )
        leaf = base / f"{name}-self"
        leaf.mkdir(exist_ok=True)
        write(leaf / "cgroup.procs", os.getpid())
        self._enable(base)

    def _sweep(self) -> None:
        for name in left_behind(self._base):
            with contextlib.suppress(OSError):
                V2Group(self._base / name).kill()
                rmdir_tree(self._base / name)

    def create(self, name: str, limits: Limits) -> RunGroup:
        directory = self._group / name
        try:
            directory.mkdir()
        except FileExistsError:  # left by an earlier attempt whose removal failed
            V2Group(directory).kill()
            rmdir_tree(directory)
            directory.mkdir()
        try:
            # A new group starts unlimited, with the default period: only what differs is
            # written.
            if limits.memory is not None:
                write(directory / "memory.max", limits.memory)
                with contextlib.suppress(FileNotFoundError):  # no swap controller
                    write(directory / "memory.swap.max", 0)
            if "cpu" in self._controllers:
                write(directory / "cpu.weight", cpu_weight(cpu_shares(limits.cpu_request)))
                if limits.cpu is not None:
                    write(directory / "cpu.max", f"{cfs_quota(limits.cpu)} {PERIOD_US}")
            if "pids" in self._controllers and limits.pids is not None:
                write(directory / "pids.max", limits.pids)
        except OSError:
            rmdir_tree(directory)
            raise
        return V2Group(directory)

    def close(self) -> None:
        rmdir_if_empty(self._group)
