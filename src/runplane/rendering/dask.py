"""A dask function as the dask-kubernetes operator's ``DaskCluster``: a scheduler and workers.

The pods run dask itself (``dask scheduler`` / ``dask worker``), not the function's handler:
the handler's process is the cluster's client. So they get the function's placement (node
selection, the preemption mode's tolerations and affinity), its priority class, environment
and volumes, each role its own resources, and none of runplane's bootstrap. The worker's
memory limit is dask's ``--memory-limit`` and ``spec.nthreads`` its ``--nthreads``; ``replicas``
(or ``min_replicas``) is the starting count the operator's autoscaler moves within
``[min_replicas, max_replicas]``.
"""

from __future__ import annotations

import copy
from typing import Any

from runplane import names
from runplane.spec.quantity import resource_amount, whole_cores

#: The image dask pods run when the function names none: dask's own.
DASK_IMAGE = "ghcr.io/dask/dask:latest"
SCHEDULER_PORT = 8786
DASHBOARD_PORT = 8787


def plain_pod(pod: dict[str, Any], image: str) -> dict[str, Any]:
    """``pod`` without runplane's bootstrap: its volumes, mounts and run variables."""
    pod = copy.deepcopy(pod)
    pod["volumes"] = [v for v in pod.get("volumes", []) if not v["name"].startswith(names.OWN)]
    if not pod["volumes"]:
        del pod["volumes"]
    container = pod["containers"][0]
    container["image"] = image
    container["env"] = [
        e for e in container["env"] if e["name"] not in names.RESERVED_ENV - {names.ENV_PROJECT}
    ]
    mounts = [m for m in container.get("volumeMounts", []) if not m["name"].startswith(names.OWN)]
    container.pop("volumeMounts", None)
    if mounts:
        container["volumeMounts"] = mounts
    container.pop("command", None)
    container.pop("args", None)
    return pod


def worker_threads(nthreads: int | None, limits: dict[str, Any]) -> int:
    """Threads per worker: ``spec.nthreads``, else one per core of the CPU limit, else 1."""
    if nthreads:
        return nthreads
    if "cpu" in limits:
        return max(1, whole_cores(resource_amount("cpu", limits["cpu"])))
    return 1


def render_daskcluster(
    metadata: dict[str, Any],
    pod_metadata: dict[str, Any],
    scheduler: dict[str, Any],
    worker: dict[str, Any],
    image: str,
    replicas: int,
    nthreads: int,
) -> dict[str, Any]:
    name = metadata["name"]
    scheduler = plain_pod(scheduler, image)
    worker = plain_pod(worker, image)
    scheduler["containers"][0].update(
        name="scheduler",
        args=["dask", "scheduler", "--host", "0.0.0.0"],
        ports=[
            {"name": "tcp-comm", "containerPort": SCHEDULER_PORT, "protocol": "TCP"},
            {"name": "http-dashboard", "containerPort": DASHBOARD_PORT, "protocol": "TCP"},
        ],
        readinessProbe={"httpGet": {"port": "http-dashboard", "path": "/health"}},
    )
    limits = worker["containers"][0].get("resources", {}).get("limits", {})
    args = ["dask", "worker", "--name", "$(DASK_WORKER_NAME)", "--nthreads", str(nthreads)]
    if "memory" in limits:
        args += ["--memory-limit", str(resource_amount("memory", limits["memory"]))]
    worker["containers"][0].update(name="worker", args=args)
    service = {
        "type": "ClusterIP",
        "selector": {"dask.org/cluster-name": name, "dask.org/component": "scheduler"},
        "ports": [
            {
                "name": "tcp-comm",
                "protocol": "TCP",
                "port": SCHEDULER_PORT,
                "targetPort": "tcp-comm",
            },
            {
                "name": "http-dashboard",
                "protocol": "TCP",
                "port": DASHBOARD_PORT,
                "targetPort": "http-dashboard",
            },
        ],
    }
    return {
        "apiVersion": "kubernetes.dask.org/v1",
        "kind": "DaskCluster",
        "metadata": metadata,
        "spec": {
            "idleTimeout": 0,
            "scheduler": {
                "metadata": copy.deepcopy(pod_metadata),
                "spec": scheduler,
                "service": service,
            },
            "worker": {
                "replicas": replicas,
                "metadata": copy.deepcopy(pod_metadata),
                "spec": worker,
            },
        },
    }


def render_autoscaler(metadata: dict[str, Any], minimum: int, maximum: int) -> dict[str, Any]:
    """The operator's ``DaskAutoscaler``: adaptive between ``minimum`` and ``maximum``."""
    return {
        "apiVersion": "kubernetes.dask.org/v1",
        "kind": "DaskAutoscaler",
        "metadata": copy.deepcopy(metadata),
        "spec": {"cluster": metadata["name"], "minimum": minimum, "maximum": maximum},
    }
