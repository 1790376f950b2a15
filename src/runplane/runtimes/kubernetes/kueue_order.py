"""The runs ahead of a waiting workload in its Kueue queue, from the Workloads already watched.

Kueue's visibility API (an aggregated API server of its own) says a pending workload's
position, but a cluster must route it and grant it; the Workload watch the runtime keeps for
Kueue's reasons already sees every workload of its namespace. So the order is kept here, in
memory, as Kueue orders a ClusterQueue with ``BestEffortFIFO`` or ``StrictFIFO`` (runplane's
queues use ``BestEffortFIFO``): a higher priority first, then the earlier time it was queued
(its creation, or its eviction for pods that were not ready in time, Kueue's default
``requeuingStrategy``). Each project has one LocalQueue and one ClusterQueue, so a LocalQueue's
order is its ClusterQueue's. Timestamps have a resolution of one second, for Kueue as here:
workloads of the same priority queued within one second are ordered by uid, as Kueue breaks
the tie.

The count is the workloads ahead that still wait (not holding quota, not finished, active), so
it is what a run still waits behind. Kueue does not change a workload when one ahead of it is
admitted or goes, so the order remembers the count each workload was last told (:meth:`ahead`)
and marks a queue whose waiting workloads moved (one left while others came after it, or one
came in ahead of others); :meth:`QueueOrder.stale` then names the workloads of those queues
whose count changed, among the first :data:`~runplane.placement.quotas.MOST_AHEAD_SAID` and
one more (beyond, the text says "more than 20 runs ahead of it", which a move does not change).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Mapping
from typing import Any

from runplane.placement.quotas import MOST_AHEAD_SAID

#: (minus the priority, queued at, uid): ascending is Kueue's order.
Key = tuple[int, str, str]
#: The workloads of a queue whose count is said exactly: those with at most
#: ``MOST_AHEAD_SAID`` ahead; any further back is told "more than", as one count.
_FIRST = MOST_AHEAD_SAID + 1


def queued_at(workload: Mapping[str, Any]) -> str:
    """When Kueue counts ``workload`` as queued (RFC 3339, UTC: sorts as text)."""
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if (
            condition.get("type") == "Evicted"
            and condition.get("status") == "True"
            and condition.get("reason") == "PodsReadyTimeout"
        ):
            return str(condition.get("lastTransitionTime") or "")
    return str((workload.get("metadata") or {}).get("creationTimestamp") or "")


def pending(workload: Mapping[str, Any]) -> bool:
    """Whether ``workload`` waits in its queue: active, not holding quota, not finished."""
    if (workload.get("spec") or {}).get("active") is False:
        return False
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("QuotaReserved", "Finished") and (
            condition.get("status") == "True"
        ):
            return False
    return True


class QueueOrder:
    """The pending workloads of each queue, in Kueue's order. Thread-safe: the watch thread
    changes it, any thread may ask."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: queue (namespace/name) -> keys of its pending workloads, sorted
        self._queues: dict[str, list[Key]] = {}
        #: workload uid -> (queue, key), for the pending ones
        self._where: dict[str, tuple[str, Key]] = {}
        #: workload uid -> the count it was last told (capped: ``MOST_AHEAD_SAID + 1`` is
        #: "more than"), for the pending ones
        self._told: dict[str, int] = {}
        #: queue -> its pending workloads last told an exact count: one pushed back beyond
        #: the first ones since must be told "more than"
        self._exact: dict[str, set[str]] = {}
        #: queues whose pending workloads moved since :meth:`stale` last looked
        self._moved: set[str] = set()
        #: Set when a queue is marked moved: what a refresher waits for (and clears).
        self.marked = threading.Event()

    def observe(self, workload: Mapping[str, Any], queue: str) -> None:
        """Record ``workload``'s latest state (a watch event) in ``queue``."""
        meta = workload.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if not uid:
            return
        wanted: tuple[str, Key] | None = None
        if queue and pending(workload):
            priority = (workload.get("spec") or {}).get("priority")
            key = (-int(priority or 0), queued_at(workload), uid)
            wanted = (f"{meta.get('namespace') or ''}/{queue}", key)
        with self._lock:
            if self._where.get(uid) == wanted:
                return
            self._drop(uid)
            if wanted is not None:
                self._where[uid] = wanted
                keys = self._queues.setdefault(wanted[0], [])
                at = bisect.bisect_left(keys, wanted[1])
                keys.insert(at, wanted[1])
                if at < len(keys) - 1:  # ahead of others: their counts grew
                    self._mark(wanted[0])

    def forget(self, uid: str) -> None:
        """``uid``'s workload is gone."""
        with self._lock:
            self._drop(uid)

    def ahead(self, uid: str) -> int | None:
        """How many pending workloads come before ``uid``'s in its queue (``None``: it is not
        pending), remembered as what it was told."""
        with self._lock:
            found = self._where.get(uid)
            if found is None:
                return None
            count = bisect.bisect_left(self._queues[found[0]], found[1])
            self._tell(uid, found[0], count)
            return count

    def stale(self) -> list[str]:
        """The pending workloads, in the queues marked moved since the last call, whose count
        is not the one they were last told: among the first of each queue (as many as have an
        exact count said), and any told an exact count that is now beyond them. Each is
        remembered as told its count now, and the marks are cleared."""
        first = _FIRST
        with self._lock:
            out: list[str] = []
            for queue in sorted(self._moved):
                keys = self._queues.get(queue, [])
                near = [key[2] for key in keys[:first]]
                beyond = self._exact.get(queue, set()).difference(near)
                for uid in near + sorted(beyond):
                    count = bisect.bisect_left(keys, self._where[uid][1])
                    if self._told.get(uid) != min(count, first):
                        out.append(uid)
                    self._tell(uid, queue, count)
            self._moved.clear()
            return out

    def _tell(self, uid: str, queue: str, count: int) -> None:
        told = self._told[uid] = min(count, _FIRST)
        if told < _FIRST:
            self._exact.setdefault(queue, set()).add(uid)
        else:
            self._discard_exact(uid, queue)

    def _mark(self, queue: str) -> None:
        self._moved.add(queue)
        self.marked.set()

    def _discard_exact(self, uid: str, queue: str) -> None:
        exact = self._exact.get(queue)
        if exact is not None:
            exact.discard(uid)
            if not exact:
                del self._exact[queue]

    def _drop(self, uid: str) -> None:
        found = self._where.pop(uid, None)
        if found is None:
            return
        self._told.pop(uid, None)
        self._discard_exact(uid, found[0])
        keys = self._queues[found[0]]
        at = bisect.bisect_left(keys, found[1])
        del keys[at]
        if at < len(keys):  # others came after it: their counts fell
            self._mark(found[0])
        if not keys:
            del self._queues[found[0]]
            self._moved.discard(found[0])
