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

import contextlib
import errno
import os
import re
import signal
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

#: The CFS period runs get, as the kubelet sets it (100 ms).
PERIOD_US = 100_000
#: The kubelet's bounds on CPU shares and the shortest quota it sets.
MIN_SHARES, MAX_SHARES, MIN_QUOTA_US = 2, 262_144, 1_000
#: How long a kill may take before runplane stops waiting for the group to empty.
KILL_TIMEOUT = 5.0

_V1_CONTROLLERS = ("memory", "cpu", "cpuacct", "pids", "freezer")
_V2_CONTROLLERS = ("memory", "cpu", "pids")
_EXECUTOR = re.compile(r"runplane-(\d+)-(\d+)(-self)?")


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
    #: Processes the kernel's OOM killer killed in the group.
    oom_kills: int = 0
    #: Forks refused because the group was at its ``pids`` limit.
    pids_refused: int = 0


class Unavailable(Exception):
    """No cgroup is writable here; the message says why (shown where the fallback is named)."""


class RunGroup(ABC):
    """One run's cgroup."""

    #: The group's path in its hierarchy (the memory controller's, on v1), for messages.
    path: str

    @abstractmethod
    def add(self, pid: int) -> None:
        """Move ``pid`` (the run's first process, before it runs anything) into the group."""

    @abstractmethod
    def counters(self) -> Counters:
        """The kernel's counters for the group so far."""

    @abstractmethod
    def kill(self) -> None:
        """Kill every process in the group and wait (at most :data:`KILL_TIMEOUT`) until none
        is left."""

    @abstractmethod
    def remove(self) -> None:
        """Remove the group (children first); it must be empty (see :meth:`kill`)."""


class Hierarchy(ABC):
    """Where this process makes its runs' cgroups."""

    #: ``cgroup v1``, ``cgroup v2``, or ``cgroup v2 (delegated)`` for a non-root user.
    version: str
    #: This process's own group, under which runs' groups are made (for messages).
    where: str

    @abstractmethod
    def create(self, name: str, limits: Limits) -> RunGroup:
        """A new group for one run, with its limits set and no process in it yet."""

    @abstractmethod
    def close(self) -> None:
        """Remove this process's group (its runs' groups must be gone)."""


# -- reading the machine ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Mount:
    point: Path
    #: The cgroup that the mount shows as its root (not ``/`` in some containers).
    root: str
    fstype: str
    options: frozenset[str]


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match[1], 8)), field)


def _mounts() -> list[_Mount]:
    mounts = []
    with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
        for line in mountinfo:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) < 5 or len(tail) < 3 or not tail[0].startswith("cgroup"):
                continue
            options = frozenset(tail[2].split(","))
            point, root = Path(_unescape(fields[4])), _unescape(fields[3])
            mounts.append(_Mount(point, root, tail[0], options))
    return mounts


def _own_cgroups() -> dict[str, str]:
    """Controller (``""`` for v2) -> this process's cgroup path, from ``/proc/self/cgroup``."""
    own = {}
    with open("/proc/self/cgroup", encoding="utf-8") as lines:
        for line in lines:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                own[controller] = path
    return own


def _inside(mount: _Mount, path: str) -> Path | None:
    """The directory of cgroup ``path`` under ``mount``; ``None`` if the mount does not show it."""
    root = mount.root.rstrip("/")
    if path != root and not path.startswith(root + "/"):
        return None
    return mount.point / path[len(root) :].lstrip("/")


def _read(path: Path) -> str:
    with open(path, encoding="utf-8") as file:
        return file.read().strip()


def _write(path: Path, value: str | int) -> None:
    with open(path, "w", encoding="utf-8") as file:
        file.write(str(value))


def _keyed(path: Path) -> dict[str, int]:
    """A flat keyed file (``memory.events``, ``cpu.stat``, ``pids.events``), 0 if missing."""
    try:
        text = _read(path)
    except OSError:
        return {}
    values = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            values[key] = int(value)
    return values


def _number(path: Path) -> int:
    try:
        return int(_read(path))
    except (OSError, ValueError):
        return 0


def _started(pid: int) -> int | None:
    """A process's start time (clock ticks after boot); ``None`` if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return int(stat.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def executor_name(pid: int | None = None) -> str:
    """The name of a runplane process's group: its pid and start time, so that a group whose
    process is gone (not merely one whose pid was reused) is recognised as left behind."""
    pid = os.getpid() if pid is None else pid
    return f"runplane-{pid}-{_started(pid) or 0}"


def _tree(top: Path) -> list[Path]:
    """``top`` and every group beneath it, deepest first (the order to remove them in)."""
    found = []
    for directory, _, _ in os.walk(top, topdown=False):
        found.append(Path(directory))
    return found


def _pids(groups: Iterable[Path]) -> list[int]:
    pids: list[int] = []
    for group in groups:
        with contextlib.suppress(OSError):
            pids.extend(int(pid) for pid in _read(group / "cgroup.procs").split())
    return pids


def _await(done: Callable[[], bool], timeout: float) -> bool:
    """Wait until ``done()`` is true, checking often at first; ``False`` on timeout."""
    deadline = time.monotonic() + timeout
    pause = 0.0005
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.02)
    return True


def _rmdir_tree(top: Path, timeout: float = KILL_TIMEOUT) -> None:
    """Remove ``top`` and the groups beneath it. A group whose last process is still exiting
    refuses (EBUSY) for a moment; that is waited for."""
    for group in _tree(top) if top.exists() else []:
        deadline = time.monotonic() + timeout
        while True:
            try:
                group.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError as error:
                if error.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise
                time.sleep(0.002)


def _rmdir_if_empty(group: Path) -> None:
    """Remove this process's group once no run's group is left in it: another runtime in this
    process may still hold one (it shares the group), and its runs are not this one's to end."""
    with contextlib.suppress(OSError):
        group.rmdir()


def _sigkill(pids: Iterable[int]) -> None:
    for pid in pids:
        if pid > 0 and pid != os.getpid():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


# -- cgroup v1 --------------------------------------------------------------------------------


def _freeze_and_kill_v1(freezer: Path, timeout: float) -> None:
    """Freeze the group (so nothing forks while it is being killed), SIGKILL every process in it
    and its descendants, and thaw it so the signals are delivered."""
    if not _pids(_tree(freezer)):
        return
    state = freezer / "freezer.state"
    _write(state, "FROZEN")
    try:
        _await(lambda: _read(state) == "FROZEN", min(timeout, 1.0))
        _sigkill(_pids(_tree(freezer)))
    finally:
        _write(state, "THAWED")


class _V1Group(RunGroup):
    def __init__(self, dirs: dict[str, Path]) -> None:
        self._dirs = dirs
        self.path = str(dirs["memory"])

    def add(self, pid: int) -> None:
        for directory in self._dirs.values():
            _write(directory / "cgroup.procs", pid)

    def counters(self) -> Counters:
        memory, cpuacct, pids = self._dirs["memory"], self._dirs["cpuacct"], self._dirs["pids"]
        return Counters(
            peak_memory=_number(memory / "memory.max_usage_in_bytes"),
            cpu_seconds=_number(cpuacct / "cpuacct.usage") / 1e9,
            oom_kills=_keyed(memory / "memory.oom_control").get("oom_kill", 0),
            pids_refused=_keyed(pids / "pids.events").get("max", 0),
        )

    def kill(self) -> None:
        deadline = time.monotonic() + KILL_TIMEOUT
        groups = [group for top in self._dirs.values() for group in _tree(top)]
        while _pids(groups) and time.monotonic() < deadline:
            _freeze_and_kill_v1(self._dirs["freezer"], deadline - time.monotonic())
            _await(lambda: not _pids(groups), min(0.5, max(deadline - time.monotonic(), 0)))

    def remove(self) -> None:
        for directory in self._dirs.values():
            _rmdir_tree(directory)


class _V1(Hierarchy):
    version = "cgroup v1"

    def __init__(self, bases: dict[str, Path], own: dict[str, str], node_millicores: int) -> None:
        self._bases = bases
        self.where = own["memory"]
        name = executor_name()
        self._groups: dict[str, Path] = {}
        try:
            for controller, base in bases.items():
                if not os.access(base, os.W_OK):
                    raise Unavailable(f"{base} is not writable by uid {os.geteuid()}")
                group = base / name
                group.mkdir(exist_ok=True)
                self._groups[controller] = group
            _write(self._groups["cpu"] / "cpu.shares", cpu_shares(node_millicores))
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
        for name in _left_behind(self._bases["freezer"]):
            with contextlib.suppress(OSError):
                _freeze_and_kill_v1(self._bases["freezer"] / name, KILL_TIMEOUT)
                for base in self._bases.values():
                    _rmdir_tree(base / name)

    def create(self, name: str, limits: Limits) -> RunGroup:
        dirs = {controller: group / name for controller, group in self._groups.items()}
        if dirs["freezer"].exists():  # left by an earlier attempt whose removal failed
            stale = _V1Group(dirs)
            stale.kill()
            stale.remove()
        try:
            for directory in dirs.values():
                directory.mkdir()
            memory = dirs["memory"]
            if limits.memory is not None:
                _write(memory / "memory.limit_in_bytes", limits.memory)
                if (memory / "memory.memsw.limit_in_bytes").exists():  # swap accounting on
                    _write(memory / "memory.memsw.limit_in_bytes", limits.memory)
                else:
                    with contextlib.suppress(OSError):
                        _write(memory / "memory.swappiness", 0)
            cpu = dirs["cpu"]
            _write(cpu / "cpu.shares", cpu_shares(limits.cpu_request))
            _write(cpu / "cpu.cfs_period_us", PERIOD_US)
            _write(cpu / "cpu.cfs_quota_us", -1 if limits.cpu is None else cfs_quota(limits.cpu))
            _write(dirs["pids"] / "pids.max", "max" if limits.pids is None else limits.pids)
        except OSError:
            group = _V1Group(dirs)
            group.remove()
            raise
        return _V1Group(dirs)

    def close(self) -> None:
        for group in self._groups.values():
            _rmdir_if_empty(group)
        self._groups = {}


# -- cgroup v2 --------------------------------------------------------------------------------


class _V2Group(RunGroup):
    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self.path = str(directory)

    def add(self, pid: int) -> None:
        _write(self._dir / "cgroup.procs", pid)

    def counters(self) -> Counters:
        return Counters(
            peak_memory=_number(self._dir / "memory.peak"),
            cpu_seconds=_keyed(self._dir / "cpu.stat").get("usage_usec", 0) / 1e6,
            oom_kills=_keyed(self._dir / "memory.events").get("oom_kill", 0),
            pids_refused=_keyed(self._dir / "pids.events").get("max", 0),
        )

    def _populated(self) -> bool:
        return _keyed(self._dir / "cgroup.events").get("populated", 0) == 1

    def kill(self) -> None:
        deadline = time.monotonic() + KILL_TIMEOUT
        while self._populated() and time.monotonic() < deadline:
            if (self._dir / "cgroup.kill").exists():  # Linux 5.14
                _write(self._dir / "cgroup.kill", 1)
            else:
                _write(self._dir / "cgroup.freeze", 1)
                try:
                    _await(
                        lambda: _keyed(self._dir / "cgroup.events").get("frozen") == 1,
                        min(1.0, deadline - time.monotonic()),
                    )
                    _sigkill(_pids(_tree(self._dir)))
                finally:
                    _write(self._dir / "cgroup.freeze", 0)
            _await(lambda: not self._populated(), min(0.5, max(deadline - time.monotonic(), 0)))

    def remove(self) -> None:
        _rmdir_tree(self._dir)


class _V2(Hierarchy):
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
            offered = set(_read(base / "cgroup.controllers").split())
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
                _write(self._group / "cpu.weight", cpu_weight(cpu_shares(node_millicores)))
        except OSError as error:
            self.close()
            raise Unavailable(f"cannot create a cgroup under {base}: {error.strerror}") from None
        except Unavailable:
            self.close()
            raise
        self._sweep()

    def _enable(self, group: Path) -> None:
        if self._controllers:
            _write(group / "cgroup.subtree_control", " ".join(f"+{c}" for c in self._controllers))

    def _hand_down(self, base: Path, own: str, name: str) -> None:
        enabled = set(_read(base / "cgroup.subtree_control").split())
        if all(c in enabled for c in self._controllers):
            return
        try:
            self._enable(base)
            return
        except OSError as error:
            if error.errno != errno.EBUSY:
                raise
        others = [pid for pid in _pids([base]) if pid != os.getpid()]
        if others:
            raise Unavailable(
                f"the cgroup {own} also holds other processes ({len(others)}), so its "
                "controllers cannot be handed to runs; start runplane in a cgroup of its own "
                "(for example systemd-run --user --scope -p Delegate=yes runplane serve)"
            )
        leaf = base / f"{name}-self"
        leaf.mkdir(exist_ok=True)
        _write(leaf / "cgroup.procs", os.getpid())
        self._enable(base)

    def _sweep(self) -> None:
        for name in _left_behind(self._base):
            with contextlib.suppress(OSError):
                _V2Group(self._base / name).kill()
                _rmdir_tree(self._base / name)

    def create(self, name: str, limits: Limits) -> RunGroup:
        directory = self._group / name
        if directory.exists():  # left by an earlier attempt whose removal failed
            _V2Group(directory).kill()
            _rmdir_tree(directory)
        directory.mkdir()
        try:
            if limits.memory is not None:
                _write(directory / "memory.max", limits.memory)
                with contextlib.suppress(FileNotFoundError):  # no swap controller
                    _write(directory / "memory.swap.max", 0)
            if "cpu" in self._controllers:
                _write(directory / "cpu.weight", cpu_weight(cpu_shares(limits.cpu_request)))
                quota = "max" if limits.cpu is None else cfs_quota(limits.cpu)
                _write(directory / "cpu.max", f"{quota} {PERIOD_US}")
            if "pids" in self._controllers:
                _write(directory / "pids.max", "max" if limits.pids is None else limits.pids)
        except OSError:
            _rmdir_tree(directory)
            raise
        return _V2Group(directory)

    def close(self) -> None:
        _rmdir_if_empty(self._group)


def _left_behind(base: Path) -> Iterator[str]:
    """Groups of runplane processes that are gone, in ``base``."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        match = _EXECUTOR.fullmatch(name)
        if match is None or match[3]:  # a "-self" leaf holds its live process, or nothing
            if match is not None and not _pids([base / name]):
                with contextlib.suppress(OSError):
                    (base / name).rmdir()
            continue
        pid, started = int(match[1]), int(match[2])
        if pid != os.getpid() and _started(pid) != started:
            yield name


# -- choosing ---------------------------------------------------------------------------------


def open_hierarchy(node_millicores: int) -> Hierarchy:
    """This machine's cgroup hierarchy as this process may use it for runs: v2 when the unified
    hierarchy has the memory controller, else v1 when its controllers are mounted. Raises
    :class:`Unavailable` with the reason when neither is writable here."""
    mounts = _mounts()
    own = _own_cgroups()
    for mount in mounts:
        if mount.fstype != "cgroup2" or "" not in own:
            continue
        base = _inside(mount, own[""])
        if base is None:
            continue
        root_controllers = _maybe_read(mount.point / "cgroup.controllers").split()
        if "memory" in root_controllers or "memory" in _maybe_read(base / "cgroup.controllers"):
            return _V2(base, own[""], node_millicores, _V2_CONTROLLERS)
    bases: dict[str, Path] = {}
    for controller in _V1_CONTROLLERS:
        v1 = next((m for m in mounts if m.fstype == "cgroup" and controller in m.options), None)
        if v1 is None or controller not in own:
            raise Unavailable(f"no cgroup hierarchy with the {controller} controller is mounted")
        base = _inside(v1, own[controller])
        if base is None or not base.is_dir():
            raise Unavailable(f"this process's {controller} cgroup is not visible here")
        bases[controller] = base
    return _V1(bases, own, node_millicores)


def open_v2(base: Path, own: str, controllers: tuple[str, ...]) -> Hierarchy:
    """A v2 hierarchy at ``base`` handing runs only ``controllers`` (the unified hierarchy of a
    hybrid machine offers none, yet holds and kills processes as any v2 group does)."""
    return _V2(base, own, 1000, controllers)


def unified_mount() -> tuple[Path, str] | None:
    """This process's cgroup directory on a cgroup v2 mount, and its path, if one is mounted."""
    own = _own_cgroups()
    for mount in _mounts():
        if mount.fstype == "cgroup2" and "" in own:
            base = _inside(mount, own[""])
            if base is not None:
                return base, own[""]
    return None


def _maybe_read(path: Path) -> str:
    try:
        return _read(path)
    except OSError:
        return ""
