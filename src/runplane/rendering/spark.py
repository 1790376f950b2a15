"""A spark function as the Spark Operator's ``SparkApplication`` (``sparkoperator.k8s.io/v1beta2``).

The driver runs runplane's bootstrap as the application's main file, so the handler runs in the
driver and its own ``SparkSession.builder.getOrCreate()`` joins the application; ``replicas``
executors are asked for (``min_replicas``/``max_replicas`` turn on dynamic allocation between
them).

Resources in Spark's terms, from each role's requests and limits: ``cores`` (Spark's task
slots) is the CPU request (else the limit) rounded up to whole cores, ``coreRequest`` and
``coreLimit`` the pod's CPU request and limit as given. Spark gives a pod one memory amount,
as its request and its limit: the heap (``memory``) plus ``memoryOverhead`` (the JVM's own
memory and the Python processes). runplane makes that sum the role's memory limit (else its
request), ``memory`` :data:`HEAP_SHARE` of it and ``memoryOverhead`` the rest, so the pod holds
exactly what the function says, never Spark's own defaults on top. GPUs go as ``gpu``.

Every other pod field travels in the roles' pod templates (``template``, applied by
spark-submit): placement, priority class, environment, the bootstrap's volume. The operator
needs no webhook for them; the same fields are also set where a webhook reads them.

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
#: The share of a pod's (or a local run's) memory given to the JVM's heap; the rest is the
#: JVM's own memory and the Python processes (Spark's memory overhead).
HEAP_SHARE = 0.6
#: The container names Spark gives its pods' containers (kept, so logs and states find them).
CONTAINERS = {"driver": "spark-kubernetes-driver", "executor": "spark-kubernetes-executor"}
#: What Spark sets on the container itself: a template's own would be overridden or, for the
#: command, would replace the image's entrypoint that Spark's arguments are for.
_SPARK_OWNED = ("command", "args", "resources", "image", "imagePullPolicy", "name")


def _cores(resources: dict[str, Any]) -> int:
    """Whole cores for Spark's ``cores``: the request (else the limit) rounded up, at least 1."""
    for part in ("requests", "limits"):
        if "cpu" in resources.get(part, {}):
            return max(1, whole_cores(resource_amount("cpu", resources[part]["cpu"])))
    return 1


def _jvm_memory(amount: int) -> str:
    return f"{max(amount // MEBIBYTE, 1)}m"


def _memory(resources: dict[str, Any]) -> tuple[str, str] | None:
    """(``memory``, ``memoryOverhead``) that add up to the limit, else the request."""
    memory = resources.get("limits", {}).get("memory") or resources.get("requests", {}).get(
        "memory"
    )
    if not memory:
        return None
    total = resource_amount("memory", memory) // MEBIBYTE
    heap = max(int(total * HEAP_SHARE), 1)
    return f"{heap}m", f"{max(total - heap, 1)}m"


def _template(pod: dict[str, Any], labels: dict[str, str], role: str) -> dict[str, Any]:
    """The role's pod template: the rendered pod less what Spark sets itself."""
    container = {
        k: copy.deepcopy(v)
        for k, v in pod["containers"][0].items()
        if k not in _SPARK_OWNED and v not in (None, [], {})
    }
    container["name"] = CONTAINERS[role]
    spec = {
        k: copy.deepcopy(v)
        for k, v in pod.items()
        if k not in ("containers", "restartPolicy") and v not in (None, [], {})
    }
    spec["containers"] = [container]
    return {"metadata": {"labels": dict(labels)}, "spec": spec}


def _role(pod: dict[str, Any], labels: dict[str, str], role: str) -> dict[str, Any]:
    """A SparkPodSpec from a rendered pod spec: resources, placement, priority, env, mounts."""
    container = pod["containers"][0]
    resources = container.get("resources", {})
    spec: dict[str, Any] = {"cores": _cores(resources), "labels": dict(labels)}
    if "cpu" in resources.get("requests", {}):
        spec["coreRequest"] = resources["requests"]["cpu"]
    if "cpu" in resources.get("limits", {}):
        spec["coreLimit"] = resources["limits"]["cpu"]
    memory = _memory(resources)
    if memory:
        spec["memory"], spec["memoryOverhead"] = memory
    gpus = {k: v for k, v in resources.get("limits", {}).items() if k not in ("cpu", "memory")}
    for gpu_type, count in gpus.items():
        spec["gpu"] = {"name": gpu_type, "quantity": int(count)}
    for key in ("nodeSelector", "affinity", "tolerations", "priorityClassName"):
        if key in pod:
            spec[key] = copy.deepcopy(pod[key])
    spec["env"] = copy.deepcopy(container.get("env", []))
    if container.get("volumeMounts"):
        spec["volumeMounts"] = copy.deepcopy(container["volumeMounts"])
    spec["template"] = _template(pod, labels, role)
    return spec


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
    executor_spec = _role(executor, {**pod_labels, names.ROLE: "executor"}, "executor")
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
        "driver": _role(driver, {**pod_labels, names.ROLE: "driver"}, "driver"),
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
        heap = int(resource_amount("memory", limit) * HEAP_SHARE)
        args += ["--driver-memory", _jvm_memory(heap)]
    args += ["--conf", f"spark.executor.instances={executors}"]
    args += ["--conf", "spark.ui.showConsoleProgress=false", "pyspark-shell"]
    container["env"].append({"name": "PYSPARK_SUBMIT_ARGS", "value": " ".join(args)})
    container["env"].append({"name": "SPARK_LOCAL_IP", "value": "127.0.0.1"})
    return pod
