"""The placement check before a submission: could this pod ever run on these nodes, and could
it start now, in the scheduler's words.

The nodes are the runtime's own summaries, so the answer is the same on this machine and on a
cluster; the verdict is :func:`runplane.placement.evaluate`, the rules the runtimes use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runplane.placement import Node, NodeSummary, Taint, evaluate


@dataclass(frozen=True, slots=True)
class Placement:
    """Nodes the pod fits when empty (``ever``) and as they are now (``now``), with the
    scheduler's summary of each verdict; or, where the nodes could not be read, why not
    (``unchecked``): nothing is then known against the run, and it may be submitted."""

    ever: list[str]
    now: list[str]
    ever_message: str
    now_message: str
    unchecked: str = ""

    @property
    def possible(self) -> bool:
        return bool(self.ever) or bool(self.unchecked)


def unchecked(why: str) -> Placement:
    """The placement of a run on nodes that could not be read, and why."""
    return Placement([], [], "", "", unchecked=why)


def _node(summary: NodeSummary, empty: bool) -> Node:
    allocatable = dict(summary.allocatable)
    used = {} if empty else {k: v - summary.free.get(k, 0) for k, v in allocatable.items()}
    pods = used.pop("pods", 0)
    return Node(
        name=summary.name,
        labels=dict(summary.labels),
        taints=[
            Taint(t["key"], t.get("value", ""), t.get("effect", "NoSchedule"))
            for t in summary.taints
        ],
        allocatable=allocatable,
        requested=used,
        pod_count=pods,
        not_ready="" if empty else summary.condition,
    )


def check_placement(pod_spec: Mapping[str, Any], nodes: Iterable[NodeSummary]) -> Placement:
    listed = list(nodes)
    ever = evaluate(pod_spec, [_node(node, empty=True) for node in listed])
    now = evaluate(pod_spec, [_node(node, empty=False) for node in listed])
    return Placement(ever.fits, now.fits, ever.message, now.message)
