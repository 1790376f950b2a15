"""A function's ``spec``: its code, image, resources, placement, environment, volumes,
thresholds, serving and retry settings, each field checked as it is set."""

from __future__ import annotations

from functools import partial
from typing import Any, Literal

import pydantic

from runplane.errors import ConflictError, InvalidValueError
from runplane.spec import env as environment
from runplane.spec.autoresize import AutoResize
from runplane.spec.base import SpecModel, checked
from runplane.spec.bounds import MAX_TEXT_BYTES, check_count, check_lines, check_text
from runplane.spec.build import BuildSpec
from runplane.spec.labels import check_dns_label, check_label_key, check_secret_name
from runplane.spec.resources import Resources
from runplane.spec.retries import MAX_ATTEMPTS, RetryPolicy
from runplane.spec.scheduling import (
    PreemptionMode,
    check_affinity,
    check_node_selector,
    check_preemption_mode,
    check_priority_class_name,
    check_tolerations,
)
from runplane.spec.thresholds import ThresholdValue, check_thresholds
from runplane.spec.volumes import check_mount_path, check_volume_mounts, check_volumes


class HttpSpec(SpecModel):
    """The HTTP server of a ``serving`` function."""

    field_path = "spec.http"

    workers: int = pydantic.Field(default=1, ge=1)
    worker_timeout: int | None = pydantic.Field(default=None, ge=1)


class FunctionSpec(SpecModel):
    field_path = "spec"

    description: str = ""
    image: str = ""
    #: When the node fetches the image: Kubernetes' own default when unset (IfNotPresent,
    #: or Always for a ``:latest`` tag).
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = None
    command: str = ""
    args: list[str] = pydantic.Field(default_factory=list)
    handler: str = ""
    build: BuildSpec = pydantic.Field(default_factory=BuildSpec)
    resources: Resources = pydantic.Field(default_factory=Resources)
    node_name: str | None = None
    node_selector: dict[str, str] = pydantic.Field(default_factory=dict)
    affinity: dict[str, Any] | None = None
    tolerations: list[dict[str, Any]] = pydantic.Field(default_factory=list)
    preemption_mode: PreemptionMode | None = None
    priority_class_name: str | None = None
    env: list[dict[str, Any]] = pydantic.Field(default_factory=list)
    volumes: list[dict[str, Any]] = pydantic.Field(default_factory=list)
    volume_mounts: list[dict[str, Any]] = pydantic.Field(default_factory=list)
    disable_auto_mount: bool = False
    state_thresholds: dict[str, ThresholdValue] = pydantic.Field(default_factory=dict)
    replicas: int | None = pydantic.Field(default=None, ge=0)
    #: 0 asks to scale to zero; the autoscaler keeps at least one replica (Kubernetes' HPA
    #: scales to zero only behind an alpha feature gate).
    min_replicas: int | None = pydantic.Field(default=None, ge=0)
    max_replicas: int | None = pydantic.Field(default=None, ge=1)
    target_cpu_percent: int | None = pydantic.Field(default=None, ge=1)
    http: HttpSpec | None = None
    #: Per-role resources (spec/roles.py): dask's workers and scheduler, spark's driver and
    #: executors. ``nthreads``: threads per dask worker.
    worker_resources: Resources = pydantic.Field(default_factory=Resources)
    scheduler_resources: Resources = pydantic.Field(default_factory=Resources)
    driver_resources: Resources = pydantic.Field(default_factory=Resources)
    executor_resources: Resources = pydantic.Field(default_factory=Resources)
    nthreads: int | None = pydantic.Field(default=None, ge=1)
    #: MLRun's switch between a dask cluster on Kubernetes and one in-process; runplane's
    #: dask client takes its backend's (docs/runtimes.md), so this is recorded only.
    remote: bool = True
    #: Retries after a failure, the shorthand of ``retry.max_attempts`` (N retries: N + 1
    #: attempts); ``retry`` says which failures and how (``spec/retries.py``).
    retries: int = pydantic.Field(default=0, ge=0, le=MAX_ATTEMPTS - 1)
    retry: RetryPolicy | None = None
    #: Live right-sizing: how far a running job's limits may be raised in place
    #: (``spec/autoresize.py``); ``None``: an OOM kill ends the attempt, as it always did.
    autoresize: AutoResize | None = None
    #: Pod annotations (for sidecars, admission webhooks, cluster tooling).
    annotations: dict[str, str] = pydantic.Field(default_factory=dict)
    #: Where a run's artifacts go in its file system, ``{{run.uid}}`` and ``{{run.project}}``
    #: replaced per run; a mounted volume's path keeps them after the run. Unset: the run's
    #: own directory (on Kubernetes, gone with the pod).
    artifact_path: str = ""
    #: How a run logs what the handler returns: one ``key`` or ``key:kind`` (result,
    #: dataset, file, artifact, object) per returned value. Set per run by ``run(returns=)``.
    returns: list[str] = pydantic.Field(default_factory=list)
    #: The Kubernetes Service type of a serving function (``ClusterIP`` by default).
    service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] | None = None
    #: The Secret the node pulls the image with (``set_image_pull_configuration``).
    image_pull_secret: str | None = None
    #: Server settings set with ``set_config(key, value)``, recorded with the function.
    config: dict[str, Any] = pydantic.Field(default_factory=dict)

    @property
    def default_handler(self) -> str:
        """MLRun's name of :attr:`handler` (the function a run calls when it names none)."""
        return self.handler

    @default_handler.setter
    def default_handler(self, value: str) -> None:
        self.handler = value

    @pydantic.field_validator("returns", mode="before")
    @classmethod
    def _returns(cls, value: Any) -> Any:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise InvalidValueError(
                "returns", value, "a list of 'key' or 'key:kind'", "['accuracy', 'data:dataset']"
            )
        check_count("returns", value)
        for item in value:
            check_text("returns", item, MAX_TEXT_BYTES, "'accuracy'")
        return value

    _pull_secret = checked("image_pull_secret", by=check_secret_name, optional=True)

    #: Where a run's checkpoints go, kept across its attempts (``context.checkpoint_dir``):
    #: a path on a mounted volume, ``{{run.uid}}`` and ``{{run.project}}`` replaced per run.
    #: Unset: the run's own directory here; none in a pod (docs/resilience.md).
    checkpoint_path: str = ""
    #: Seconds between SIGTERM and SIGKILL when a pod is stopped (a spot reclaim, a drain, an
    #: abort): the time a handler has for a last checkpoint. Unset: Kubernetes' 30.
    termination_grace_period_seconds: int | None = pydantic.Field(default=None, ge=0, le=86400)

    @pydantic.field_validator("artifact_path", "checkpoint_path", mode="before")
    @classmethod
    def _run_path(cls, value: Any, info: pydantic.ValidationInfo) -> Any:
        return check_mount_path(f"spec.{info.field_name}", value) if value else ""

    _texts = checked(
        "description",
        "image",
        "command",
        "handler",
        by=partial(check_text, max_bytes=MAX_TEXT_BYTES, example="'train'"),
    )
    _args = checked(
        "args", by=partial(check_lines, example="['--epochs', '3']", line_example="'--epochs'")
    )
    _volumes = checked("volumes", by=check_volumes)
    _volume_mounts = checked("volume_mounts", by=check_volume_mounts)

    @pydantic.field_validator("annotations", mode="before")
    @classmethod
    def _annotations(cls, value: Any) -> Any:
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise InvalidValueError(
                "spec.annotations",
                value,
                "annotations map label-style keys to strings",
                "{'example.com/owner': 'team-ml'}",
            )
        for key in value:
            check_label_key("spec.annotations key", key)
        return value

    _node_name = checked(
        "node_name", by=partial(check_dns_label, example="'node-1'"), optional=True
    )
    _node_selector = checked("node_selector", by=check_node_selector)
    _affinity = checked("affinity", by=check_affinity)
    _tolerations = checked("tolerations", by=check_tolerations)
    _mode = checked("preemption_mode", by=check_preemption_mode, optional=True)
    _priority = checked("priority_class_name", by=check_priority_class_name, optional=True)
    _env = checked("env", by=environment.check_env_list)
    _thresholds = checked("state_thresholds", by=check_thresholds)

    @pydantic.model_validator(mode="after")
    def _consistent(self) -> FunctionSpec:
        if (
            self.min_replicas is not None
            and self.max_replicas is not None
            and self.min_replicas > self.max_replicas
        ):
            raise ConflictError(
                "spec.min_replicas",
                f"min_replicas {self.min_replicas} is above max_replicas {self.max_replicas}; "
                "min must be at most max (example: spec.min_replicas = 1; spec.max_replicas = 4)",
            )
        names = [volume.get("name") for volume in self.volumes]
        if len(set(names)) != len(names):
            raise ConflictError("spec.volumes", f"volume names must be unique, got {names}")
        paths = [mount.get("mountPath") for mount in self.volume_mounts]
        if len(set(paths)) != len(paths):
            raise ConflictError("spec.volume_mounts", f"mount paths must be unique, got {paths}")
        unknown = {m.get("name") for m in self.volume_mounts} - set(names)
        if unknown:
            raise ConflictError(
                "spec.volume_mounts",
                f"mounts name volumes that are not defined: {sorted(map(str, unknown))}",
            )
        return self
