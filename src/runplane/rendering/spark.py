"""A spark function as the Spark Operator's ``SparkApplication`` (``sparkoperator.k8s.io/v1beta2``).

The driver runs runplane's bootstrap as the application's main file, so the handler runs in the
driver and its own ``SparkSession.builder.getOrCreate()`` joins the application. Driver and
executors carry their roles' resources in Spark's terms (``cores``/``coreRequest``/
``coreLimit``, ``memory`` in JVM units, GPUs as ``gpu``), and both get the function's placement,
priority class, environment and volumes. ``replicas`` is the executor count; ``min_replicas``/
``max_replicas`` turn on dynamic allocation between them.

On this machine the same function is pyspark's local mode: :func:`local_submit_args` is what the
driver's process is given (``PYSPARK_SUBMIT_ARGS``), so the handler's session gets it.
"""

from __future__ import annotations

import copy
from typing import Any

from runplane import names
from runplane.spec.quantity import MEBIBYTE, resource_amount, whole_cores

#: The image spark pods run when the function names none: Spark's own, with Python.
SPARK_IMAGE = "spark:3.5.3-python3"
SPARK_VERSION = "3.5.3"
#: The share of a local run's memory limit given to the JVM's heap; the rest is the JVM's own
#: memory and the handler's Python process.
LOCAL_HEAP_SHARE = 0.6


def _cores(resources: dict[str, Any]) -> int:
    """Whole cores for Spark's ``cores``: the request (else the limit) rounded up, at least 1."""
    for part in ("requests", "limits"):
        if "cpu" in resources.get(part, {}):
            return max(1, whole_cores(resource_amount("cpu", resources[part]["cpu"])))
    return 1


def _jvm_memory(amount: int) -> str:
    return f"{max(amount // MEBIBYTE, 1)}m"


def _role(pod: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    """A SparkPodSpec from a rendered pod spec: resources, placement, priority, env, mounts."""
    container = pod["containers"][0]
    resources = container.get("resources", {})
    role: dict[str, Any] = {"cores": _cores(resources), "labels": dict(labels)}
    if "cpu" in resources.get("requests", {}):
        role["coreRequest"] = resources["requests"]["cpu"]
    if "cpu" in resources.get("limits", {}):
        role["coreLimit"] = resources["limits"]["cpu"]
    memory = resources.get("requests", {}).get("memory") or resources.get("limits", {}).get(
        "memory"
    )
    if memory:
        role["memory"] = _jvm_memory(resource_amount("memory", memory))
    if "memory" in resources.get("limits", {}):
        role["memoryLimit"] = resources["limits"]["memory"]
    gpus = {k: v for k, v in resources.get("limits", {}).items() if k not in ("cpu", "memory")}
    for gpu_type, count in gpus.items():
        role["gpu"] = {"name": gpu_type, "quantity": int(count)}
    for key in ("nodeSelector", "affinity", "tolerations", "priorityClassName"):
        if key in pod:
            role[key] = copy.deepcopy(pod[key])
    role["env"] = copy.deepcopy(container.get("env", []))
    if container.get("volumeMounts"):
        role["volumeMounts"] = copy.deepcopy(container["volumeMounts"])
    return role


def render_sparkapplication(
    metadata: dict[str, Any],
    pod_labels: dict[str, str],
    driver: dict[str, Any],
    executor: dict[str, Any],
    image: str,
    executors: int,
    scaling: tuple[int, int] | None,
    retries: int,
) -> dict[str, Any]:
    executor_spec = _role(executor, {**pod_labels, names.ROLE: "executor"})
    executor_spec["instances"] = executors
    spec: dict[str, Any] = {
        "type": "Python",
        "pythonVersion": "3",
        "mode": "cluster",
        "image": image,
        "mainApplicationFile": f"local://{names.BOOTSTRAP_DIR}/{names.BOOTSTRAP_SCRIPT}",
        "sparkVersion": SPARK_VERSION,
        "restartPolicy": (
            {"type": "OnFailure", "onFailureRetries": retries} if retries else {"type": "Never"}
        ),
        "driver": _role(driver, {**pod_labels, names.ROLE: "driver"}),
        "executor": executor_spec,
    }
    if driver.get("volumes"):
        spec["volumes"] = copy.deepcopy(driver["volumes"])
    if scaling is not None:
        spec["dynamicAllocation"] = {
            "enabled": True,
            "initialExecutors": executors,
            "minExecutors": scaling[0],
            "maxExecutors": scaling[1],
        }
    return {
        "apiVersion": "sparkoperator.k8s.io/v1beta2",
        "kind": "SparkApplication",
        "metadata": metadata,
        "spec": spec,
    }


def local_pod(driver: dict[str, Any], executor: dict[str, Any], executors: int) -> dict[str, Any]:
    """The run on one machine: the driver's pod with the executors' resources added (local
    mode runs them in the driver's JVM), told how to start its session."""
    pod = copy.deepcopy(driver)
    container = pod["containers"][0]
    own = container.setdefault("resources", {})
    theirs = executor["containers"][0].get("resources", {})
    for part in ("requests", "limits"):
        for key in ("cpu", "memory"):
            if key in own.get(part, {}) and key in theirs.get(part, {}):
                total = resource_amount(key, own[part][key]) + executors * resource_amount(
                    key, theirs[part][key]
                )
                own[part][key] = f"{total}m" if key == "cpu" else str(total)
    threads = executors * _cores(theirs)
    limit = own.get("limits", {}).get("memory")
    args = ["--master", f"local[{threads}]"]
    if limit:
        heap = int(resource_amount("memory", limit) * LOCAL_HEAP_SHARE)
        args += ["--driver-memory", _jvm_memory(heap)]
    args += ["--conf", f"spark.executor.instances={executors}"]
    args += ["--conf", "spark.ui.showConsoleProgress=false", "pyspark-shell"]
    container["env"].append({"name": "PYSPARK_SUBMIT_ARGS", "value": " ".join(args)})
    container["env"].append({"name": "SPARK_LOCAL_IP", "value": "127.0.0.1"})
    return pod
