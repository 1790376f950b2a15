"""Where the pods are in each workload object runplane renders.

A job is a Pod; a serving function a Deployment; an mpijob an ``MPIJob`` with Launcher and
Worker replica specs; a dask function a ``DaskCluster`` with scheduler and worker specs. Code
that needs "the pod" (what a run's process gets here, the priority class, where the invocation
goes) asks here instead of knowing every shape. A ``SparkApplication`` has no pod templates:
its driver and executors are described field by field, and rendering gives the local runtime
a pod of its own for it (``Rendered.local_pod``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def pod_specs(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every pod spec in the workload, the main one (the one a local run becomes) first."""
    kind = manifest["kind"]
    spec = manifest["spec"]
    if kind == "Pod":
        return [spec]
    if kind == "Deployment":
        return [spec["template"]["spec"]]
    if kind == "MPIJob":
        replicas = spec["mpiReplicaSpecs"]
        return [replicas["Worker"]["template"]["spec"], replicas["Launcher"]["template"]["spec"]]
    if kind == "DaskCluster":
        return [spec["worker"]["spec"], spec["scheduler"]["spec"]]
    if kind == "SparkApplication":
        return []
    raise ValueError(f"no pods known in a {kind}")


def main_pod_spec(manifest: Mapping[str, Any]) -> dict[str, Any] | None:
    specs = pod_specs(manifest)
    return specs[0] if specs else None
