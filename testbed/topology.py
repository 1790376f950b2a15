"""Seed a cluster with the node groups and priority classes runplane's placement rules target.

The shapes mirror the source documents: an on-demand group labelled non-preemptible, a spot
group labelled and tainted preemptible, a GPU group, and a system group reserved for core
services. Every node carries kwok's annotation so kwok (and only kwok) plays its kubelet.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from runplane import names
from runplane.config import PREEMPTIBLE_PRESETS, SPOT_LABEL, PriorityClasses
from runplane.rendering.cluster import priority_classes
from testbed.cluster import KWOK_NODE_ANNOTATION, KWOK_NODE_VALUE

GROUP_LABEL = names.NODE_GROUP
#: The documents' convention (runplane's default spot preset): one label, two values.
LIFECYCLE_LABEL = SPOT_LABEL
ON_DEMAND = PREEMPTIBLE_PRESETS["iguazio"].on_demand_labels[SPOT_LABEL]
SPOT = PREEMPTIBLE_PRESETS["iguazio"].node_selector[SPOT_LABEL]
RESERVED_TAINT = {"key": names.RESERVED, "value": "system", "effect": "NoSchedule"}
SPOT_TAINT = {"key": LIFECYCLE_LABEL, "value": SPOT, "effect": "NoSchedule"}
GPU_TAINT = {"key": names.GPU, "value": "present", "effect": "NoSchedule"}
RUNS_NAMESPACE = "runplane-runs"
#: The one real node (kubelet + containerd, testbed/realnode.py) is a group of its own. Its
#: taint keeps every pod that does not ask for it (runplane's own included) on the kwok nodes.
REAL_NODE_GROUP = "real"
REAL_NODE_TAINT = {"key": f"{names.PREFIX}real", "value": "true", "effect": "NoSchedule"}
REAL_NODE_TOLERATION = {"operator": "Equal", **REAL_NODE_TAINT}
REAL_NODE_LABELS = {GROUP_LABEL: REAL_NODE_GROUP, LIFECYCLE_LABEL: ON_DEMAND}
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: The class core services use; it may preempt user pods.
SYSTEM_PRIORITY_CLASS = PriorityClasses().system[0]
ZONES = ("zone-a", "zone-b", "zone-c")


@dataclass(frozen=True)
class NodeGroup:
    name: str
    count: int
    cpu: int
    memory_gi: int
    instance_type: str
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()
    gpus: int = 0
    max_pods: int = 110

    @property
    def allocatable_cpu(self) -> str:
        """Kubelet reserves some CPU and memory, so allocatable is below capacity as on EKS."""
        return f"{self.cpu * 1000 - 90}m"

    @property
    def allocatable_memory(self) -> str:
        return f"{self.memory_gi * 1024 - 1536}Mi"

    def node_names(self) -> list[str]:
        return [f"{self.name}-{i}" for i in range(self.count)]


def node_groups(
    system: int = 1, on_demand: int = 3, spot: int = 3, gpu: int = 1
) -> list[NodeGroup]:
    return [
        NodeGroup(
            "system", system, 4, 16, "m5.xlarge", {LIFECYCLE_LABEL: ON_DEMAND}, (RESERVED_TAINT,)
        ),
        NodeGroup("on-demand", on_demand, 8, 32, "m5.2xlarge", {LIFECYCLE_LABEL: ON_DEMAND}),
        NodeGroup("spot", spot, 8, 32, "m5.2xlarge", {LIFECYCLE_LABEL: SPOT}, (SPOT_TAINT,)),
        NodeGroup(
            "gpu",
            gpu,
            32,
            244,
            "p3.8xlarge",
            {LIFECYCLE_LABEL: ON_DEMAND, "nvidia.com/gpu.product": "Tesla-V100-SXM2-16GB"},
            (GPU_TAINT,),
            gpus=4,
        ),
    ]


def node_manifest(group: NodeGroup, name: str, index: int = 0) -> dict[str, Any]:
    resources = {
        "cpu": group.allocatable_cpu,
        "memory": group.allocatable_memory,
        "pods": str(group.max_pods),
        "ephemeral-storage": "100Gi",
    }
    capacity = dict(resources, cpu=str(group.cpu), memory=f"{group.memory_gi}Gi")
    if group.gpus:
        resources[names.GPU] = capacity[names.GPU] = str(group.gpus)
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        # A kubelet registers its node with the beta labels too, and the node lifecycle
        # controller adds them to a node that lacks them, a moment after it is created: a node
        # made without them would change under a test that reads its labels.
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": group.instance_type,
        "topology.kubernetes.io/zone": ZONES[index % len(ZONES)],
        GROUP_LABEL: group.name,
        "type": "kwok",
        **group.labels,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {KWOK_NODE_ANNOTATION: KWOK_NODE_VALUE},
        },
        "spec": {"taints": [dict(t) for t in group.taints]},
        "status": {"allocatable": resources, "capacity": capacity},
    }


@dataclass
class Topology:
    groups: list[NodeGroup]

    def nodes(self, group: str) -> list[str]:
        return next(g for g in self.groups if g.name == group).node_names()

    def group(self, name: str) -> NodeGroup:
        return next(g for g in self.groups if g.name == name)


def _create(fn: Any, body: dict[str, Any]) -> None:
    try:
        fn(body)
    except ApiException as err:
        if err.status != 409:
            raise


def create_nodes(api: client.ApiClient, manifests: Iterable[dict[str, Any]]) -> list[str]:
    """Create nodes in parallel: at 1000 nodes sequential round trips dominate seeding time."""
    core = client.CoreV1Api(api)
    items = list(manifests)
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda m: _create(core.create_node, m), items))
    return [m["metadata"]["name"] for m in items]


def node_ready(node: client.V1Node) -> bool:
    """Ready means schedulable too: the not-ready taint goes only after the lifecycle
    controller has seen the Ready condition."""
    conditions = (node.status.conditions if node.status else None) or []
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    taints = (node.spec.taints if node.spec else None) or []
    return ready and not any(t.key.startswith("node.kubernetes.io/") for t in taints)


def wait_nodes_ready(api: client.ApiClient, names: Iterable[str], timeout: float = 120) -> None:
    core = client.CoreV1Api(api)
    wanted = set(names)
    deadline = time.monotonic() + timeout
    while True:
        ready = {n.metadata.name for n in core.list_node().items if n.metadata and node_ready(n)}
        pending = wanted - ready
        if not pending:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(pending)} nodes not ready: {sorted(pending)[:10]}")
        time.sleep(0.2)


def create_priority_classes(api: client.ApiClient) -> None:
    """The classes runplane's default configuration names, as runplane would create them."""
    sched = client.SchedulingV1Api(api)
    for manifest in priority_classes(PriorityClasses()):
        _create(sched.create_priority_class, manifest)


def create_namespace(api: client.ApiClient, name: str, timeout: float = 60) -> None:
    """Pods are rejected until the namespace's default ServiceAccount exists, so wait for it."""
    core = client.CoreV1Api(api)
    _create(
        core.create_namespace, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    deadline = time.monotonic() + timeout
    while True:
        try:
            core.read_namespaced_service_account("default", name)
            return
        except ApiException as err:
            if err.status != 404 or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def seed(
    api: client.ApiClient,
    groups: list[NodeGroup] | None = None,
    namespace: str = RUNS_NAMESPACE,
    timeout: float = 120,
) -> Topology:
    groups = groups if groups is not None else node_groups()
    manifests = [node_manifest(g, name, i) for g in groups for i, name in enumerate(g.node_names())]
    names = create_nodes(api, manifests)
    create_priority_classes(api)
    create_namespace(api, namespace)
    wait_nodes_ready(api, names, timeout)
    return Topology(groups)
