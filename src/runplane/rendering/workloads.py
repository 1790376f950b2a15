"""Where the pods are in each workload object runplane renders.

A job is a Pod; a serving function a Deployment; an mpijob an ``MPIJob`` with Launcher and
Worker replica specs; a dask function a ``DaskCluster`` with scheduler and worker specs. Code
that needs "the pod" (what a run's process gets here, the priority class, where the invocation
goes) asks here instead of knowing every shape. A ``SparkApplication``'s driver and executors are
described field by field (with pod templates that spark-submit applies, not pods of their own),
and rendering gives the local runtime a pod of its own for it (``Rendered.local_pod``).
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


#: Spark's memory overhead for Python applications (its non-JVM factor) and its floor, which
#: the operator adds to a role's ``memory`` for the pod's request.
SPARK_PYTHON_OVERHEAD = 0.4
SPARK_MIN_OVERHEAD = 384 * 2**20
#: A driver's or executor's heap when the role names none (``spark.driver.memory``'s default).
SPARK_DEFAULT_HEAP = "1g"


def gang_pod_specs(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One pod spec per pod a multi-pod run starts with, for a check that all fit at once: an
    MPIJob's launcher and each worker, a SparkApplication's driver and each executor (as the
    operator asks for them: cores, heap plus Spark's overhead, placement). Empty for a workload
    of one pod, or of pods that come and go (a Deployment, a dask cluster)."""
    kind = manifest["kind"]
    spec = manifest["spec"]
    if kind == "MPIJob":
        replicas = spec["mpiReplicaSpecs"]
        worker = replicas["Worker"]
        pods = [replicas["Launcher"]["template"]["spec"]] * replicas["Launcher"].get("replicas", 1)
        return pods + [worker["template"]["spec"]] * worker.get("replicas", 1)
    if kind == "SparkApplication":
        driver = _spark_pod(spec["driver"])
        executors = spec["executor"].get("instances", 1)
        return [driver] + [_spark_pod(spec["executor"])] * executors
    return []


def _spark_pod(role: Mapping[str, Any]) -> dict[str, Any]:
    """The pod spec the Spark operator makes of a driver or executor, as far as placement goes."""
    requests: dict[str, Any] = {"cpu": str(role.get("coreRequest") or role.get("cores", 1))}
    limits: dict[str, Any] = {}
    heap = jvm_bytes(str(role.get("memory", SPARK_DEFAULT_HEAP)))
    if "memoryOverhead" in role:  # runplane states it; Spark's default otherwise
        overhead = jvm_bytes(str(role["memoryOverhead"]))
    else:
        overhead = max(SPARK_MIN_OVERHEAD, int(heap * SPARK_PYTHON_OVERHEAD))
    requests["memory"] = str(heap + overhead)
    if "gpu" in role:
        limits[role["gpu"]["name"]] = str(role["gpu"]["quantity"])
    pod: dict[str, Any] = {
        "containers": [{"name": "spark", "resources": {"requests": requests, "limits": limits}}]
    }
    for key in ("nodeSelector", "affinity", "tolerations", "priorityClassName"):
        if key in role:
            pod[key] = role[key]
    return pod


def jvm_bytes(amount: str) -> int:
    """A JVM memory size (``512m``, ``2g``; Spark's ``memory``) in bytes."""
    units = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    text = amount.strip().lower().removesuffix("b")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)
