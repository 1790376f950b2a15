"""cgroup v2: one unified hierarchy, delegated to a non-root user or not; a group per run,
killed with ``cgroup.kill``."""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from runplane.runtimes.local.cgroups import files, model
from runplane.runtimes.local.cgroups.steps import read, write

#: The controllers runs' groups are given.
CONTROLLERS = ("memory", "cpu", "pids")


class V2Group(model.RunGroup):
    def __init__(self, directory: Path, writes: Sequence[tuple[str, str | int, bool]] = ()) -> None:
        self._dir = directory
        self.path = str(directory)
        self._peak = str(directory / "memory.peak")
        self._cpu = str(directory / "cpu.stat")
        self._now = str(directory / "memory.current")
        self._oom = str(directory / "memory.events")
        self._refused = str(directory / "pids.events")
        self.steps = {
            "dirs": [str(directory)],
            "writes": list(writes),
            "joins": [str(directory / "cgroup.procs")],
            "empty": [str(directory / "cgroup.events"), "populated 0"],
            "counters": [self._peak, self._cpu, self._oom, self._refused, self._now],
            "removes": [str(directory)],
        }
        self._gauges = (self._now, self._peak, self._cpu)

    def counted(self, texts: Mapping[str, str]) -> model.Counters:
        return model.Counters(
            peak_memory=files.number_text(texts.get(self._peak, "")),
            cpu_seconds=files.keyed_text(texts.get(self._cpu, "")).get("usage_usec", 0) / 1e6,
            oom_kills=files.keyed_text(texts.get(self._oom, "")).get("oom_kill", 0),
            pids_refused=files.keyed_text(texts.get(self._refused, "")).get("max", 0),
            memory=files.number_text(texts.get(self._now, "")),
        )

    def set_limits(self, memory: int | None, cpu: int | None) -> None:
        if memory is not None:
            write(self._dir / "memory.max", memory)
        if cpu is not None:
            write(self._dir / "cpu.max", f"{model.cfs_quota(cpu)} {model.PERIOD_US}")

    def throttling(self) -> tuple[int, int]:
        stat = files.keyed(self._dir / "cpu.stat")
        return stat.get("nr_periods", 0), stat.get("nr_throttled", 0)

    def _populated(self) -> bool:
        return files.keyed(self._dir / "cgroup.events").get("populated", 0) == 1

    def kill(self) -> None:
        with files.unless_gone():  # removed meanwhile, which only an empty group is
            self._kill()

    def _kill(self) -> None:
        deadline = time.monotonic() + model.KILL_TIMEOUT
        while self._populated() and time.monotonic() < deadline:
            if (self._dir / "cgroup.kill").exists():  # Linux 5.14
                write(self._dir / "cgroup.kill", 1)
            else:
                write(self._dir / "cgroup.freeze", 1)
                try:
                    files.wait_until(
                        lambda: files.keyed(self._dir / "cgroup.events").get("frozen") == 1,
                        min(1.0, deadline - time.monotonic()),
                    )
                    files.sigkill(files.processes_in(files.tree(self._dir)))
                finally:
                    with files.unless_gone():
                        write(self._dir / "cgroup.freeze", 0)
            files.wait_until(
                lambda: not self._populated(), min(0.5, max(deadline - time.monotonic(), 0))
            )

    def remove(self) -> None:
        files.remove_group(self._dir)


class V2(model.Hierarchy):
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
        self.enforced = tuple(c for c in CONTROLLERS if c in controllers)
        name = files.executor_name()
        self._group = base / name
        self._under = base
        self._set_up(lambda: self._make(base, own, name, node_millicores))

    def _make(self, base: Path, own: str, name: str, node_millicores: int) -> None:
        if not os.access(base, os.W_OK):
            raise model.Unavailable(f"{base} is not writable by uid {os.geteuid()}")
        offered = set(read(base / "cgroup.controllers").split())
        missing = [c for c in self._controllers if c not in offered]
        if missing:
            raise model.Unavailable(
                f"the cgroup {own} is not given the {', '.join(missing)} controller(s); "
                "delegate them to it"
            )
        self._hand_down(base, own, name)
        self._group.mkdir(exist_ok=True)
        self._enable(self._group)
        if "cpu" in self._controllers:
            write(self._group / "cpu.weight", model.cpu_weight(model.cpu_shares(node_millicores)))

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
        others = [pid for pid in files.processes_in([base]) if pid != os.getpid()]
        if others:
            raise model.Unavailable(
                f"the cgroup {own} also holds other processes ({len(others)}), so its "
                "controllers cannot be handed to runs; start runplane in a cgroup of its own "
                "(for example systemd-run --user --scope -p Delegate=yes runplane serve)"
            )
        leaf = base / f"{name}-self"
        leaf.mkdir(exist_ok=True)
        write(leaf / "cgroup.procs", os.getpid())
        self._enable(base)

    def _sweep(self) -> None:
        for name in files.left_behind(self._base):
            with contextlib.suppress(OSError):
                V2Group(self._base / name).kill()
                files.rmdir_tree(self._base / name)

    def group(self, name: str, limits: model.Limits) -> model.RunGroup:
        directory = self._group / name
        writes: list[tuple[str, str | int, bool]] = []
        # A new group starts unlimited, with the default period: only what differs is written.
        if limits.memory is not None:
            writes.append((str(directory / "memory.max"), limits.memory, False))
            writes.append((str(directory / "memory.swap.max"), 0, True))  # no swap controller
        if "cpu" in self._controllers:
            weight = model.cpu_weight(model.cpu_shares(limits.cpu_request))
            writes.append((str(directory / "cpu.weight"), weight, False))
            if limits.cpu is not None:
                quota = f"{model.cfs_quota(limits.cpu)} {model.PERIOD_US}"
                writes.append((str(directory / "cpu.max"), quota, False))
        if "pids" in self._controllers and limits.pids is not None:
            writes.append((str(directory / "pids.max"), limits.pids, False))
        return V2Group(directory, writes)

    def close(self) -> None:
        files.rmdir_if_empty(self._group)
