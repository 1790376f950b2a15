"""Running a granted run to its end: its process, its limits, its abort, and its outcome.

One supervisor thread per running run. With a cgroup (the default where one is writable) the
kernel enforces the run's limits and holds all its processes; the thread sleeps on the run's
process and its abort signal (a pidfd and an eventfd: no polling). An abort stops the run as the
kubelet stops a pod (:mod:`~runplane.runtimes.local.stopping`): SIGTERM to its first process,
then, once its grace period is over, SIGKILL to the whole group; the thread sleeps on the process
with the grace as its timeout. When the first process exits, whatever is left in the group is
killed and the kernel's counters are read. Under the watchdog fallback
(:mod:`~runplane.runtimes.local.watchdog`) the thread samples the run's tree instead. Either way
it reads what the handler logged (results, artifacts, its error) and reports the run's end as
one event.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import select
import signal
import threading
import time
from pathlib import Path
from typing import Any, Protocol

from runplane.config import Settings
from runplane.rendering.autoresize import plan_of
from runplane.runs import Reason, ResizeRecord, RunState, Usage
from runplane.runtimes.local import footprint, secretvolumes
from runplane.runtimes.local.cgroups import Counters, Hierarchy, Limits, RunGroup
from runplane.runtimes.local.launch import LocalRun, spawn
from runplane.runtimes.local.ledger import Grant
from runplane.runtimes.local.outpipe import OutputPipe
from runplane.runtimes.local.process import Exit, RunProcess
from runplane.runtimes.local.resize import LOOK_INTERVAL, Refused, Room, resize
from runplane.runtimes.local.users import RunUser, RunUsers
from runplane.runtimes.local.warm import WarmLauncher
from runplane.runtimes.local.watchdog import ProcessTable, started_at
from runplane.runtimes.resizing import Sizes, Watch, described, wanted
from runplane.runtimes.resizing import memory as shown_memory
from runplane.spec.quantity import mebibytes

log = logging.getLogger(__name__)

#: The least a warm run's group is limited to when its limit is below what a fresh interpreter
#: takes: its process is then killed as soon as it runs, as the pod's would be.
MIN_GROUP_MEMORY = 1 << 20


class Report(Protocol):
    """How a supervisor reports a run's change (extra: any other :class:`RunEvent` field)."""

    def __call__(
        self, uid: str, state: RunState, reason: str, message: str, **extra: Any
    ) -> None: ...


class Supervisor:
    """Runs granted runs to their end on this machine, one thread per run (see :meth:`run`).

    ``hierarchy`` is where runs' cgroups are made; ``None`` selects the watchdog.
    """

    def __init__(
        self,
        processes: ProcessTable,
        settings: Settings,
        node: str,
        report: Report,
        hierarchy: Hierarchy | None,
        users: RunUsers,
        warm: WarmLauncher | None = None,
        room: Room | None = None,
    ) -> None:
        self.processes = processes
        self.settings = settings
        self.interval = settings.local.poll_interval
        self.node = node
        self.report = report
        self.hierarchy = hierarchy
        self.users = users
        #: Where runs' processes are forked from (``None``: each starts a fresh interpreter).
        self.warm = warm
        #: Grants a running run more of the machine when it is resized (the ledger's).
        self.room: Room = room or (lambda uid, more: "")
        self._footprint: int | None = None
        self._footprint_lock = threading.Lock()

    def run(self, run: LocalRun, grant: Grant) -> None:
        """Start the run's process, hold it to its end, and report that end. Whatever fails
        on the way still ends the run: what is left of it is stopped and its end is reported
        as an error with the cause (:meth:`_failed`), never left ``running``."""
        if run.abort is not None:  # aborted between the grant and the start
            self._aborted(run, Usage())
            return
        user = self.users.lease(run.uid, run.run_dir)
        mode = self.hierarchy.version if self.hierarchy else "watchdog"
        who = f"uid {user.uid} (its own)" if user else f"uid {os.geteuid()} (runplane's)"
        run.isolation = f"{mode}, {who}"
        try:
            run.output = OutputPipe(run.run_dir, self.settings.retention.max_output_bytes)
            if self.hierarchy is None:
                self._watch(run, grant, user)
            else:
                self._contain(run, grant, user, self.hierarchy)
        except Exception as error:
            self._failed(run, error)
        finally:
            # Each step on its own: one that fails must not keep the next from its work (the
            # run's copies of its Secrets left behind, a uid leased for ever).
            try:
                _close_output(run)
            except Exception:
                log.exception("ending run %s: closing its output failed", run.uid)
            try:
                _take_back(run.run_dir, user)
            except Exception:
                log.exception("ending run %s: taking back its directory failed", run.uid)
            RunUsers.release(user)
            run.close_wake()

    def _failed(self, run: LocalRun, error: Exception) -> None:
        """Supervision itself failed (a bug, or a step on the machine that cannot be taken):
        the run's end is reported as an error with the cause, its output kept (its processes
        were stopped on the way out of :meth:`_contain` or :meth:`_watch`)."""
        log.error("supervising run %s failed", run.uid, exc_info=error)
        with contextlib.suppress(Exception):
            _wind_up(run)
        asked = " while it was being aborted" if run.abort is not None else ""
        self.report(
            run.uid,
            RunState.ERROR,
            Reason.EXECUTOR_ERROR,
            f"runplane failed to supervise the run{asked} ({type(error).__name__}: {error}); "
            "its processes were stopped",
            process_id=run.process.pid if run.process else None,
            usage=run.usage_so_far,
        )

    def _started(self, run: LocalRun, process: RunProcess) -> None:
        self.report(
            run.uid,
            RunState.RUNNING,
            Reason.STARTED,
            f"process {process.pid} on {self.node}"
            + (f"; a fresh interpreter: {run.fresh}" if run.fresh else ""),
            process_id=process.pid,
            isolation=run.isolation,
        )

    # -- in a cgroup ----------------------------------------------------------------------

    def _contain(
        self, run: LocalRun, grant: Grant, user: RunUser | None, hierarchy: Hierarchy
    ) -> None:
        def group_for(inherited: int) -> RunGroup:
            """The run's group, its memory limit less what the process starts with uncharged
            (:mod:`.footprint`): the kernel then kills it where a pod's would be killed."""
            memory = run.memory_limit
            if memory is not None:
                memory = max(memory - inherited, MIN_GROUP_MEMORY)
            limits = Limits(
                memory=memory,
                cpu=run.cpu_limit,
                cpu_request=run.cpu_request,
                pids=self.settings.local.pids_limit,
            )
            made = run.group = hierarchy.group(f"run-{run.uid}", limits)
            return made

        # Made by whichever starts the run's process (spawn): the warm launcher's server, which
        # also counts and removes it when the process ends with nothing left running there.
        group = group_for(0)
        process: RunProcess | None = None
        counters: Counters | None = None
        removed = False
        try:
            process = run.process = spawn(
                run,
                grant,
                self.settings,
                pin="cpu" not in hierarchy.enforced,
                user=user,
                group=group_for,
                warm=self.warm,
                inherited=lambda: self._inherited(hierarchy),
            )
            group = run.group or group
            run.sizes = Sizes(run.memory_limit, run.cpu_limit, run.inherited)
            self._started(run, process)
            exit = self._await_exit(run, process, group)
            returncode = exit.returncode
            if exit.group is not None:  # found empty, counted (and removed) by the server
                counters = _charged(run, group.counted(exit.group["counters"]))
                removed = exit.group["removed"]
            else:
                group.kill()  # whatever the run left behind ends with it, as with a pod
                counters = _charged(run, group.counters())
        finally:
            group = run.group or group
            run.usage_so_far = (
                Usage(counters.peak_memory, counters.cpu_seconds)
                if counters is not None
                else Usage(*_usage(run, group))
            )
            run.group = None
            if process is not None:
                if counters is None:  # the wait failed: the run is stopped, all of it
                    process.kill()
                process.close()
            try:
                if counters is None:  # not emptied: the start or the wait failed
                    group.kill()
                if not removed:
                    group.remove()
            except OSError as error:  # the group stays; the next runplane here removes it
                log.warning("could not remove the cgroup %s: %s", group.path, error)
        assert counters is not None  # the wait completed: the group was emptied and counted
        forked = self.warm is not None and not run.fresh
        usage = _final(counters, exit, unmeasured=forked and not run.inherited)
        if run.abort is not None:
            self._aborted(run, usage, returncode)
            return
        self._ended(run, process.pid, returncode, usage, _verdict(run, returncode, counters))

    def _inherited(self, hierarchy: Hierarchy) -> int:
        """What a warm run's process inherits uncharged: measured once (:mod:`.footprint`)."""
        assert self.warm is not None
        with self._footprint_lock:
            if self._footprint is None:
                self._footprint = footprint.inherited(
                    self.warm.python, self.warm.env, hierarchy, self.settings.local.home
                )
            return self._footprint

    def _await_exit(self, run: LocalRun, process: RunProcess, group: RunGroup) -> Exit:
        """Sleep until the run's first process exits; once an abort comes, stop the run as
        the kubelet stops a pod (:class:`~.stopping.Stop`): SIGTERM to that process, and
        SIGKILL to the whole group if it is still there at the end of its grace period.
        Returns how it exited."""
        wake = run.open_wake()
        exited = process.fileno()
        poller = select.poll()
        poller.register(exited, select.POLLIN)
        poller.register(wake, select.POLLIN)
        output = run.output
        if output is not None:
            poller.register(output.fileno(), select.POLLIN)
        plan = plan_of(run.request.pod)
        watch = Watch(plan) if plan is not None and run.sizes is not None else None
        next_look = time.monotonic()
        while True:
            timeout = run.stop.advance(process, group.kill)
            if watch is not None and run.abort is None:
                look = max(1, int((next_look - time.monotonic()) * 1000))
                timeout = look if timeout is None else min(timeout, look)
            ready = {fd for fd, _ in poller.poll(timeout)}
            if exited in ready:
                break
            if output is not None and output.fileno() in ready:
                output.pump()
            with contextlib.suppress(BlockingIOError):
                os.eventfd_read(wake)
            if watch is not None and run.abort is None and time.monotonic() >= next_look:
                next_look = time.monotonic() + LOOK_INTERVAL
                self._right_size(run, group, watch)
        return process.wait()

    def _right_size(self, run: LocalRun, group: RunGroup, watch: Watch) -> None:
        """One look at a right-sized run: raise its limits in place when they are due
        (:mod:`.resize`), and say so on the run; a refusal is told once per reason. A memory
        grow the machine cannot grant (its ledger's room, the project's quota, the kernel's
        free memory) is a ``fallback``, as a node's ``Infeasible`` is on a cluster: an OOM
        kill of this attempt is retried with the memory asked for."""
        assert run.sizes is not None
        try:
            held = group.gauges().memory + run.sizes.inherited
            due = wanted(watch, run.sizes, held, group.throttling(), time.monotonic())
        except OSError:  # the group is being emptied: the run is ending
            return
        if due is None:
            return
        memory, cpu, why = due
        try:
            record = resize(
                run.uid, run.request.attempt, run.sizes, group, self.room, memory, cpu, why
            )
        except Refused as error:
            watch.above_since = None  # looked at again after another window
            if str(error) == watch.refused:
                return
            watch.refused = str(error)
            self._refused(run, memory, cpu, why, str(error), error.for_room)
            return
        watch.above_since, watch.refused = None, ""
        self.report_resize(run, record, described(record))

    def _refused(
        self,
        run: LocalRun,
        memory: int | None,
        cpu: int | None,
        why: str,
        error: str,
        for_room: bool,
    ) -> None:
        """Tell of a right-sizing refused: a memory grow the machine's room refused falls back
        to an OOM retry with the size asked for; one the project's quota refused, and a CPU
        raise alone (a throttled run is slower, not killed), are only refused: a larger retry
        would wait on the same quota."""
        assert run.sizes is not None
        grows = (
            for_room
            and memory is not None
            and (run.sizes.memory is None or memory > run.sizes.memory)
        )
        record = ResizeRecord(
            at=time.time(),
            attempt=run.request.attempt,
            memory_from=run.sizes.memory,
            memory_to=memory if memory is not None else run.sizes.memory,
            cpu_from=run.sizes.cpu,
            cpu_to=cpu if cpu is not None else run.sizes.cpu,
            why=f"{why}; not granted: {error}",
            outcome="fallback" if grows else "refused",
        )
        if grows:
            message = (
                f"right-sizing could not raise the memory limit to {shown_memory(memory)} in "
                f"place ({error}); an OOM kill is retried with it, as the retry policy allows"
            )
        else:
            message = f"right-sizing refused: {error} ({why})"
        self.report_resize(run, record, message)

    def report_resize(self, run: LocalRun, record: ResizeRecord, message: str) -> None:
        """Tell of a resize (or one refused) as the running run's event."""
        if run.sizes is not None:
            run.memory_limit, run.cpu_limit = run.sizes.memory, run.sizes.cpu
        self.report(run.uid, RunState.RUNNING, Reason.RESIZED, message, resize=record)

    # -- under the watchdog ---------------------------------------------------------------

    def _watch(self, run: LocalRun, grant: Grant, user: RunUser | None) -> None:
        # Fresh, never warm: the watchdog finds a run's escaped processes (a ``setsid``
        # daemon) by the run's uid in the environment they started with, and a forked
        # process's ``/proc/<pid>/environ`` is its server's.
        process = run.process = spawn(
            run, grant, self.settings, pin=True, user=user, group=None, warm=None
        )
        since = started_at(process.pid)
        run.sizes = Sizes(run.memory_limit, run.cpu_limit)
        reason, message, cpu_seconds = "", "", 0.0
        owner = user.uid if user else None

        def kill_all() -> None:
            self.processes.kill(process.pid, run.uid, since, owner)

        try:
            self._started(run, process)
            while True:
                exit = process.poll()
                if exit is not None:
                    cpu_seconds = exit.cpu_seconds
                    run.peak_memory = max(run.peak_memory, exit.peak_memory)
                    break
                rss = self.processes.rss(process.pid)
                run.peak_memory = max(run.peak_memory, rss)
                if run.memory_limit is not None and rss > run.memory_limit:
                    kill_all()
                    reason = Reason.OOM_KILLED
                    message = (
                        f"memory use {mebibytes(rss)} exceeded the limit "
                        f"{mebibytes(run.memory_limit)}; the run was killed"
                    )
                elif not reason:
                    run.stop.advance(process, kill_all)
                if run.output is not None:
                    run.output.wait(self.interval)
                else:
                    time.sleep(self.interval)
        finally:
            # Whatever the run left behind ends with it, as a pod's processes end with the
            # pod; so does all of it when watching it failed.
            try:
                kill_all()
            finally:
                process.kill()  # nothing once it has exited
                process.wait()
                process.close()
        usage = Usage(run.peak_memory, cpu_seconds)
        if run.abort is not None and reason != Reason.OOM_KILLED:
            self._aborted(run, usage, exit.returncode)
            return
        self._ended(run, process.pid, exit.returncode, usage, (reason, message))

    # -- reporting ------------------------------------------------------------------------

    def _ended(
        self,
        run: LocalRun,
        pid: int,
        returncode: int,
        usage: Usage,
        verdict: tuple[str, str],
    ) -> None:
        """Report the end of a run whose process exited with ``returncode``; ``verdict`` is
        the (reason, message) its limits gave it, if any."""
        reason, message = verdict
        exit_code = _exit_code(returncode)
        _wind_up(run)
        results, artifacts, error = read_events(run.run_dir)
        if exit_code == 0 and not reason:
            state, reason, message = RunState.COMPLETED, Reason.COMPLETED, ""
        else:
            state = RunState.ERROR
            if not reason:
                reason = Reason.ERROR if returncode >= 0 else signal.Signals(-returncode).name
                message = error or f"the process exited with code {exit_code}"
            elif reason == Reason.PIDS_LIMIT:
                message = f"{error or f'the process exited with code {exit_code}'}; {message}"
        self.report(
            run.uid,
            state,
            reason,
            message,
            process_id=pid,
            exit_code=exit_code,
            usage=usage,
            results=results,
            artifacts=artifacts,
        )

    def _aborted(self, run: LocalRun, usage: Usage, returncode: int | None = None) -> None:
        """Report the end of a stopped run (``returncode``: how its first process exited,
        ``None`` when it never started); the message says what ended it
        (:meth:`~.stopping.Stop.told`)."""
        reason, message = run.abort or (Reason.ABORTED, "")
        message = "; ".join(part for part in (message, run.stop.told()) if part)
        _wind_up(run)
        results, artifacts, _ = read_events(run.run_dir)
        self.report(
            run.uid,
            RunState.ABORTED,
            reason,
            message,
            process_id=run.process.pid if run.process else None,
            exit_code=None if returncode is None else _exit_code(returncode),
            usage=usage,
            results=results,
            artifacts=artifacts,
        )


def _wind_up(run: LocalRun) -> None:
    """What is done once none of the run's processes is left, before its end is told: all of
    its output is in place, and the copies of its Secret volumes are gone."""
    if run.output is not None:
        run.output.close()
    secretvolumes.remove(run.run_dir)


def _close_output(run: LocalRun) -> None:
    if run.output is not None:
        run.output.close()  # done before the end is reported, unless that failed


def _take_back(run_dir: Path, user: RunUser | None) -> None:
    """A run's directory is runplane's again once the run is over, and the copies of its
    Secret volumes are gone."""
    RunUsers.take_back(run_dir, user)
    secretvolumes.remove(run_dir)


def _final(counters: Counters, exit: Exit, unmeasured: bool) -> Usage:
    """A finished run's usage: its group's counters, charged as a fresh process would be
    (:func:`_charged`). ``unmeasured``: the run was forked warm and what it inherited could not
    be measured (:mod:`.footprint`), so its group counted only the few MiB it added to the
    fork server's pages; its peak is then at least its process's own resident peak
    (``wait4``), which counts every page it had. Its CPU time is never less than what
    ``wait4`` says either."""
    peak = counters.peak_memory
    if unmeasured:
        peak = max(peak, exit.peak_memory)
    return Usage(peak, max(counters.cpu_seconds, exit.cpu_seconds))


def _usage(run: LocalRun, group: RunGroup) -> tuple[int, float]:
    try:
        counters = _charged(run, group.counters())
    except OSError:
        return 0, 0.0
    return counters.peak_memory, counters.cpu_seconds


def _charged(run: LocalRun, counters: Counters) -> Counters:
    """The group's counters with the peak a fresh process would have reached: what the run's
    process inherited uncharged counted as its own (:mod:`.footprint`)."""
    if not run.inherited or not counters.peak_memory:
        return counters
    return dataclasses.replace(counters, peak_memory=counters.peak_memory + run.inherited)


def _verdict(run: LocalRun, returncode: int, counters: Counters) -> tuple[str, str]:
    """What the cgroup's counters say of a run that did not complete: the kernel's OOM kill,
    or forks refused at the pids limit; ``("", "")`` when neither explains it."""
    if returncode == 0:
        return "", ""
    if counters.oom_kills:
        victim = "it" if returncode == -signal.SIGKILL else "one of its processes"
        if run.memory_limit is None:
            return (
                Reason.OOM_KILLED,
                f"the machine ran out of memory and the kernel killed {victim}",
            )
        return Reason.OOM_KILLED, (
            f"the run reached its memory limit {mebibytes(run.memory_limit)} and the kernel "
            f"killed {victim} (peak {mebibytes(counters.peak_memory)}; nothing is swapped)"
        )
    if counters.pids_refused:
        return Reason.PIDS_LIMIT, (
            "the run reached its limit of processes and threads (local.pids_limit) and the "
            f"kernel refused {counters.pids_refused} fork(s)"
        )
    return "", ""


def _exit_code(returncode: int) -> int:
    """A process killed by signal N exits as 128 + N, as a container's does."""
    return 128 - returncode if returncode < 0 else returncode


def read_events(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """Results, artifacts and the last error the handler's context wrote."""
    results: dict[str, Any] = {}
    artifacts: list[dict[str, Any]] = []
    error = ""
    try:  # never through a link: a run may replace its file with one to another's
        fd = os.open(run_dir / "events.jsonl", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return results, artifacts, error
    with os.fdopen(fd, encoding="utf-8", errors="replace") as file:
        text = file.read()
    for line in text.splitlines():
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
