"""A run's first process as its supervisor holds it, however it was started.

A fresh process is runplane's own child: a ``pidfd`` says when it exits, ``wait4`` reaps it. A
warm one is the fork server's child (:mod:`~runplane.runtimes.local.warm`): the server reaps it
and its exit is pushed here. Either way the supervisor sleeps on :meth:`RunProcess.fileno`.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Exit:
    """How a run's first process ended: its return code (negative: killed by that signal), its
    CPU seconds and peak resident memory (with its waited-for children's)."""

    returncode: int
    cpu_seconds: float = 0.0
    peak_memory: int = 0
    #: What the warm launcher's server found of the run's cgroup as it reaped the process:
    #: nothing left running, so its counters' texts, and whether it removed it (``None``:
    #: something still runs there, or the group is runplane's own to finish).
    group: dict[str, Any] | None = None


class RunProcess(Protocol):
    pid: int

    def fileno(self) -> int:
        """A descriptor that becomes readable when the process exits."""

    def poll(self) -> Exit | None:
        """Its exit if it has exited, else ``None``."""

    def wait(self) -> Exit:
        """Block until it exits."""

    def terminate(self) -> None:
        """Send it SIGTERM if it has not exited (a stop's first step: its grace begins)."""

    def kill(self) -> None:
        """Send it SIGKILL if it has not exited."""

    def close(self) -> None:
        """Let go of the descriptors held for it."""


class FreshProcess:
    """A run's process started anew by runplane (``subprocess``), reaped by runplane."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen
        self.pid = popen.pid
        self._fd = os.pidfd_open(popen.pid)  # ours and not yet reaped: it is this process
        self._exit: Exit | None = None

    def fileno(self) -> int:
        return self._fd

    def _reap(self, options: int) -> Exit | None:
        if self._exit is None:
            pid, status, usage = os.wait4(self.pid, options)
            if pid == 0:
                return None
            self.popen.returncode = os.waitstatus_to_exitcode(status)
            self._exit = Exit(
                self.popen.returncode, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024
            )
        return self._exit

    def poll(self) -> Exit | None:
        return self._reap(os.WNOHANG)

    def wait(self) -> Exit:
        exit = self._reap(0)
        assert exit is not None
        return exit

    def terminate(self) -> None:
        self._send(signal.SIGTERM)

    def kill(self) -> None:
        self._send(signal.SIGKILL)

    def _send(self, signum: int) -> None:
        """By its pidfd: ``Popen.kill`` would reap a process that has just exited, and the
        supervisor's wait then finds no child to wait for."""
        if self._exit is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._fd, signum)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


def wait_readable(fd: int) -> None:
    """Sleep until ``fd`` is readable."""
    select.select([fd], [], [])
