"""The cluster as users see it, from its Node and Pod objects: a pure function, so the same
summary comes from a live API server, a saved snapshot or a test's fixtures."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from runplane.placement import Node, NodeSummary, pod_requests

#: Pods in these phases hold nothing on their node.
FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


def summarise(
    nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]
) -> list[NodeSummary]:
    """Each node with what its unfinished pods request subtracted from what it can hold."""
    return [node.summary() for node in occupied(nodes, pods)]


def occupied(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]) -> list[Node]:
    """The nodes for placement, each holding the requests of its unfinished pods."""
    by_name = {node.name: node for node in map(Node.from_kubernetes, nodes)}
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in FINISHED_PHASES:
            continue
        host = by_name.get((pod.get("spec") or {}).get("nodeName") or "")
        if host is not None:
            host.reserve(pod_requests(pod["spec"]))
    return list(by_name.values())
