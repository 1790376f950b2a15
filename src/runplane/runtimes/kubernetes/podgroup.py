"""The scheduler-plugins coscheduling ``PodGroup``, where the cluster serves it.

A cluster whose scheduler runs the coscheduling plugin (kubernetes-sigs/scheduler-plugins)
serves ``scheduling.x-k8s.io/v1alpha1`` ``PodGroup``: pods labelled with a group's name are
bound only when ``minMember`` of them can be, all at once. runplane admits a multi-pod run only
when all its pods fit (:mod:`.gang`), but between that check and the scheduler's binding other
pods can take the room; with a PodGroup the scheduler itself keeps the run whole. The group is
named after the workload, owned by it (deleted with it), and asks for every pod of the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runplane.placement import pod_requests
from runplane.runtimes.kubernetes.api.calls import Calls

API_VERSION = "scheduling.x-k8s.io/v1alpha1"
#: The label that puts a pod in a group (the plugin's ``PodGroupLabel``).
LABEL = "scheduling.x-k8s.io/pod-group"
PLURAL = "podgroups"


def served(calls: Calls) -> bool:
    """Whether the API server serves PodGroups."""
    return calls.serves(API_VERSION, PLURAL)


def _quantity(resource: str, amount: int) -> str:
    return f"{amount}m" if resource == "cpu" else str(amount)


def pod_group(workload: Mapping[str, Any], pods: list[dict[str, Any]]) -> dict[str, Any]:
    """The group of ``workload``'s ``pods``: all of them, with their requests summed."""
    total: dict[str, int] = {}
    for pod in pods:
        for resource, amount in pod_requests(pod).items():
            total[resource] = total.get(resource, 0) + amount
    meta = workload["metadata"]
    owner = {
        "apiVersion": workload["apiVersion"],
        "kind": workload["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "PodGroup",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": dict(meta.get("labels") or {}),
            "ownerReferences": [owner],
        },
        "spec": {
            "minMember": len(pods),
            "minResources": {k: _quantity(k, v) for k, v in sorted(total.items())},
        },
    }
