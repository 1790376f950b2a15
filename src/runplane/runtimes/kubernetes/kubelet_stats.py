"""What a run's pod uses now, from its node's kubelet: the summary API through the API
server's node proxy (``GET /api/v1/nodes/NODE/proxy/stats/summary``), which needs no
metrics-server; the service's account needs ``get`` on ``nodes/proxy``.

Bounded in cost: a node is asked at most once per :data:`FRESH` seconds however many of its
runs are sampled (one answer covers all its pods), only nodes whose kubelet answered the log
spool already are asked (a node without a kubelet API, as a kwok node, costs nothing), and a
node that refuses is left alone for :data:`REST` seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from runplane.runs import Usage

log = logging.getLogger(__name__)

#: Seconds an answer of a node serves every pod on it.
FRESH = 2.0
#: Seconds a node that refused is not asked again.
REST = 60.0


@dataclass(slots=True)
class _Node:
    at: float = float("-inf")
    pods: dict[str, Usage] = field(default_factory=dict)
    refused_until: float = float("-inf")


def pods_usage(summary: dict[str, Any]) -> dict[str, Usage]:
    """Each pod's usage in a kubelet summary, by ``namespace/name``: its working set (what
    the kubelet evicts and the OOM killer goes by) and its CPU time, summed over its
    containers.

    A container's CPU time may read 0 where its pod's does not (a cgroup v1 host's kubelet
    reports containers' CPU as 0 and the pod's cgroup's as measured), so the CPU time is the
    larger of the two; the pod's own figures serve where containers are not broken out."""
    found = {}
    for pod in summary.get("pods") or []:
        ref = pod.get("podRef") or {}
        containers = pod.get("containers") or []
        memory = sum(int((c.get("memory") or {}).get("workingSetBytes") or 0) for c in containers)
        cpu = sum(int((c.get("cpu") or {}).get("usageCoreNanoSeconds") or 0) for c in containers)
        cpu = max(cpu, int((pod.get("cpu") or {}).get("usageCoreNanoSeconds") or 0))
        if not containers:
            memory = int((pod.get("memory") or {}).get("workingSetBytes") or 0)
        found[f"{ref.get('namespace')}/{ref.get('name')}"] = Usage(memory, cpu / 1e9, memory)
    return found


class KubeletStats:
    """Pods' usage read from their nodes' summaries, each node at most every :data:`FRESH`
    seconds; ``ask`` sends one request for a node's summary, ``answers`` says whether the
    node's kubelet is known to answer through the proxy."""

    def __init__(
        self,
        ask: Callable[[str], dict[str, Any]],
        answers: Callable[[str], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ask, self._answers, self._clock = ask, answers, clock
        self._nodes: dict[str, _Node] = {}
        self._lock = threading.Lock()

    def usage(self, node: str, namespace: str, pod: str, fresh: float = FRESH) -> Usage | None:
        """The pod's usage as its node last said, asking the node if its answer is older than
        ``fresh`` seconds; ``None`` when the node cannot tell."""
        pods = self._pods_on(node, fresh)
        return None if pods is None else pods.get(f"{namespace}/{pod}")

    def usages(self, namespace: str, placed: Iterable[tuple[str, str, str]]) -> dict[str, Usage]:
        """The usage of each pod in ``placed`` (a key, the pod's name and its node) whose node
        can tell, by key: each node is looked up once however many of its pods are asked
        for."""
        found: dict[str, Usage] = {}
        nodes: dict[str, dict[str, Usage] | None] = {}
        for key, pod, node in placed:
            if node in nodes:
                pods = nodes[node]
            else:
                pods = nodes[node] = self._pods_on(node, FRESH)
            if pods is not None and (usage := pods.get(f"{namespace}/{pod}")) is not None:
                found[key] = usage
        return found

    def _pods_on(self, node: str, fresh: float) -> dict[str, Usage] | None:
        """The usage of the pods on ``node`` as it last said, asked again if that is older
        than ``fresh`` seconds; ``None`` when the node cannot tell."""
        if not node or not self._answers(node):
            return None
        now = self._clock()
        with self._lock:
            known = self._nodes.setdefault(node, _Node())
            if now < known.refused_until:
                return None
            if now - known.at >= fresh:
                try:
                    known.pods = pods_usage(self._ask(node))
                    known.at = now
                except Exception as error:  # refused, unreachable, or not a summary
                    log.info("node %s gave no stats summary: %s", node, error)
                    known.refused_until, known.pods = now + REST, {}
                    return None
            return known.pods

    def forget(self, node: str) -> None:
        with self._lock:
            self._nodes.pop(node, None)
