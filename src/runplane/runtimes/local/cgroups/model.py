"""What a run's cgroup is asked to hold and what it counts, and the one interface over v1 and
v2; CPU quantities converted as the kubelet converts them."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from runplane.runtimes.local.cgroups import steps as on_files
from runplane.runtimes.local.cgroups.steps import Steps

PERIOD_US = 100_000
#: The kubelet's bounds on CPU shares and the shortest quota it sets.
MIN_SHARES, MAX_SHARES, MIN_QUOTA_US = 2, 262_144, 1_000
#: How long a kill may take before runplane stops waiting for the group to empty.
KILL_TIMEOUT = 5.0


def cpu_shares(millicores: int) -> int:
    """A CPU request as v1 ``cpu.shares``, as the kubelet converts it (none: the minimum)."""
    return max(MIN_SHARES, min(MAX_SHARES, millicores * 1024 // 1000))


def cpu_weight(shares: int) -> int:
    """v1 shares as a v2 ``cpu.weight`` (1-10000), by the kubelet's formula."""
    return 1 + ((shares - MIN_SHARES) * 9999) // (MAX_SHARES - MIN_SHARES)


def cfs_quota(millicores: int) -> int:
    """A CPU limit as a CFS quota per :data:`PERIOD_US`, as the kubelet computes it."""
    return max(MIN_QUOTA_US, millicores * PERIOD_US // 1000)


@dataclass(frozen=True, slots=True)
class Limits:
    """What a run's cgroup holds it to (``None``: unlimited)."""

    memory: int | None = None
    #: The CPU limit and request, in millicores.
    cpu: int | None = None
    cpu_request: int = 0
    pids: int | None = None


@dataclass(frozen=True, slots=True)
class Counters:
    """What the kernel counted for a run's group."""

    peak_memory: int = 0
    cpu_seconds: float = 0.0
    #: The memory the group is charged now.
    memory: int = 0
    #: Processes the kernel's OOM killer killed in the group.
    oom_kills: int = 0
    #: Forks refused because the group was at its ``pids`` limit.
    pids_refused: int = 0


class Unavailable(Exception):
    """No cgroup is writable here; the message says why (shown where the fallback is named)."""


class RunGroup(ABC):
    """One run's cgroup: its :mod:`steps <.steps>`, and what runplane does to it."""

    #: The group's path in its hierarchy (the memory controller's, on v1), for messages.
    path: str
    #: How the group is made, joined, counted and removed, as data another process can carry
    #: out (the warm launcher's server does, for the runs it forks).
    steps: Steps

    def make(self) -> None:
        """Make the group with its limits (one left by an earlier attempt whose removal failed
        is killed and removed first)."""
        try:
            on_files.make(self.steps)
        except FileExistsError:
            self.kill()
            self.remove()
            on_files.make(self.steps)

    def add(self, pid: int) -> None:
        """Move ``pid`` (the run's first process, before it runs anything) into the group."""
        on_files.join(self.steps, pid)

    def counters(self) -> Counters:
        """The kernel's counters for the group so far."""
        return self.counted(on_files.counter_texts(self.steps))

    def gauges(self) -> Counters:
        """What a look at a running group needs: the memory held now, its peak and the CPU
        time (OOM kills and refused forks read as 0). Three files where :meth:`counters` reads
        five: the usage sampler reads it for every running run twice a second."""
        return self.counted({name: on_files.read_or_empty(name) for name in self._gauges})

    #: The files :meth:`gauges` reads.
    _gauges: tuple[str, ...] = ()

    @abstractmethod
    def counted(self, texts: Mapping[str, str]) -> Counters:
        """The counters in the texts of the files ``steps["counters"]`` names."""

    @abstractmethod
    def set_limits(self, memory: int | None, cpu: int | None) -> None:
        """Change the running group's memory limit (bytes) and CPU limit (millicores) in
        place; ``None`` leaves that one as it is. A memory limit below what the group holds
        is refused by the kernel (``EBUSY``), never enforced by a kill."""

    @abstractmethod
    def throttling(self) -> tuple[int, int]:
        """CFS periods the group ran in and those it was throttled in, so far."""

    @abstractmethod
    def kill(self) -> None:
        """Kill every process in the group and wait (at most :data:`KILL_TIMEOUT`) until none
        is left; a group that is gone has none."""

    @abstractmethod
    def remove(self) -> None:
        """Remove the group (children first); it must be empty (see :meth:`kill`)."""


class Hierarchy(ABC):
    """Where this process makes its runs' cgroups."""

    #: ``cgroup v1``, ``cgroup v2``, or ``cgroup v2 (delegated)`` for a non-root user.
    version: str
    #: This process's own group, under which runs' groups are made (for messages).
    where: str
    #: What the kernel limits for runs here: ``memory`` always; ``cpu`` and ``pids`` where their
    #: controllers are delegated (a CPU limit is then kept as whole-core affinity instead).
    enforced: tuple[str, ...]
    #: Where this process's group is being made, for the message if that fails.
    _under: Path

    def _set_up(self, make: Callable[[], None]) -> None:
        """Make this process's group with ``make``, then clear what gone runplanes left. On
        failure whatever was made is removed again, and :class:`Unavailable` says why."""
        try:
            make()
        except OSError as error:
            self.close()
            raise Unavailable(
                f"cannot create a cgroup under {self._under}: {error.strerror}"
            ) from None
        except Unavailable:
            self.close()
            raise
        self._sweep()

    @abstractmethod
    def _sweep(self) -> None:
        """Kill and remove the groups runplane processes that are gone left behind."""

    @abstractmethod
    def group(self, name: str, limits: Limits) -> RunGroup:
        """The group of one run, with its limits: worked out, not made yet (see
        :meth:`RunGroup.make`)."""

    def create(self, name: str, limits: Limits) -> RunGroup:
        """A new group for one run, made, with its limits set and no process in it yet."""
        group = self.group(name, limits)
        group.make()
        return group

    @abstractmethod
    def close(self) -> None:
        """Remove this process's group (its runs' groups must be gone)."""
