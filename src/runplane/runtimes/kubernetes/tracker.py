"""From the pod watch's observations to run events: each change reported once, in order.

A watch sees the same pod many times (label changes, IP assignment, a re-list after a
reconnect); only observations that change what the run's record would say become events, and
nothing follows a pod's end. While runplane aborts a run, whatever its pod does is part of the
abort: a pod that was running when the delete arrived ends ``aborted``, not ``error``.
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
from runplane.runtimes.kubernetes.pod_events import pod_to_event, results_in_log

log = logging.getLogger(__name__)


#: Reads a finished pod's report from its log (where large results are, and an mpijob's
#: launcher puts it): (results, artifacts, error).
ResultsReader = Callable[[dict[str, Any]], tuple[dict[str, Any], list[dict[str, Any]], str]]


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
        self.deliver(key, event, forget=gone)

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
        follows its end; ``forget`` drops what is known of a pod that no longer exists."""
        if event is None:
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
