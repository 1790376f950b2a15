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
it is what a run still waits behind, as of the last change of its own workload.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Mapping
from typing import Any

#: (minus the priority, queued at, uid): ascending is Kueue's order.
Key = tuple[int, str, str]


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
                bisect.insort(self._queues.setdefault(wanted[0], []), wanted[1])

    def forget(self, uid: str) -> None:
        """``uid``'s workload is gone."""
        with self._lock:
            self._drop(uid)

    def ahead(self, uid: str) -> int | None:
        """How many pending workloads come before ``uid``'s in its queue (``None``: it is not
        pending)."""
        with self._lock:
            found = self._where.get(uid)
            if found is None:
                return None
            return bisect.bisect_left(self._queues[found[0]], found[1])

    def _drop(self, uid: str) -> None:
        found = self._where.pop(uid, None)
        if found is None:
            return
        keys = self._queues[found[0]]
        del keys[bisect.bisect_left(keys, found[1])]
        if not keys:
            del self._queues[found[0]]
