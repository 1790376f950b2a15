"""Nodes and pod requirements as the placement rules see them: integers, not quantities.

CPU is in millicores, memory in bytes, everything else (GPUs, pods) in whole units, so a fit
check is integer arithmetic, as in kube-scheduler.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runplane import names
from runplane.spec.quantity import resource_amount
from runplane.spec.scheduling import required_node_terms

#: Pods per node when a node does not say (the kubelet's default ``maxPods``).
DEFAULT_MAX_PODS = 110


def amounts(resources: Mapping[str, Any]) -> dict[str, int]:
    return {name: resource_amount(name, value) for name, value in resources.items()}


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(slots=True)
class Node:
    """One node: labels, taints, what it can hold and what running pods already reserve."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    allocatable: dict[str, int] = field(default_factory=dict)
    requested: dict[str, int] = field(default_factory=dict)
    pod_count: int = 0
    unschedulable: bool = False
    #: Why the node takes no new pods though it may fit them (its kubelet is not ready, it is
    #: cordoned); empty when it does.
    not_ready: str = ""

    @classmethod
    def create(
        cls,
        name: str,
        *,
        cpu: Any = "4",
        memory: Any = "16Gi",
        gpus: int = 0,
        gpu_type: str = names.GPU,
        labels: Mapping[str, str] | None = None,
        taints: Iterable[Taint] = (),
        pods: int = DEFAULT_MAX_PODS,
    ) -> Node:
        allocatable = {
            "cpu": resource_amount("cpu", cpu),
            "memory": resource_amount("memory", memory),
            "pods": pods,
        }
        if gpus:
            allocatable[gpu_type] = gpus
        return cls(
            name=name,
            labels={"kubernetes.io/hostname": name, **(labels or {})},
            taints=list(taints),
            allocatable=allocatable,
        )

    @classmethod
    def from_kubernetes(cls, node: Mapping[str, Any]) -> Node:
        """A node from a Kubernetes Node object in JSON shape."""
        metadata = node.get("metadata", {})
        spec = node.get("spec", {})
        allocatable = amounts(node.get("status", {}).get("allocatable", {}))
        allocatable.setdefault("pods", DEFAULT_MAX_PODS)
        return cls(
            name=metadata["name"],
            labels=dict(metadata.get("labels") or {}),
            taints=[
                Taint(t["key"], t.get("value", ""), t["effect"]) for t in spec.get("taints") or []
            ],
            allocatable=allocatable,
            unschedulable=bool(spec.get("unschedulable")),
            not_ready=_not_ready(node),
        )

    def free(self, resource: str) -> int:
        return self.allocatable.get(resource, 0) - self.requested.get(resource, 0)

    def reserve(self, requests: Mapping[str, int]) -> None:
        for name, amount in requests.items():
            self.requested[name] = self.requested.get(name, 0) + amount
        self.pod_count += 1

    def release(self, requests: Mapping[str, int]) -> None:
        for name, amount in requests.items():
            self.requested[name] = self.requested.get(name, 0) - amount
        self.pod_count -= 1

    def summary(self) -> NodeSummary:
        return NodeSummary(
            name=self.name,
            group=self.labels.get(names.NODE_GROUP, ""),
            labels=dict(self.labels),
            taints=[{"key": t.key, "value": t.value, "effect": t.effect} for t in self.taints],
            allocatable=dict(self.allocatable),
            free={resource: self.free(resource) for resource in self.allocatable}
            | {"pods": self.allocatable.get("pods", 0) - self.pod_count},
            ready=not self.not_ready,
            condition=self.not_ready,
        )


def _not_ready(node: Mapping[str, Any]) -> str:
    """The node's own word on why it takes no pods, from its Ready condition and cordon."""
    if (node.get("spec") or {}).get("unschedulable"):
        return "cordoned (spec.unschedulable)"
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            if condition.get("status") == "True":
                return ""
            words = [condition.get("reason") or "", condition.get("message") or ""]
            return "not ready: " + (": ".join(w for w in words if w) or "no reason given")
    return "not ready: the node has reported no Ready condition yet"


@dataclass(frozen=True, slots=True)
class NodeSummary:
    """A node as users see it: its group, labels, taints, what it can hold and what is free
    (in placement's units: millicores, bytes, whole devices)."""

    name: str
    group: str
    labels: dict[str, str]
    taints: list[dict[str, str]]
    allocatable: dict[str, int]
    free: dict[str, int]
    #: Whether the node takes new pods; ``condition`` says why not.
    ready: bool = True
    condition: str = ""


@dataclass(frozen=True, slots=True)
class PodRequirements:
    """What a pod asks of a node, read once from its spec."""

    node_name: str | None
    node_selector: dict[str, str]
    required_terms: list[dict[str, Any]] | None
    tolerations: list[dict[str, Any]]
    requests: dict[str, int]

    @classmethod
    def from_pod_spec(cls, spec: Mapping[str, Any]) -> PodRequirements:
        return cls(
            node_name=spec.get("nodeName"),
            node_selector=dict(spec.get("nodeSelector") or {}),
            required_terms=required_node_terms(spec.get("affinity")),
            tolerations=list(spec.get("tolerations") or []),
            requests=pod_requests(spec),
        )


def _container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    # The API server defaults a missing request to its limit.
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return amounts(merged)


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """Effective requests: containers summed, at least the largest init container, plus overhead."""
    total: dict[str, int] = {}
    for container in spec.get("containers", []):
        for name, amount in _container_requests(container).items():
            total[name] = total.get(name, 0) + amount
    for container in spec.get("initContainers", []) or []:
        for name, amount in _container_requests(container).items():
            total[name] = max(total.get(name, 0), amount)
    for name, amount in amounts(spec.get("overhead") or {}).items():
        total[name] = total.get(name, 0) + amount
    return total
