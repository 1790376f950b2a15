"""Multi-pod runs admitted to the cluster whole (gang admission).

An mpijob's launcher and workers, or a spark driver and its executors, are submitted only when
the placement check finds room for every pod at once (:func:`runplane.placement.fit_all` on
the nodes as they are now); until then the run is held here and reported ``pending`` with the
reason, as a pod the scheduler cannot place is. So half a job never holds GPUs on the cluster
waiting for the rest.

Held runs are checked again when this runtime's pods or the nodes change, and at least every
``interval`` seconds (other workloads free room without telling). Each is admitted as soon as
it fits, the highest priority and then the oldest first; a small run may pass a large one
that does not fit yet. An admitted run's pods are counted where the check put them until the
cluster has placed them all (its operator makes them a moment later), so two runs are never
admitted into the same room. Held runs live in this process: after a restart the service
launches its unstarted runs again and they are held again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runplane import names
from runplane.placement import GangFit, Node, fit_all, pod_requests
from runplane.runs import Condition, Reason, RunState
from runplane.runtimes.contract import RunRequest
from runplane.runtimes.events import RunEvent
from runplane.runtimes.kubernetes.cluster import FINISHED_PHASES, occupied

log = logging.getLogger(__name__)

#: How long an admitted run's pods are counted where the check put them, at most, while its
#: operator has not made (or the scheduler not placed) them all.
RESERVE_SECONDS = 120.0

Snapshot = Callable[[], tuple[list[dict[str, Any]], list[dict[str, Any]]]]


@dataclass
class _Held:
    request: RunRequest
    pods: list[dict[str, Any]]
    message: str = ""


@dataclass
class _Reserved:
    until: float
    places: list[tuple[str, dict[str, int]]]


class GangGate:
    """Holds multi-pod runs until all their pods fit, then hands them to ``admit``.

    ``snapshot`` returns the cluster's Node and unfinished Pod objects now; ``publish`` takes
    the held runs' ``pending`` events.
    """

    def __init__(
        self,
        snapshot: Snapshot,
        admit: Callable[[RunRequest], None],
        publish: Callable[[RunEvent], None],
        interval: float = 5.0,
    ) -> None:
        self._snapshot = snapshot
        self._admit = admit
        self._publish = publish
        self._interval = interval
        self._held: dict[str, _Held] = {}
        self._reserved: dict[str, _Reserved] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="runplane-gang")
        self._thread.start()

    def offer(self, request: RunRequest, pods: list[dict[str, Any]]) -> bool:
        """Admit ``request`` now if every one of ``pods`` fits, else hold it; ``True`` if
        admitted. A failed admission raises, for the caller (the run's launch) to report."""
        with self._lock:
            if request.uid in self._held:
                self._held[request.uid].request = request
                return False
            if request.uid in self._reserved:  # a retried launch: its room is counted
                self._admit(request)
                return True
            fit = self._fit(pods)
            if fit.fits:
                self._admit(request)
                self._reserve(request.uid, pods, fit)
                return True
            held = _Held(request, pods, fit.message)
            self._held[request.uid] = held
        self._tell(held)
        return False

    def held(self) -> list[str]:
        with self._lock:
            return list(self._held)

    def drop(self, uid: str) -> bool:
        """Forget a run (it was aborted): held, or admitted with its room still counted;
        ``False`` if it was not held."""
        with self._lock:
            self._reserved.pop(uid, None)
            return self._held.pop(uid, None) is not None

    def wake(self) -> None:
        """Something changed on the cluster: check the held runs again soon."""
        if self._held:
            self._wake.set()

    def close(self) -> None:
        """Stop checking; held runs are let go unreported (the service settles them)."""
        self._stop.set()
        self._wake.set()
        self._thread.join(10)

    def _tell(self, held: _Held) -> None:
        self._publish(
            RunEvent(
                held.request.uid,
                RunState.PENDING,
                condition=Condition.PENDING_NOT_SCHEDULED,
                reason=Reason.UNSCHEDULABLE,
                message=f"waiting for room for all its pods at once: {held.message}",
                attempt=held.request.attempt,
            )
        )

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._interval)
            self._wake.clear()
            if self._stop.is_set() or not self._held:
                continue
            try:
                self.recheck()
            except Exception:  # the API may be away for a moment; try again later
                log.warning("checking the held multi-pod runs failed", exc_info=True)

    def recheck(self) -> list[str]:
        """Admit every held run that fits now, in order; the uids admitted."""
        admitted: list[str] = []
        changed: list[_Held] = []
        failed: list[tuple[_Held, Exception]] = []
        with self._lock:
            order = sorted(
                self._held.values(),
                key=lambda h: (-h.request.priority, h.request.submitted),
            )
            for held in order:
                fit = self._fit(held.pods)
                if not fit.fits:
                    if fit.message != held.message:
                        held.message = fit.message
                        changed.append(held)
                    continue
                uid = held.request.uid
                del self._held[uid]
                try:
                    self._admit(held.request)
                except Exception as refused:
                    failed.append((held, refused))
                    continue
                self._reserve(uid, held.pods, fit)
                admitted.append(uid)
        for held in changed:
            self._tell(held)
        for held, problem in failed:
            self._publish(
                RunEvent(
                    held.request.uid,
                    RunState.ERROR,
                    reason=Reason.LAUNCH_FAILED,
                    message=f"the kubernetes runtime could not start the run: {problem}",
                    attempt=held.request.attempt,
                )
            )
        return admitted

    def _reserve(self, uid: str, pods: list[dict[str, Any]], fit: GangFit) -> None:
        places = [(node, pod_requests(pod)) for node, pod in zip(fit.nodes, pods, strict=True)]
        self._reserved[uid] = _Reserved(time.monotonic() + RESERVE_SECONDS, places)

    def _fit(self, pods: list[dict[str, Any]]) -> GangFit:
        nodes, cluster_pods = self._snapshot()
        return fit_all(pods, self._nodes(nodes, cluster_pods))

    def _nodes(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> list[Node]:
        """The nodes as they are, with admitted runs' pods counted where the check put them
        until the cluster has placed them all."""
        placed: dict[str, int] = {}
        for pod in pods:
            uid = ((pod.get("metadata") or {}).get("labels") or {}).get(names.RUN_UID)
            bound = bool((pod.get("spec") or {}).get("nodeName"))
            if uid in self._reserved and bound:
                placed[uid] = placed.get(uid, 0) + 1
        now = time.monotonic()
        for uid, reserved in list(self._reserved.items()):
            if now > reserved.until or placed.get(uid, 0) >= len(reserved.places):
                del self._reserved[uid]
        counted = [
            pod
            for pod in pods
            if ((pod.get("metadata") or {}).get("labels") or {}).get(names.RUN_UID)
            not in self._reserved
            and (pod.get("status") or {}).get("phase") not in FINISHED_PHASES
        ]
        working = {node.name: node for node in occupied(nodes, counted)}
        for reserved in self._reserved.values():
            for name, requests in reserved.places:
                if name in working:
                    working[name].reserve(requests)
        return list(working.values())
