"""Stopping a run as the kubelet stops a pod: SIGTERM, the grace period, then SIGKILL.

The kubelet sends SIGTERM to a container's main process only, waits the pod's
``terminationGracePeriodSeconds`` (30 s unless the pod says), then kills what is left with
SIGKILL; when the main process exits first, whatever else runs in the container goes with it.
Here the run's first process (the bootstrap, which runs the handler and turns SIGTERM into
``context.on_preemption`` callbacks and a :class:`~runplane.bootstrap.context.Terminated` in
the handler) stands for the main process, and the run's cgroup or process tree for the
container: the same handler checkpoints the same way on both backends.

The wait is the run's own supervisor thread sleeping on its process with a timeout, so nothing
else waits for it: other runs, the scheduler and the service go on.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from runplane.runtimes.local.process import RunProcess

#: Kubernetes' default ``terminationGracePeriodSeconds``: used when the pod spec gives none.
DEFAULT_GRACE_SECONDS = 30.0


@dataclass(slots=True)
class Stop:
    """Where one run's stop stands: asked for or not, signalled, killed."""

    #: Seconds between SIGTERM and SIGKILL: the run's pod's ``terminationGracePeriodSeconds``.
    grace: float = DEFAULT_GRACE_SECONDS
    #: When (``time.monotonic``) SIGKILL is due; ``None`` until a stop is asked for.
    kill_at: float | None = None
    #: When SIGTERM and SIGKILL were sent (``None``: not yet).
    terminated_at: float | None = None
    killed_at: float | None = None

    def ask(self, grace: float | None = None) -> bool:
        """Ask for the stop, SIGKILL due ``grace`` seconds from now (``None``: :attr:`grace`).
        A stop asked for again is only ever brought forward (a shutdown that cannot wait),
        never put off; ``False`` when this one changed nothing."""
        kill_at = time.monotonic() + (self.grace if grace is None else grace)
        if self.kill_at is not None and kill_at >= self.kill_at:
            return False
        self.kill_at = kill_at
        return True

    def advance(self, process: RunProcess, kill_all: Callable[[], None]) -> int | None:
        """Take the stop's next step, if one is due: SIGTERM to ``process`` at once, then, at
        :attr:`kill_at`, SIGKILL to it and ``kill_all()`` for the rest of the run (a stop due
        at once, a shutdown's, is SIGKILL alone). Returns how many milliseconds until the next
        step is due (``None``: none is)."""
        kill_at = self.kill_at
        if kill_at is None or self.killed_at is not None:
            return None
        now = time.monotonic()
        if now < kill_at:
            if self.terminated_at is None:
                self.terminated_at = now
                process.terminate()
            return max(1, math.ceil((kill_at - now) * 1000))
        self.killed_at = now
        process.kill()  # a warm process may not have joined its group yet
        kill_all()
        return None

    def told(self) -> str:
        """What ended the stopped run, for its record ("": it was stopped before it started,
        or killed at once by a shutdown, whose own message says so)."""
        if self.terminated_at is None:
            if self.killed_at is not None and self.grace == 0:
                return "it was killed with SIGKILL (grace period 0 s)"
            return ""
        if self.killed_at is None:
            waited = time.monotonic() - self.terminated_at
            return (
                f"it ended {waited:.1f} s after SIGTERM, within its grace period of "
                f"{self.grace:g} s"
            )
        waited = self.killed_at - self.terminated_at
        return (
            f"still running {waited:.1f} s after SIGTERM, it was killed with SIGKILL "
            f"(grace period {self.grace:g} s)"
        )
