"""(Function, Settings) -> Kubernetes objects as plain dicts. Pure and deterministic.

Service defaults, the preemption mode, policies and auto-mount are applied here, on copies:
the function is only read, so rendering twice, or after switching modes, gives exactly what
the current settings say and nothing left over from before.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any

from runplane import names
from runplane.config import Settings
from runplane.errors import ConflictError, InvalidValueError
from runplane.rendering.autoresize import autoresize_plan, mark
from runplane.rendering.bootstrap import bootstrap_configmap, bootstrap_volume
from runplane.rendering.dask import (
    DASK_IMAGE,
    render_autoscaler,
    render_daskcluster,
    worker_threads,
)
from runplane.rendering.lints import Effective, Lint, lint
from runplane.rendering.mpijob import render_mpijob
from runplane.rendering.policy import check_priority_class, check_reserved_groups
from runplane.rendering.preemption import apply_preemption_mode
from runplane.rendering.resources import (
    EffectiveResources,
    Quantities,
    effective_mode,
    effective_resources,
)
from runplane.rendering.spark import SPARK_IMAGE, render_sparkapplication
from runplane.rendering.spark import local_pod as spark_local_pod
from runplane.rendering.workloads import main_pod_spec, pod_specs
from runplane.spec.function import Function, FunctionKind, FunctionSpec
from runplane.spec.quantity import format_quantity
from runplane.spec.resources import COMPUTE, QoSClass, gpu_entries, qos_class

#: What a run's container runs: runplane's bootstrap, shipped in a ConfigMap, with the image's
#: own Python; the image needs nothing of runplane.
BOOTSTRAP_COMMAND = list(names.BOOTSTRAP_COMMAND)


@dataclass(frozen=True, slots=True)
class RunRef:
    """Which run attempt a pod belongs to; gives pods deterministic names and labels."""

    uid: str
    attempt: int = 1


@dataclass(frozen=True, slots=True)
class Rendered:
    manifests: list[dict[str, Any]]
    qos: QoSClass
    #: The main part's effective resources, mode and priority: what the run is recorded with.
    resources: EffectiveResources
    lints: list[Lint] = field(default_factory=list)
    #: What a run of a multi-pod workload is on one machine, for runtimes that run it as
    #: processes: the pod spec of one process tree, what that process tree is given (a spark
    #: application's driver with its executors' resources added), and how many of it start
    #: together (an mpijob's ranks). ``None``: the workload's own main pod and resources.
    local_pod: dict[str, Any] | None = None
    local_resources: EffectiveResources | None = None
    replicas: int = 1

    @property
    def pod_spec(self) -> dict[str, Any]:
        """The main pod spec: a job's Pod, a Deployment's template, an mpijob's worker..."""
        return self.local_pod or _pod_of(self.manifests)


def _pod_of(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    spec = main_pod_spec(manifests[0])
    if spec is None:
        raise ValueError(f"a {manifests[0]['kind']} has no pod template")
    return spec


def _copy(value: Any) -> Any:
    """Copy JSON-shaped spec data so manifests never alias the function they came from.

    A pickle round trip runs in C: on these small trees it is several times faster than
    ``copy.deepcopy`` and faster than a Python-level recursive copy.
    """
    copied: Any = pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
    return copied


def _selector(function: Function, settings: Settings) -> dict[str, str]:
    """Default selector < function selector; an empty function value removes a default key."""
    merged = {**settings.function_defaults.node_selector, **function.spec.node_selector}
    return {key: value for key, value in merged.items() if value != ""}


def _bootstrapped(spec: FunctionSpec) -> bool:
    """Whether runplane's bootstrap starts the pod; not when the function names a script of its
    own image to run instead."""
    return not (spec.command and not spec.build.source)


def _env(function: Function) -> list[dict[str, Any]]:
    """The function's own variables after runplane's: which project and function, and the code
    a serving pod loads. A run's invocation (its uid, handler, parameters) is added when the
    run is prepared (``runtimes.request``)."""
    spec = function.spec
    system = {
        names.ENV_PROJECT: function.metadata.project,
        names.ENV_FUNCTION: function.metadata.name,
    }
    if spec.handler:
        system[names.ENV_HANDLER] = spec.handler
    if spec.build.source:
        system[names.ENV_CODE] = spec.build.source
    if _bootstrapped(spec):
        system[names.ENV_RUN_DIR] = names.RUN_DIR
    user: list[dict[str, Any]] = _copy(spec.env)
    return [{"name": k, "value": v} for k, v in system.items()] + user


def _volumes(function: Function, settings: Settings) -> tuple[list[Any], list[Any]]:
    volumes = _copy(function.spec.volumes)
    mounts = _copy(function.spec.volume_mounts)
    auto = settings.auto_mount
    if auto.type == "none" or function.spec.disable_auto_mount:
        return volumes, mounts
    if any(v["name"] == auto.name for v in volumes) or any(
        m["mountPath"] == auto.mount_path for m in mounts
    ):
        return volumes, mounts  # the function's own volume wins over the automatic one
    source = {
        "pvc": {"persistentVolumeClaim": {"claimName": auto.source}},
        "configmap": {"configMap": {"name": auto.source}},
        "secret": {"secret": {"secretName": auto.source}},
    }[auto.type]
    volumes.append({"name": auto.name, **source})
    mounts.append({"name": auto.name, "mountPath": auto.mount_path})
    return volumes, mounts


def _labels(function: Function, run: RunRef | None) -> dict[str, str]:
    labels = {
        **function.metadata.labels,
        names.PROJECT: function.metadata.project,
        names.FUNCTION: function.metadata.name,
    }
    if run is not None:
        labels[names.RUN_UID] = run.uid
        labels[names.ATTEMPT] = str(run.attempt)
    return labels


def _pod_metadata(function: Function, labels: dict[str, str]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"labels": dict(labels)}
    if function.spec.annotations:
        metadata["annotations"] = dict(function.spec.annotations)
    return metadata


def _pod_spec(
    function: Function,
    settings: Settings,
    requests: dict[str, Any],
    limits: dict[str, Any],
    mode: Any,
    role: str | None,
) -> dict[str, Any]:
    spec = function.spec
    selector = _selector(function, settings)
    check_reserved_groups(settings, selector, spec.affinity)
    own = [*spec.tolerations]
    own += [t for t in settings.function_defaults.tolerations if t not in own]
    affinity, tolerations = apply_preemption_mode(mode, selector, spec.affinity, own, settings.spot)
    priority = check_priority_class(
        settings, spec.priority_class_name or settings.function_defaults.priority_class, role
    )
    resources: dict[str, Any] = {}
    rendered_requests = {k: format_quantity(v) for k, v in requests.items()}
    rendered_limits = {k: format_quantity(v) for k, v in limits.items() if k in COMPUTE}
    for gpu_type, count in gpu_entries(limits).items():
        if count:
            rendered_requests[gpu_type] = rendered_limits[gpu_type] = str(count)
    if rendered_requests:
        resources["requests"] = rendered_requests
    if rendered_limits:
        resources["limits"] = rendered_limits
    volumes, mounts = _volumes(function, settings)
    container: dict[str, Any] = {
        "name": "main",
        "image": spec.image or settings.function_defaults.image,
        "command": [*BOOTSTRAP_COMMAND],
        "env": _env(function),
        "resources": resources,
    }
    if spec.image_pull_policy:
        container["imagePullPolicy"] = spec.image_pull_policy
    if not _bootstrapped(spec):  # a script inside the image, run as is
        container["command"] = ["python3", spec.command]
    else:  # runplane's bootstrap runs the embedded code: it is mounted, with a run directory
        mounts.append(
            {"name": names.BOOTSTRAP_VOLUME, "mountPath": names.BOOTSTRAP_DIR, "readOnly": True}
        )
        mounts.append({"name": names.RUN_VOLUME, "mountPath": names.RUN_DIR})
        volumes.append(bootstrap_volume())
        volumes.append({"name": names.RUN_VOLUME, "emptyDir": {}})
    if spec.args:
        container["args"] = list(spec.args)
    if mounts:
        container["volumeMounts"] = mounts
    pod: dict[str, Any] = {"containers": [container], "priorityClassName": priority}
    if spec.termination_grace_period_seconds is not None:
        pod["terminationGracePeriodSeconds"] = spec.termination_grace_period_seconds
    if spec.node_name:
        pod["nodeName"] = spec.node_name
    if selector:
        pod["nodeSelector"] = selector
    if affinity:
        pod["affinity"] = affinity
    if tolerations:
        pod["tolerations"] = _copy(tolerations)
    if volumes:
        pod["volumes"] = volumes
    if spec.image_pull_secret:
        pod["imagePullSecrets"] = [{"name": spec.image_pull_secret}]
    return pod


def _secrets(
    function: Function, settings: Settings, labels: dict[str, str]
) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": settings.namespace, "labels": dict(labels)},
            "type": "Opaque",
            "stringData": dict(values),
        }
        for name, values in sorted(function.held_secrets.items())
    ]


def _replicas(spec: FunctionSpec) -> tuple[int, tuple[int, int] | None]:
    """The Deployment's replica count, and the autoscaler's (min, max) range when it has one.

    A fixed ``replicas`` inside the range is where the autoscaler starts; the spec already
    guarantees min <= max.
    """
    if spec.min_replicas is None and spec.max_replicas is None:
        return (spec.replicas if spec.replicas is not None else 1), None
    if spec.max_replicas is None:
        raise InvalidValueError(
            "spec.max_replicas",
            None,
            "autoscaling needs max_replicas when min_replicas is set",
            "spec.min_replicas = 1; spec.max_replicas = 4",
        )
    minimum = spec.min_replicas or 1
    start = spec.replicas if spec.replicas is not None else minimum
    return min(max(start, minimum), spec.max_replicas), (minimum, spec.max_replicas)


def _serving(
    function: Function, settings: Settings, pod: dict[str, Any], labels: dict[str, str]
) -> list[dict[str, Any]]:
    spec = function.spec
    name = function.metadata.name
    namespace = settings.namespace
    selector = {key: labels[key] for key in (names.PROJECT, names.FUNCTION)}
    http = spec.http
    container = pod["containers"][0]
    container["ports"] = [{"name": "http", "containerPort": settings.serving.port}]
    container["readinessProbe"] = {"tcpSocket": {"port": "http"}, "periodSeconds": 5}
    container["env"].append(
        {"name": names.ENV_HTTP_WORKERS, "value": str(http.workers if http else 1)}
    )
    container["env"].append({"name": names.ENV_HTTP_PORT, "value": str(settings.serving.port)})
    if http and http.worker_timeout:
        container["env"].append(
            {"name": names.ENV_HTTP_WORKER_TIMEOUT, "value": str(http.worker_timeout)}
        )
    pod["restartPolicy"] = "Always"
    replicas, scaling = _replicas(spec)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            "template": {"metadata": _pod_metadata(function, labels), "spec": pod},
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "type": spec.service_type or "ClusterIP",
            "selector": dict(selector),
            "ports": [
                {
                    "name": "http",
                    "port": settings.serving.service_port,
                    "targetPort": "http",
                    "protocol": "TCP",
                }
            ],
        },
    }
    manifests = [deployment, service]
    if scaling is not None:
        minimum, maximum = scaling
        manifests.append(
            {
                "apiVersion": "autoscaling/v2",
                "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
                "spec": {
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                    "minReplicas": minimum,
                    "maxReplicas": maximum,
                    "metrics": [
                        {
                            "type": "Resource",
                            "resource": {
                                "name": "cpu",
                                "target": {
                                    "type": "Utilization",
                                    "averageUtilization": spec.target_cpu_percent
                                    or settings.serving.target_cpu_percent,
                                },
                            },
                        }
                    ],
                },
            }
        )
    return manifests


#: The replica settings each kind takes.
_REPLICAS = {
    FunctionKind.JOB: (),
    FunctionKind.SERVING: ("replicas", "min_replicas", "max_replicas"),
    FunctionKind.MPIJOB: ("replicas",),
    FunctionKind.DASK: ("replicas", "min_replicas", "max_replicas"),
    FunctionKind.SPARK: ("replicas", "min_replicas", "max_replicas"),
}


def _check_replicas(function: Function) -> None:
    spec = function.spec
    allowed = _REPLICAS[function.kind]
    for key in ("replicas", "min_replicas", "max_replicas"):
        if getattr(spec, key) is not None and key not in allowed:
            if not allowed:
                message = (
                    f"replicas apply to serving, mpijob, dask and spark functions; a "
                    f"{function.kind.value} runs one pod per run (example: "
                    "code_to_function(..., kind='serving'))"
                )
            else:
                message = (
                    f"a {function.kind.value} takes {', '.join(allowed)}, not {key} (example: "
                    "fn.spec.replicas = 2)"
                )
            raise ConflictError(f"spec.{key}", message)


def main_part(kind: FunctionKind) -> str | None:
    """The part whose resources a kind's lints, QoS class and run record show: a dask
    function's workers, a spark function's executors; the function's own otherwise."""
    return {FunctionKind.DASK: "worker", FunctionKind.SPARK: "executor"}.get(kind)


def run_name(function: Function, run: RunRef | None) -> str:
    """The workload's name: the function's, and for a run its uid's first half and attempt."""
    name = function.metadata.name
    return f"{name}-{run.uid[:16]}-{run.attempt}" if run is not None else name


def render(
    function: Function,
    settings: Settings,
    run: RunRef | None = None,
    role: str | None = None,
) -> Rendered:
    """The Kubernetes objects for ``function`` under ``settings``, with QoS class and lints.

    A ``job`` becomes a Pod; a ``serving`` function a Deployment, a Service and, when
    autoscaled, a HorizontalPodAutoscaler; an ``mpijob`` an MPIJob, a ``dask`` function a
    DaskCluster, a ``spark`` function a SparkApplication (docs/runtimes.md). Policy and
    consistency errors are raised here. ``role`` is the user's, for priority-class policy.
    """
    spec = function.spec
    kind = function.kind
    _check_replicas(function)
    requests, limits, gpus = effective_resources(function, settings, main_part(kind))
    mode = effective_mode(function, settings)
    pod = _pod_spec(function, settings, requests, limits, mode, role)
    labels = _labels(function, run)
    local_pod: dict[str, Any] | None = None
    replicas = 1
    metadata = {"name": run_name(function, run), "namespace": settings.namespace}
    if kind is FunctionKind.SERVING:
        manifests = _serving(function, settings, pod, labels)
    elif kind is FunctionKind.MPIJOB:
        replicas = spec.replicas if spec.replicas is not None else 1
        if replicas < 1:
            raise InvalidValueError(
                "spec.replicas", replicas, "an mpijob needs at least one worker", "2"
            )
        launcher = _pod_spec(function, settings, {}, {}, mode, role)
        job = render_mpijob(
            settings.mpijob_api_version,
            {**metadata, "labels": dict(labels)},
            _pod_metadata(function, labels),
            pod,
            launcher,
            replicas,
            spec.retries,
        )
        manifests = [job]
        local_pod = pod
    elif kind is FunctionKind.DASK:
        s_requests, s_limits, _ = effective_resources(function, settings, "scheduler")
        scheduler = _pod_spec(function, settings, s_requests, s_limits, mode, role)
        start = spec.replicas if spec.replicas is not None else (spec.min_replicas or 1)
        scaling = _scaling(spec)
        if scaling:
            start = min(max(start, scaling[0]), scaling[1])
        cluster_metadata = {"name": function.metadata.name, "namespace": settings.namespace}
        manifests = [
            render_daskcluster(
                {**cluster_metadata, "labels": dict(labels)},
                _pod_metadata(function, labels),
                scheduler,
                pod,
                spec.image or DASK_IMAGE,
                start,
                worker_threads(spec.nthreads, limits),
            )
        ]
        if scaling:
            manifests.append(
                render_autoscaler({**cluster_metadata, "labels": dict(labels)}, *scaling)
            )
    elif kind is FunctionKind.SPARK:
        d_requests, d_limits, _ = effective_resources(function, settings, "driver")
        driver = _pod_spec(function, settings, d_requests, d_limits, mode, role)
        executors = spec.replicas if spec.replicas is not None else (spec.min_replicas or 1)
        manifests = [
            render_sparkapplication(
                {**metadata, "labels": dict(labels)},
                labels,
                driver,
                pod,
                spec.image or SPARK_IMAGE,
                executors,
                _scaling(spec),
                spec.retries,
            )
        ]
        local_pod = spark_local_pod(driver, pod, executors)
    else:
        pod["restartPolicy"] = "Never"
        manifests = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {**metadata, **_pod_metadata(function, labels)},
                "spec": pod,
            }
        ]
        plan = autoresize_plan(function, limits, settings)
        if plan is not None:
            mark(manifests[0], plan)
    manifests.extend(_secrets(function, settings, labels))
    every_pod = [*pod_specs(manifests[0]), *([local_pod] if local_pod else [])]
    if any(
        v["name"] == names.BOOTSTRAP_VOLUME for spec_ in every_pod for v in spec_.get("volumes", [])
    ):
        manifests.append(bootstrap_configmap(settings.namespace))
    effective = Effective(function=function, requests=requests, limits=limits, gpus=gpus, mode=mode)
    priority_class = pod["priorityClassName"]
    resources = EffectiveResources(
        Quantities.of(requests),
        Quantities.of(limits),
        mode,
        priority_class,
        settings.priority_classes.value_of(priority_class),
    )
    local_resources = None
    if local_pod is not None:
        container = local_pod["containers"][0]
        local_resources = EffectiveResources.of_container(container, settings, priority_class)
    return Rendered(
        manifests=manifests,
        qos=qos_class(requests, limits),
        resources=resources,
        lints=list(lint(effective)),
        local_pod=local_pod,
        local_resources=local_resources,
        replicas=replicas,
    )


def _scaling(spec: FunctionSpec) -> tuple[int, int] | None:
    """(min, max) when the function gives a range; a range needs its maximum."""
    if spec.min_replicas is None and spec.max_replicas is None:
        return None
    if spec.max_replicas is None:
        raise InvalidValueError(
            "spec.max_replicas",
            None,
            "scaling needs max_replicas when min_replicas is set",
            "spec.min_replicas = 1; spec.max_replicas = 4",
        )
    return spec.min_replicas or 1, spec.max_replicas
