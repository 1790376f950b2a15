"""From the pod watch's observations to run events: each change reported once, in order.

A watch sees the same pod many times (label changes, IP assignment, a re-list after a
reconnect); only observations that change what the run's record would say become events, and
nothing follows a pod's end. While runplane aborts a run, whatever its pod does is part of the
abort: a pod that was running when the delete arrived ends ``aborted``, not ``error``.

An MPIJob's run ends as its operator says (:mod:`.mpijobs`), not as its launcher pod does:
the launcher's end is held, with the results read from its log, until the MPIJob's
``Succeeded`` or ``Failed`` condition arrives; the two are joined into the run's end (the
operator's state, reason and message; the launcher's results, node and exit code). Whichever
comes first waits for the other, the operator's end at most :data:`LAUNCHER_WAIT` seconds.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from runplane import names
from runplane.runs import Reason, RunState
from runplane.runtimes.events import RunEvent
from runplane.runtimes.kubernetes.api.watch import DELETED, VANISHED
from runplane.runtimes.kubernetes.mpijobs import is_launcher
from runplane.runtimes.kubernetes.pod_events import pod_to_event, results_in_log

log = logging.getLogger(__name__)

#: Seconds an MPIJob's end waits for its launcher pod's (whose log has the results) before
#: it is the run's end alone: a launcher that never ran, or whose pod is gone, has none.
LAUNCHER_WAIT = 30.0


#: Reads a finished pod's report from its log (where large results are, and an mpijob's
#: launcher puts it): (results, artifacts, error).
ResultsReader = Callable[[dict[str, Any]], tuple[dict[str, Any], list[dict[str, Any]], str]]
#: A run's uid and an attempt's number: a retried MPIJob run's attempts end apart.
Attempt = tuple[str, int]


class RunTracker:
    """Thread-safe: the watch thread observes, callers' threads abort."""

    def __init__(
        self, publish: Callable[[RunEvent], None], read_results: ResultsReader | None = None
    ) -> None:
        self._publish = publish
        self._read_results = read_results
        self._lock = threading.Lock()
        self._last: dict[str, tuple[Any, ...]] = {}
        self._finished: set[str] = set()
        self._aborting: dict[str, tuple[str, str]] = {}
        #: Runs of several pods whose main pod (launcher, driver) has started.
        self._main_started: set[str] = set()
        #: Pods runplane deletes because their node is gone, with the event that says so.
        self._losing: dict[str, RunEvent] = {}
        #: MPIJob attempts (an attempt has an MPIJob of its own): the launcher's end awaiting
        #: the operator's (pod key, event), the operator's end awaiting the launcher's, and the
        #: attempts whose end is published (until their MPIJob is gone).
        self._launcher_end: dict[Attempt, tuple[str, RunEvent]] = {}
        self._operator_end: dict[Attempt, RunEvent] = {}
        self._joined: set[Attempt] = set()
        self.launcher_wait = LAUNCHER_WAIT

    def observe(self, kind: str, pod: dict[str, Any]) -> None:
        """A :class:`~runplane.runtimes.kubernetes.api.watch.PodWatch` handler."""
        key = str((pod.get("metadata") or {}).get("uid") or "")
        gone = kind in (DELETED, VANISHED)
        event = pod_to_event(pod, deleted=gone)
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get(names.ROLE) in names.HELPER_ROLES:
            # A worker or executor tells why its run waits; how the run goes is its main
            # pod's (the operator starts, restarts and removes helpers as the job needs).
            with self._lock:
                started = event is None or event.uid in self._main_started
            if started or event is None or event.state is not RunState.PENDING:
                return
        elif event is not None and (event.state is RunState.RUNNING or event.state.terminal):
            with self._lock:
                self._main_started.add(event.uid)
        if kind == VANISHED and event is not None and event.reason == Reason.POD_DELETED:
            event = replace(
                event,
                message=f"pod {pod['metadata'].get('name')} was deleted while runplane was not "
                "watching; how the run ended is unknown",
            )
        if (
            event is not None
            and event.state.terminal
            and self._read_results is not None
            and results_in_log(pod)
            and not self._ended(key)
        ):
            try:
                results, artifacts, error = self._read_results(pod)
                event = replace(event, results=results, artifacts=artifacts)
                if error and event.state is RunState.ERROR and event.reason != Reason.OOM_KILLED:
                    event = replace(event, message=error)  # a rank's error names the rank
            except Exception:  # the pod (or its node) may be gone: the end is still the end
                log.warning("results of pod %s could not be read", key, exc_info=True)
        if event is not None and event.state.terminal and is_launcher(pod):
            self._launcher_ended(key, event, gone)
            return
        self.deliver(key, event, forget=gone)

    # -- an MPIJob's end: its operator's, joined to its launcher's

    def _launcher_ended(self, key: str, event: RunEvent, gone: bool) -> None:
        attempt = (event.uid, event.attempt)
        with self._lock:
            if event.uid in self._aborting:
                ended = None  # the abort's end, as for any pod
            elif attempt in self._joined:
                return  # the attempt's end is out already
            else:
                ended = self._operator_end.pop(attempt, None)
                if ended is None:
                    self._launcher_end[attempt] = (key, event)
                    return
                self._joined.add(attempt)
        self.deliver(key, event if ended is None else _joined(ended, event), forget=gone)

    def operator_ended(self, event: RunEvent) -> None:
        """The MPIJob's operator says its run ended (``event``): the run's end once its
        launcher's is known, or after :attr:`launcher_wait` seconds without it."""
        attempt = (event.uid, event.attempt)
        with self._lock:
            if attempt in self._joined or event.uid in self._aborting:
                return
            held = self._launcher_end.pop(attempt, None)
            if held is None:
                if attempt not in self._operator_end:
                    timer = threading.Timer(self.launcher_wait, self._operator_alone, [attempt])
                    timer.daemon = True
                    timer.start()
                self._operator_end[attempt] = event
                return
            self._joined.add(attempt)
        self.deliver(held[0], _joined(event, held[1]))

    def _operator_alone(self, attempt: Attempt) -> None:
        with self._lock:
            event = self._operator_end.pop(attempt, None)
            if event is None or attempt in self._joined:
                return
            self._joined.add(attempt)
        self.deliver(f"workload-{attempt[0]}-{attempt[1]}", event)

    def operator_gone(self, uid: str, attempt: int) -> None:
        """The attempt's MPIJob is deleted: a launcher's end still held is the run's end now."""
        key = (uid, attempt)
        with self._lock:
            self._joined.discard(key)
            self._operator_end.pop(key, None)
            held = self._launcher_end.pop(key, None)
        if held is not None:
            self.deliver(*held)

    def _ended(self, key: str) -> bool:
        with self._lock:
            return key in self._finished

    def abort(self, uid: str, reason: str, message: str) -> None:
        """From now on, the run's pods report the abort (until one of them ends)."""
        with self._lock:
            self._aborting[uid] = (reason, message)

    def losing(self, key: str, event: RunEvent | None) -> None:
        """The pod ``key`` is being deleted because its node is gone: its deletion reads as
        ``event`` (not as someone else's delete); ``None`` calls that off."""
        with self._lock:
            if event is None:
                self._losing.pop(key, None)
            else:
                self._losing[key] = event

    def lost(self, key: str) -> None:
        """Report the pod ``key`` lost, unless its deletion has already said so."""
        with self._lock:
            event = self._losing.pop(key, None)
        self.deliver(key, event)

    def deliver(self, key: str, event: RunEvent | None, forget: bool = False) -> None:
        """Publish ``event`` of the pod ``key`` unless it repeats the pod's last one or
        follows its end; ``forget`` drops what is known of a pod that no longer exists (with
        no event too: a queued workload that went without a word more)."""
        if event is None:
            if forget:
                with self._lock:
                    self._last.pop(key, None)
                    self._finished.discard(key)
            return
        with self._lock:
            loss = self._losing.pop(key, None) if forget or event.state.terminal else None
            if loss is not None and event.reason == Reason.POD_DELETED:
                event = loss
            event = self._as_aborted(event)
            signature = (event.state, event.condition, event.reason, event.message, event.node)
            fresh = key not in self._finished and self._last.get(key) != signature
            if fresh:
                self._last[key] = signature
                if event.state.terminal:
                    self._finished.add(key)
                    self._aborting.pop(event.uid, None)
            if forget:
                self._last.pop(key, None)
                self._finished.discard(key)
        if not fresh:
            return
        try:
            self._publish(event)
        except Exception:  # the watch must go on for the other runs
            log.exception("publishing run event %s failed", event)

    def _as_aborted(self, event: RunEvent) -> RunEvent:
        """While a run is being aborted, whatever its pod does is part of the abort (also when
        the abort annotation could not be written). Called with the lock held."""
        wanted = self._aborting.get(event.uid)
        if wanted is None or event.state in (RunState.ABORTING, RunState.ABORTED):
            return event
        state = RunState.ABORTED if event.state.terminal else RunState.ABORTING
        return RunEvent(
            uid=event.uid,
            state=state,
            reason=wanted[0],
            message=wanted[1],
            attempt=event.attempt,
            node=event.node,
            exit_code=event.exit_code if state is RunState.ABORTED else None,
            at=event.at,
        )


def _joined(operator: RunEvent, launcher: RunEvent) -> RunEvent:
    """The run's end: the operator's state, reason and message, with the launcher's results,
    node and exit code; a failed launcher's own words (a rank's error) lead the message."""
    if operator.state is RunState.COMPLETED:
        if launcher.state is RunState.COMPLETED:
            return launcher
        return replace(launcher, state=RunState.COMPLETED, reason="Completed", message="")
    own = launcher.message or launcher.reason
    said = f"the MPI Operator: {operator.message}" if operator.message else ""
    return replace(
        launcher,
        state=operator.state,
        reason=operator.reason,
        message="; ".join(part for part in (own, said) if part),
    )
