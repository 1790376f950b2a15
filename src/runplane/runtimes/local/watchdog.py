"""The fallback where no cgroup is writable: runs' process trees found and measured by polling.

A run's tree is measured every ``local.poll_interval`` (50 ms) and killed past its memory limit;
its CPU limit is an affinity to whole cores. Finding what a run left behind takes a search (its
tree, its session, what carries its uid in the environment or runs as its own user): what a
cgroup guarantees, this only approximates (docs/local.md says what it cannot do).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import psutil

from runplane import names


class ProcessTable:
    """Who is whose child, from one scan of the process table shared by every supervisor.

    Finding a run's descendants means reading every process's parent; with many runs at once,
    one scan per tick for all of them is far cheaper than one scan per run.
    """

    def __init__(self, max_age: float) -> None:
        self._max_age = max_age
        self._lock = threading.Lock()
        self._built = 0.0
        self._children: dict[int, list[int]] = {}

    def tree(self, root: int) -> list[int]:
        with self._lock:
            now = time.monotonic()
            if now - self._built > self._max_age:
                children: dict[int, list[int]] = {}
                for process in psutil.process_iter(["ppid"]):
                    parent = process.info["ppid"]
                    if parent:
                        children.setdefault(parent, []).append(process.pid)
                self._children, self._built = children, now
            members, stack = [], [root]
            while stack:
                pid = stack.pop()
                members.append(pid)
                stack.extend(self._children.get(pid, ()))
            return members

    def rss(self, root: int) -> int:
        total = 0
        for pid in self.tree(root):
            try:
                total += psutil.Process(pid).memory_info().rss
            except psutil.Error:
                continue
        return total

    def cpu_seconds(self, root: int) -> float:
        total = 0.0
        for pid in self.tree(root):
            try:
                times = psutil.Process(pid).cpu_times()
            except psutil.Error:
                continue
            total += times.user + times.system + times.children_user + times.children_system
        return total

    def kill(self, root: int, uid: str, since: int, user_id: int | None = None) -> int:
        """Kill every process of the run ``uid`` whose first process is ``root``, started at
        ``since`` (clock ticks after boot, as ``/proc`` counts); returns how many.

        That is its process tree, its process group and session (the run leads both),
        processes started since the run began whose environment carries the run's uid (a
        ``setsid`` daemon, double-forked or not), and every process of ``user_id``, the run's
        own user when it has one. A process of a run that shares runplane's user and clears
        its environment escapes this; in a cgroup nothing does.
        """
        doomed = set(self.tree(root))
        with contextlib.suppress(OSError):
            os.killpg(root, signal.SIGKILL)  # its group goes at once
        marker = f"{names.ENV_RUN_UID}={uid}".encode()
        for pid in _pids():
            if pid in doomed:
                continue
            stat = _session_and_start(pid)
            if stat is None:
                continue
            session, started = stat
            if (
                session == root
                or (user_id is not None and _owner(pid) == user_id)
                or (started >= since and _carries(pid, marker))
            ):
                doomed.add(pid)
        doomed.discard(os.getpid())
        for pid in doomed:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        return len(doomed)


def _pids() -> list[int]:
    try:
        return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:  # no /proc: only the tree and the group can be found
        return []


def _session_and_start(pid: int) -> tuple[int, int] | None:
    """A process's session id and start time (clock ticks after boot), from ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return int(fields[3]), int(fields[19])  # session, starttime (fields 6 and 22 of stat)


def _owner(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _carries(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return marker in environ.read().split(b"\0")
    except OSError:
        return False


def started_at(pid: int) -> int:
    """When ``pid`` started, in ``/proc``'s clock ticks after boot (0 if unknown)."""
    stat = _session_and_start(pid)
    return stat[1] if stat else 0
