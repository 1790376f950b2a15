"""Live right-sizing on a cluster: a right-sized run's pod (``with_autoresize``) is watched
from the service, and its memory limit raised in place through the pod's ``resize``
subresource (:mod:`.resize`) when its memory stays above the threshold for the window, with
the same decision as on this machine (:func:`runplane.runtimes.local.resize.wanted`).

Its memory is read from its node's kubelet summary through the API server's node proxy
(:mod:`.kubelet_stats`), asked at most every :data:`FRESH` seconds per node: the summary's own
freshness is the kubelet's stats provider's (the CRI's or cAdvisor's housekeeping, about a
second to a few). A node that cannot be read is not right-sized (the run goes on as it was, an
OOM kill is retried as any other). CPU is not resized here: the summary has no throttling
figures.

Where the node cannot grant a resize (the kubelet's ``PodResizePending`` ``Infeasible`` or
``Deferred``, or no answer in time), right-sizing stops for that attempt and says so on the run
(a ``fallback`` resize): its OOM kill, if it comes, is retried with at least the size asked
for, as the retry policy allows (``service/retries.py``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runplane.errors import ResizeRefusedError
from runplane.rendering.autoresize import plan_of
from runplane.runs import Reason, ResizeRecord, RunState
from runplane.runtimes.events import RunEvent
from runplane.runtimes.kubernetes.pod_events import main_container
from runplane.runtimes.kubernetes.resize import PodResizer
from runplane.runtimes.resizing import Sizes, Watch, wanted
from runplane.runtimes.resizing import memory as shown_memory
from runplane.spec.quantity import resource_amount

log = logging.getLogger(__name__)

#: Seconds between two looks at the right-sized pods, and the oldest reading a look uses.
LOOK = 0.5
FRESH = 1.0

#: (node, pod name) → the memory the pod holds now, or ``None`` where it cannot be read.
Reading = Callable[[str, str], int | None]


@dataclass
class _Followed:
    pod: str
    node: str
    attempt: int
    watch: Watch
    sizes: Sizes
    #: Right-sizing stopped for this attempt (the node could not grant a resize).
    stopped: bool = False


def limits_of(pod: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """The main container's memory and CPU limits as its spec has them now."""
    name = main_container(pod)
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") == name:
            limits = (container.get("resources") or {}).get("limits") or {}
            memory, cpu = limits.get("memory"), limits.get("cpu")
            return (
                None if memory is None else resource_amount("memory", memory),
                None if cpu is None else resource_amount("cpu", cpu),
            )
    return None, None


class RightSizer:
    """One thread that looks at the running right-sized pods every :data:`LOOK` seconds."""

    def __init__(
        self,
        reading: Reading,
        resizer: PodResizer,
        publish: Callable[[RunEvent], None],
        look: float = LOOK,
    ) -> None:
        self._reading = reading
        self._resizer = resizer
        self._publish = publish
        self._look = look
        self._followed: dict[str, _Followed] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None

    def observe(self, uid: str, pod: Mapping[str, Any], running: bool, attempt: int) -> None:
        """The watch's news of a run's main pod: followed while it runs, if right-sized."""
        name = pod["metadata"]["name"]
        with self._lock:
            known = self._followed.get(uid)
            if not running:
                if known is not None and known.pod == name:
                    del self._followed[uid]
                return
            if known is not None and known.pod == name:
                return
            plan = plan_of(dict(pod))
            if plan is None:
                return
            memory, cpu = limits_of(pod)
            node = (pod.get("spec") or {}).get("nodeName") or ""
            self._followed[uid] = _Followed(name, node, attempt, Watch(plan), Sizes(memory, cpu))
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._run, name="runplane-right-sizing", daemon=True
                )
                self._thread.start()

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._closed:
            with self._lock:
                followed = [(uid, f) for uid, f in self._followed.items() if not f.stopped]
            for uid, one in followed:
                try:
                    self._look_at(uid, one)
                except Exception:  # one pod's trouble must not stop the others' right-sizing
                    log.exception("right-sizing run %s failed", uid)
            self._wake.wait(self._look)

    def _look_at(self, uid: str, one: _Followed) -> None:
        held = self._reading(one.node, one.pod)
        if held is None:
            return
        due = wanted(one.watch, one.sizes, held, None, time.monotonic())
        if due is None or due[0] is None:
            return
        memory, _, why = due
        try:
            self._resizer.resize(uid, memory, None, "", why, mode="auto")
        except ResizeRefusedError as error:
            one.stopped = True
            record = ResizeRecord(
                at=time.time(),
                attempt=one.attempt,
                memory_from=one.sizes.memory,
                memory_to=memory,
                cpu_from=one.sizes.cpu,
                cpu_to=one.sizes.cpu,
                why=f"{why}; {error}",
                outcome="fallback",
            )
            self._publish(
                RunEvent(
                    uid,
                    RunState.RUNNING,
                    reason=Reason.RESIZED,
                    message=(
                        f"right-sizing could not raise the memory limit to "
                        f"{shown_memory(memory)} in place ({error}); an OOM kill is retried "
                        "with it, as the retry policy allows"
                    ),
                    attempt=one.attempt,
                    resize=record,
                )
            )
            return
        one.sizes.memory = memory
        one.watch.above_since = None
