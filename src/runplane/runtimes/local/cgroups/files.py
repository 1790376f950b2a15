"""The cgroup filesystem as runplane reads and writes it: mounts, this process's own cgroups,
control files, the processes in a group and its descendants, and groups left behind."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from runplane.runtimes.local.cgroups.model import KILL_TIMEOUT
from runplane.runtimes.local.cgroups.steps import read

_EXECUTOR = re.compile(r"runplane-(\d+)-(\d+)(-self)?")

#: What the kernel answers about a group that was removed meanwhile (ENOENT: a control file
#: opened after the removal; ENODEV: one opened before it and read or written after) and about
#: a process that has exited (ESRCH). A run's group is removed as soon as its last process has
#: exited (the warm launcher's server does so as it reaps the run's first process), so any step
#: that kills or counts may find it gone: nothing is left in it then.
GONE = frozenset({errno.ENOENT, errno.ENODEV, errno.ESRCH})


@contextlib.contextmanager
def unless_gone() -> Iterator[None]:
    """Run a step on a group, and stop quietly if the group is gone (see :data:`GONE`)."""
    try:
        yield
    except OSError as error:
        if error.errno not in GONE:
            raise


@dataclass(frozen=True, slots=True)
class Mount:
    point: Path
    #: The cgroup that the mount shows as its root (not ``/`` in some containers).
    root: str
    fstype: str
    options: frozenset[str]


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match[1], 8)), field)


def mounts() -> list[Mount]:
    mounts = []
    with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
        for line in mountinfo:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) < 5 or len(tail) < 3 or not tail[0].startswith("cgroup"):
                continue
            options = frozenset(tail[2].split(","))
            point, root = Path(_unescape(fields[4])), _unescape(fields[3])
            mounts.append(Mount(point, root, tail[0], options))
    return mounts


def own_cgroups() -> dict[str, str]:
    """Controller (``""`` for v2) -> this process's cgroup path, from ``/proc/self/cgroup``."""
    own = {}
    with open("/proc/self/cgroup", encoding="utf-8") as lines:
        for line in lines:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                own[controller] = path
    return own


def inside(mount: Mount, path: str) -> Path | None:
    """The directory of cgroup ``path`` under ``mount``; ``None`` if the mount does not show it."""
    root = mount.root.rstrip("/")
    if path != root and not path.startswith(root + "/"):
        return None
    return mount.point / path[len(root) :].lstrip("/")


def keyed(path: Path) -> dict[str, int]:
    """A flat keyed file (``memory.events``, ``cpu.stat``, ``pids.events``), 0 if missing."""
    try:
        return keyed_text(read(path))
    except OSError:
        return {}


def keyed_text(text: str) -> dict[str, int]:
    """The values of a flat keyed file's text (``key value`` lines)."""
    values = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        with contextlib.suppress(ValueError):
            values[key] = int(value)
    return values


def number_text(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def number(path: Path) -> int:
    try:
        return int(read(path))
    except (OSError, ValueError):
        return 0


def start_time(pid: int) -> int | None:
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
    return f"runplane-{pid}-{start_time(pid) or 0}"


def tree(top: Path) -> list[Path]:
    """``top`` and every group beneath it, deepest first (the order to remove them in)."""
    found = []
    for directory, _, _ in os.walk(top, topdown=False):
        found.append(Path(directory))
    return found


def processes_in(groups: Iterable[Path]) -> list[int]:
    pids: list[int] = []
    for group in groups:
        with contextlib.suppress(OSError):
            pids.extend(int(pid) for pid in read(group / "cgroup.procs").split())
    return pids


def wait_until(done: Callable[[], bool], timeout: float) -> bool:
    """Wait until ``done()`` is true, checking often at first; ``False`` on timeout."""
    deadline = time.monotonic() + timeout
    pause = 0.0005
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.02)
    return True


def rmdir_tree(top: Path, timeout: float = KILL_TIMEOUT) -> None:
    """Remove ``top`` and the groups beneath it. A group whose last process is still exiting
    refuses (EBUSY) for a moment; that is waited for."""
    for group in tree(top) if top.exists() else []:
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


def remove_group(group: Path) -> None:
    """Remove a run's group: at once when it is a leaf with no process left (a run's usual
    end), else group by group, waiting for exiting processes (:func:`rmdir_tree`)."""
    try:
        group.rmdir()
    except FileNotFoundError:
        pass
    except OSError:
        rmdir_tree(group)


def rmdir_if_empty(group: Path) -> None:
    """Remove this process's group once no run's group is left in it: another runtime in this
    process may still hold one (it shares the group), and its runs are not this one's to end."""
    with contextlib.suppress(OSError):
        group.rmdir()


def sigkill(pids: Iterable[int]) -> None:
    for pid in pids:
        if pid > 0 and pid != os.getpid():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def left_behind(base: Path) -> Iterator[str]:
    """Groups of runplane processes that are gone, in ``base``."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        match = _EXECUTOR.fullmatch(name)
        if match is None or match[3]:  # a "-self" leaf holds its live process, or nothing
            if match is not None and not processes_in([base / name]):
                with contextlib.suppress(OSError):
                    (base / name).rmdir()
            continue
        pid, started = int(match[1]), int(match[2])
        if pid != os.getpid() and start_time(pid) != started:
            yield name


def maybe_read(path: Path) -> str:
    try:
        return read(path)
    except OSError:
        return ""
