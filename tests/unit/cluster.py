"""A node set with every kind of node the documents describe, for placement tests."""

from __future__ import annotations

from runplane.placement import Node, Taint

LIFECYCLE = "app.iguazio.com/lifecycle"
SPOT_TAINT = Taint(LIFECYCLE, "preemptible", "NoSchedule")
GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
SYSTEM_TAINT = Taint("runplane.io/node-group", "system", "NoSchedule")


def reference_nodes() -> list[Node]:
    return [
        Node.create("on-demand-1", cpu="8", memory="32Gi", labels={LIFECYCLE: "non-preemptible"}),
        Node.create("plain-1", cpu="8", memory="32Gi"),
        Node.create(
            "spot-1", cpu="8", memory="32Gi", labels={LIFECYCLE: "preemptible"}, taints=[SPOT_TAINT]
        ),
        Node.create(
            "gpu-1",
            cpu="16",
            memory="64Gi",
            gpus=4,
            labels={LIFECYCLE: "non-preemptible"},
            taints=[GPU_TAINT],
        ),
        Node.create(
            "spot-gpu-1",
            cpu="16",
            memory="64Gi",
            gpus=4,
            labels={LIFECYCLE: "preemptible"},
            taints=[SPOT_TAINT, GPU_TAINT],
        ),
        Node.create(
            "system-1",
            cpu="4",
            memory="16Gi",
            labels={LIFECYCLE: "non-preemptible", "runplane.io/node-group": "system"},
            taints=[SYSTEM_TAINT],
        ),
    ]


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
