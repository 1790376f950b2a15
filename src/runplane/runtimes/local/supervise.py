"""Watching a run's process tree until it ends: the memory limit, aborts, and the outcome.

One supervisor thread per running run samples the tree's memory every ``poll_interval``; past
the limit, or on an abort, it kills the whole tree. When the process ends it reads what the
handler logged (results, artifacts, its error) and reports the run's end as one event.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Protocol

import psutil

from runplane import names
from runplane.config import Settings
from runplane.runs import RunState, Usage
from runplane.runtimes.local.launch import LocalRun, spawn
from runplane.runtimes.local.ledger import Grant

#: A process killed by SIGKILL exits as 128 + 9, as a container's main process does.
KILLED_EXIT_CODE = 137


class Report(Protocol):
    """How a supervisor reports a run's change (extra: any other :class:`RunEvent` field)."""

    def __call__(
        self, uid: str, state: RunState, reason: str, message: str, **extra: Any
    ) -> None: ...


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

    def kill(self, root: int, uid: str, since: int) -> int:
        """Kill every process of the run ``uid`` whose first process is ``root``, started at
        ``since`` (clock ticks after boot, as ``/proc`` counts); returns how many.

        That is its process tree, its process group and session (the run leads both), and
        processes started since the run began whose environment carries the run's uid: a
        ``setsid`` daemon, double-forked or not. Without a cgroup (see docs/local.md) a
        process that also cleared its environment escapes; nothing else does.
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
            if session == root or (started >= since and _carries(pid, marker)):
                doomed.add(pid)
        doomed.discard(os.getpid())
        for pid in doomed:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        return len(doomed)


class Supervisor:
    """Runs granted runs to their end on this machine, one thread per run (see :meth:`run`)."""

    def __init__(self, processes: ProcessTable, settings: Settings, node: str, report: Report):
        self.processes = processes
        self.settings = settings
        self.interval = settings.local.poll_interval
        self.node = node
        self.report = report

    def run(self, run: LocalRun, grant: Grant) -> None:
        """Start the run's process, watch it to its end, and report that end."""
        if run.abort is not None:  # aborted between the grant and the start
            self._aborted(run, Usage())
            return
        process = run.process = spawn(run, grant, self.settings)
        since = started_at(process.pid)
        self.report(
            run.uid,
            RunState.RUNNING,
            "Started",
            f"process {process.pid} on {self.node}",
            process_id=process.pid,
        )
        reason, message, cpu_seconds = "", "", 0.0
        while True:
            pid, status, rusage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                process.returncode = os.waitstatus_to_exitcode(status)
                cpu_seconds = rusage.ru_utime + rusage.ru_stime
                run.peak_memory = max(run.peak_memory, rusage.ru_maxrss * 1024)
                break
            rss = self.processes.rss(process.pid)
            run.peak_memory = max(run.peak_memory, rss)
            if run.memory_limit is not None and rss > run.memory_limit:
                self.processes.kill(process.pid, run.uid, since)
                reason = "OOMKilled"
                message = (
                    f"memory use {_mebibytes(rss)} exceeded the limit "
                    f"{_mebibytes(run.memory_limit)}; the run was killed"
                )
            elif run.abort is not None and not reason:
                self.processes.kill(process.pid, run.uid, since)
                reason = "Aborted"
            time.sleep(self.interval)
        # Whatever the run left behind ends with it, as a pod's processes end with the pod.
        self.processes.kill(process.pid, run.uid, since)
        usage = Usage(run.peak_memory, cpu_seconds)
        if reason == "Aborted":
            self._aborted(run, usage)
            return
        returncode = process.returncode
        exit_code = KILLED_EXIT_CODE if reason == "OOMKilled" else _exit_code(returncode)
        results, artifacts, error = read_events(run.run_dir)
        if exit_code == 0:
            state, reason, message = RunState.COMPLETED, "Completed", ""
        else:
            state = RunState.ERROR
            if not reason:
                reason = "Error" if returncode >= 0 else signal.Signals(-returncode).name
                message = error or f"the process exited with code {exit_code}"
        self.report(
            run.uid,
            state,
            reason,
            message,
            process_id=process.pid,
            exit_code=exit_code,
            usage=usage,
            results=results,
            artifacts=artifacts,
        )

    def _aborted(self, run: LocalRun, usage: Usage) -> None:
        reason, message = run.abort or ("Aborted", "")
        results, artifacts, _ = read_events(run.run_dir)
        self.report(
            run.uid,
            RunState.ABORTED,
            reason,
            message,
            process_id=run.process.pid if run.process else None,
            exit_code=KILLED_EXIT_CODE if run.process else None,
            usage=usage,
            results=results,
            artifacts=artifacts,
        )


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


def _exit_code(returncode: int) -> int:
    """A process killed by signal N exits as 128 + N, as a container's does."""
    return 128 - returncode if returncode < 0 else returncode


def _mebibytes(amount: int) -> str:
    return f"{amount / 2**20:.0f}Mi"


def read_events(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """Results, artifacts and the last error the handler's context wrote."""
    results: dict[str, Any] = {}
    artifacts: list[dict[str, Any]] = []
    error = ""
    path = run_dir / "events.jsonl"
    if not path.exists():
        return results, artifacts, error
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue  # a line cut short by a kill, or one the run wrote beyond any bound
        if event.get("type") == "result":
            results[event["key"]] = event["value"]
        elif event.get("type") == "artifact":
            artifacts.append({k: event[k] for k in ("key", "path", "size")})
        elif event.get("type") == "error":
            error = event["message"]
    return results, artifacts, error
