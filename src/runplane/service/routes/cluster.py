"""``/cluster``: the runtime, what it can do, its nodes and whether runs can start; and a
node's labels, changed by admins."""

from __future__ import annotations

import pydantic
from fastapi import APIRouter, HTTPException

from runplane.placement import NodeSummary
from runplane.runtimes.contract import Capabilities
from runplane.service.nodes import NodeView, node_views
from runplane.service.routes.context import Service, User
from runplane.service.routes.fields import NodeName

router = APIRouter()


class ClusterOut(pydantic.BaseModel):
    runtime: str
    capabilities: Capabilities
    #: Whether runs can start: some node takes new pods. ``message`` says how many, and why
    #: the others do not.
    ready: bool
    message: str
    nodes: list[NodeSummary]


class NodeChange(pydantic.BaseModel):
    """Labels to set, and ``null`` for those to remove (a JSON merge patch of the labels)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    labels: dict[str, str | None] = pydantic.Field(max_length=64)


class NodeLabelsOut(pydantic.BaseModel):
    name: str
    labels: dict[str, str]


@router.get("/cluster")
def cluster(server: Service, _: User) -> ClusterOut:
    runtime = server.runs.runtime
    nodes = server.nodes()
    ready = [node for node in nodes if node.ready]
    message = f"{len(ready)} of {len(nodes)} nodes take new pods" + "".join(
        f"; {node.name}: {node.condition}" for node in nodes if not node.ready
    )
    return ClusterOut(
        runtime=runtime.name,
        capabilities=runtime.capabilities,
        ready=bool(ready),
        message=message,
        nodes=nodes,
    )


@router.get("/cluster/nodes")
def nodes(server: Service, _: User) -> list[NodeView]:
    """Each node: its group, spot or on-demand, capacity, what is requested and free, its
    taints, and whether it takes new pods (``condition`` says why not)."""
    return node_views(server.nodes(), server.settings.spot)


@router.patch("/cluster/nodes/{name}")
def label_node(name: NodeName, body: NodeChange, server: Service, who: User) -> NodeLabelsOut:
    """Set a node's labels and remove those given ``null`` (admins): on a cluster the Node
    object's, on the embedded default this machine's (kept by the service's home)."""
    if not who.admin:
        raise HTTPException(403, f"user {who.user!r} may not label nodes; only admins may")
    return NodeLabelsOut(name=name, labels=server.label_node(name, body.labels))
