"""Nodes as users see them, and changing a node's labels through the runtime: the same for
``runplane serve`` (changes an admin's to do) and for the embedded default (this machine's
user's)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pydantic

from runplane.config import PreemptibleNodes
from runplane.errors import InvalidValueError
from runplane.placement import NodeSummary
from runplane.runtimes.contract import Runtime


def label_node(runtime: Runtime, name: str, labels: Mapping[str, str | None]) -> dict[str, str]:
    """Set the node's labels in ``labels`` and remove those given ``None``: the Node object on
    a cluster, this machine's stored labels on the embedded default; the labels after."""
    if not runtime.capabilities.node_labels:
        raise InvalidValueError(
            "node",
            name,
            f"the {runtime.name} runtime's node labels come from its configuration only",
            "local.node_labels in the service's configuration",
        )
    return runtime.label_node(name, labels)


class NodeView(pydantic.BaseModel):
    """A node as the API and the CLI show it (``GET /cluster/nodes``): its group, whether it
    is a spot node (its labels match the service's spot selector), what it can hold, what
    the pods on it request and what is free (placement's units: millicores, bytes, whole
    devices; ``pods`` counts pods), its taints, and whether it takes new pods and why not."""

    name: str
    group: str
    spot: bool
    labels: dict[str, str]
    taints: list[dict[str, str]]
    capacity: dict[str, int]
    requested: dict[str, int]
    free: dict[str, int]
    ready: bool
    condition: str


def node_views(nodes: Iterable[NodeSummary], spot: PreemptibleNodes) -> list[NodeView]:
    """Each node's view; ``spot`` says how spot nodes are labelled."""
    return [
        NodeView(
            name=node.name,
            group=node.group,
            spot=any(node.labels.get(key) == value for key, value in spot.node_selector.items()),
            labels=node.labels,
            taints=node.taints,
            capacity=node.allocatable,
            requested={
                resource: max(0, amount - node.free.get(resource, 0))
                for resource, amount in node.allocatable.items()
            },
            free=node.free,
            ready=node.ready,
            condition=node.condition,
        )
        for node in nodes
    ]
