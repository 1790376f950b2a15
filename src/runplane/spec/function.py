"""The Function: a user's whole intent for a job or service, and the calls that shape it.

Every modifier validates its arguments, computes the new value, and only then assigns it, so a
refused call leaves the function exactly as it was. Modifiers return the function so calls
chain. Service defaults, preemption mode and auto-mount are *not* applied here: they are
applied at render time and never written back, which is what keeps modes from being sticky.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

import pydantic

from runplane import hooks, names
from runplane.errors import ConflictError, InvalidValueError
from runplane.spec import env as environment
from runplane.spec.base import SpecModel, translate
from runplane.spec.bounds import MAX_SOURCE_BYTES, MAX_TEXT_BYTES, check_count, check_text
from runplane.spec.labels import (
    check_dns_label,
    check_label_key,
    check_labels,
    normalize_name,
)
from runplane.spec.resources import (
    COMPUTE,
    Resources,
    check_gpu_count,
    check_gpu_type,
    gpu_entries,
)
from runplane.spec.retries import MAX_ATTEMPTS, RetryPolicy, patched
from runplane.spec.roles import RoleResources, check_roles, compute_quantities
from runplane.spec.run_options import RunArguments
from runplane.spec.scheduling import (
    PreemptionMode,
    check_affinity,
    check_node_selector,
    check_preemption_mode,
    check_priority_class_name,
    check_tolerations,
)
from runplane.spec.thresholds import ThresholdValue, check_thresholds
from runplane.spec.volumes import (
    Mount,
    Volume,
    add_volume,
    check_mount_path,
    check_relative_path,
    check_volume_mounts,
    check_volumes,
)


class FunctionKind(StrEnum):
    """``job`` runs to completion; ``serving`` is a long-running HTTP service; ``mpijob``,
    ``dask`` and ``spark`` spread one computation over several processes or pods (see
    docs/runtimes.md)."""

    JOB = "job"
    SERVING = "serving"
    MPIJOB = "mpijob"
    DASK = "dask"
    SPARK = "spark"


#: Other names of a kind: ``local`` (MLRun's in-process job, and what functions exported by
#: earlier runplane versions may say) and ``handler`` run as a job, here or through the
#: service; ``nuclio`` and ``remote`` (MLRun's names of a real-time function) are ``serving``.
KIND_ALIASES = {
    "local": FunctionKind.JOB,
    "handler": FunctionKind.JOB,
    "nuclio": FunctionKind.SERVING,
    "remote": FunctionKind.SERVING,
}


def check_kind(kind: object) -> FunctionKind:
    try:
        if not isinstance(kind, str):
            raise ValueError(kind)
        return KIND_ALIASES.get(kind) or FunctionKind(kind or FunctionKind.JOB)
    except ValueError:
        raise InvalidValueError(
            "kind",
            kind,
            "allowed kinds are " + ", ".join(k.value for k in FunctionKind),
            "kind='job'",
        ) from None


class Metadata(SpecModel):
    field_path = "metadata"

    name: str
    project: str = "default"
    tag: str = ""
    labels: dict[str, str] = pydantic.Field(default_factory=dict)

    @pydantic.field_validator("name", mode="before")
    @classmethod
    def _name(cls, value: Any) -> Any:
        """Normalised with a warning; empty until a run names it after its handler
        (``new_function().run(handler=train)``)."""
        if value == "":
            return value
        return check_dns_label("metadata.name", normalize_name("metadata.name", value))

    @pydantic.field_validator("project", mode="before")
    @classmethod
    def _project(cls, value: Any) -> Any:
        return check_dns_label("metadata.project", value)

    @pydantic.field_validator("labels", mode="before")
    @classmethod
    def _labels(cls, value: Any) -> Any:
        return check_labels("metadata.labels", value)


class BuildSpec(SpecModel):
    """The code a function runs, embedded so the function runs anywhere without the file."""

    field_path = "spec.build"

    #: The code, base64-encoded UTF-8 text.
    source: str = ""
    #: Its file name, relative: the name the handler's module is loaded under.
    filename: str = ""
    #: An image build's recipe, recorded with the function (``with_requirements``,
    #: ``build_function``): runs here need no image; a cluster's image must have them.
    base_image: str = ""
    requirements: list[str] = pydantic.Field(default_factory=list)
    commands: list[str] = pydantic.Field(default_factory=list)
    #: An archive or repository of the code (``with_source_archive``), recorded.
    source_archive: str = ""

    @pydantic.field_validator("requirements", "commands", mode="before")
    @classmethod
    def _lines(cls, value: Any, info: pydantic.ValidationInfo) -> Any:
        field = f"spec.build.{info.field_name}"
        if not isinstance(value, list):
            raise InvalidValueError(field, value, "a list of strings", "['pandas==2.2']")
        check_count(field, value)
        for index, line in enumerate(value):
            check_text(f"{field}[{index}]", line, MAX_TEXT_BYTES, "'pandas==2.2'")
        return value

    @pydantic.field_validator("source", mode="before")
    @classmethod
    def _source(cls, value: Any) -> Any:
        if value == "":
            return value
        example = "code_to_function(..., filename='train.py') embeds it"
        if not isinstance(value, str) or len(value) > 2 * MAX_SOURCE_BYTES:
            raise InvalidValueError(
                "spec.build.source", value, "base64 of the code's UTF-8 text", example
            )
        try:
            code = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise InvalidValueError(
                "spec.build.source", value, "base64 of the code's UTF-8 text", example
            ) from None
        check_text("spec.build.source (decoded)", code, MAX_SOURCE_BYTES, example)
        return value

    @pydantic.field_validator("filename", mode="before")
    @classmethod
    def _filename(cls, value: Any) -> Any:
        if value == "":
            return value
        check_relative_path("spec.build.filename", value, "'train.py'")
        return value


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

    @pydantic.field_validator("image_pull_secret", mode="before")
    @classmethod
    def _pull_secret(cls, value: Any) -> Any:
        return None if value is None else check_dns_label("spec.image_pull_secret", value)

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

    @pydantic.field_validator("description", "image", "command", "handler", mode="before")
    @classmethod
    def _texts(cls, value: Any, info: pydantic.ValidationInfo) -> Any:
        return check_text(f"spec.{info.field_name}", value, MAX_TEXT_BYTES, "'train'")

    @pydantic.field_validator("args", mode="before")
    @classmethod
    def _args(cls, value: Any) -> Any:
        if not isinstance(value, list):
            raise InvalidValueError("spec.args", value, "a list of strings", "['--epochs', '3']")
        check_count("spec.args", value)
        for index, arg in enumerate(value):
            check_text(f"spec.args[{index}]", arg, MAX_TEXT_BYTES, "'--epochs'")
        return value

    @pydantic.field_validator("volumes", mode="before")
    @classmethod
    def _volumes(cls, value: Any) -> Any:
        return check_volumes("spec.volumes", value)

    @pydantic.field_validator("volume_mounts", mode="before")
    @classmethod
    def _volume_mounts(cls, value: Any) -> Any:
        return check_volume_mounts("spec.volume_mounts", value)

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

    @pydantic.field_validator("node_name", mode="before")
    @classmethod
    def _node_name(cls, value: Any) -> Any:
        return None if value is None else check_dns_label("spec.node_name", value, "'node-1'")

    @pydantic.field_validator("node_selector", mode="before")
    @classmethod
    def _node_selector(cls, value: Any) -> Any:
        return check_node_selector("spec.node_selector", value or {})

    @pydantic.field_validator("affinity", mode="before")
    @classmethod
    def _affinity(cls, value: Any) -> Any:
        return check_affinity("spec.affinity", value)

    @pydantic.field_validator("tolerations", mode="before")
    @classmethod
    def _tolerations(cls, value: Any) -> Any:
        return check_tolerations("spec.tolerations", value)

    @pydantic.field_validator("preemption_mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        return None if value is None else check_preemption_mode("spec.preemption_mode", value)

    @pydantic.field_validator("priority_class_name", mode="before")
    @classmethod
    def _priority(cls, value: Any) -> Any:
        return (
            None if value is None else check_priority_class_name("spec.priority_class_name", value)
        )

    @pydantic.field_validator("env", mode="before")
    @classmethod
    def _env(cls, value: Any) -> Any:
        return environment.check_env_list("spec.env", value)

    @pydantic.field_validator("state_thresholds", mode="before")
    @classmethod
    def _thresholds(cls, value: Any) -> Any:
        return check_thresholds("spec.state_thresholds", value)

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


def check_servable(fn: Function) -> None:
    """A serving function's replicas call its handler from its embedded code: without either,
    every replica would fail as it starts, so the deploy is refused before any starts."""
    if not fn.spec.build.source or not fn.spec.handler:
        raise InvalidValueError(
            "spec.handler" if fn.spec.build.source else "spec.build.source",
            fn.spec.handler if fn.spec.build.source else "",
            "a serving function needs its code embedded and the handler to call",
            "code_to_function('serve', filename='serve.py', kind='serving', handler='handler')",
        )


def check_kind_rules(kind: FunctionKind, spec: FunctionSpec) -> None:
    """Settings that only make sense for some kinds of function."""
    if kind in (FunctionKind.SERVING, FunctionKind.DASK) and spec.state_thresholds:
        watched = "their own health checks" if kind is FunctionKind.SERVING else "their client"
        raise ConflictError(
            "spec.state_thresholds",
            f"state thresholds do not apply to {kind.value} functions, which are watched by "
            f"{watched}; remove them or use kind='job'",
        )
    if kind is not FunctionKind.SERVING and spec.http is not None:
        raise ConflictError(
            "spec.http", f"with_http applies to serving functions, not kind={kind.value!r}"
        )
    if kind is not FunctionKind.DASK and spec.nthreads is not None:
        raise ConflictError(
            "spec.nthreads", f"nthreads applies to dask functions, not kind={kind.value!r}"
        )
    check_roles(kind.value, spec)


class Function(SpecModel, RoleResources):
    """A Python function with everything it needs to run: code, resources, placement, env."""

    kind: FunctionKind = FunctionKind.JOB
    metadata: Metadata
    spec: FunctionSpec = pydantic.Field(default_factory=FunctionSpec)

    # Secret values given inline (e.g. a V3IO access key): held by this object only, rendered
    # as a Secret, never dumped with the spec.
    _held_secrets: dict[str, dict[str, str]] = pydantic.PrivateAttr(default_factory=dict)

    @pydantic.field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, value: Any) -> Any:
        return check_kind(value)

    @pydantic.model_validator(mode="after")
    def _kind_rules(self) -> Function:
        check_kind_rules(self.kind, self.spec)
        return self

    # -- serialisation ------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The function as plain data; defaults are left out so exports stay readable."""
        return self.model_dump(mode="json", exclude_defaults=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Function:
        try:
            return cls.model_validate(data)
        except pydantic.ValidationError as error:
            raise translate(error) from None

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def export(self, target: str | Path = "function.yaml") -> Function:
        """Write the function as YAML (``function.yaml`` by default), as the documents show."""
        Path(target).write_text(self.to_yaml(), encoding="utf-8")
        return self

    @property
    def held_secrets(self) -> Mapping[str, Mapping[str, str]]:
        return self._held_secrets

    def hold_secret(self, name: str, values: Mapping[str, str]) -> None:
        self._held_secrets[name] = dict(values)

    def _replace(self, part: str, **changes: Any) -> Function:
        """Assign several spec fields at once, validated together, all or nothing."""
        target = self.spec if part == "spec" else getattr(self.spec, part)
        data = {**target.model_dump(), **changes}
        try:
            updated = type(target).model_validate(data)
        except pydantic.ValidationError as error:
            raise translate(error, prefix=target.field_path) from None
        if part == "spec":
            check_kind_rules(self.kind, updated)
            self.spec = updated
        else:
            setattr(self.spec, part, updated)
        return self

    # -- resources ----------------------------------------------------------------------------

    def with_requests(self, mem: Any = None, cpu: Any = None, patch: bool = False) -> Function:
        """Set what the function needs to start (the scheduler reserves it).

        Without ``patch`` the requests are replaced by exactly the keys given.
        """
        given = compute_quantities(mem=mem, cpu=cpu, call="with_requests")
        requests = {**self.spec.resources.requests, **given} if patch else given
        return self._replace("resources", requests=requests)  # Resources checks request <= limit

    def with_limits(
        self,
        mem: Any = None,
        cpu: Any = None,
        gpus: Any = None,
        gpu_type: str = names.GPU,
        patch: bool = False,
    ) -> Function:
        """Set the most the function may use; GPUs are requested equal to their limit."""
        given: dict[str, Any] = compute_quantities(mem=mem, cpu=cpu, call="with_limits")
        if gpus is not None:
            given[check_gpu_type("with_limits(gpu_type=...)", gpu_type)] = check_gpu_count(
                "with_limits(gpus=...)", gpus
            )
        limits = {**self.spec.resources.limits, **given} if patch else given
        if gpus is not None:
            limits = {k: v for k, v in limits.items() if k in COMPUTE or k == gpu_type}
        return self._replace("resources", limits=limits)

    def gpus(self, gpus: int, gpu_type: str = names.GPU) -> Function:
        """Set the GPU count, keeping CPU and memory limits."""
        return self.with_limits(gpus=gpus, gpu_type=gpu_type, patch=True)

    @property
    def gpu_count(self) -> int:
        return sum(gpu_entries(self.spec.resources.limits).values())

    # -- placement ----------------------------------------------------------------------------

    def with_node_selection(
        self,
        node_name: str | None = None,
        node_selector: Mapping[str, str] | None = None,
        affinity: Any = None,
        tolerations: Any = None,
    ) -> Function:
        """Constrain the nodes the function may run on; each argument given replaces its part.

        Several selector labels are ANDed. ``node_selector={}`` clears the function's own
        selector (service defaults still apply at render time).
        """
        changes: dict[str, Any] = {}
        if node_name is not None:
            changes["node_name"] = node_name
        if node_selector is not None:
            changes["node_selector"] = node_selector
        if affinity is not None:
            changes["affinity"] = affinity
        if tolerations is not None:
            changes["tolerations"] = tolerations
        return self._replace("spec", **changes)

    def with_preemption_mode(self, mode: str) -> Function:
        """Choose how the function relates to spot nodes: none, prevent, constrain or allow."""
        return self._replace("spec", preemption_mode=check_preemption_mode("mode", mode))

    def with_retries(
        self,
        max_attempts: int | None = None,
        on: Sequence[str] | str | None = None,
        backoff: str | float | None = None,
        *,
        max_backoff: str | float | None = None,
        backoff_factor: float | None = None,
        budgets: Mapping[str, int] | None = None,
        deadline: str | int | None = None,
        memory_factor: float | None = None,
    ) -> Function:
        """Try failed runs again: ``max_attempts`` in all, after failures of the classes ``on``
        (``preempted``, ``node_lost``, ``oom``, ``image_pull``, ``unschedulable``,
        ``deadline``, ``error``; never ``aborted``), waiting ``backoff`` (doubling, at most
        ``max_backoff``); ``budgets`` caps retries per class, ``deadline`` the time after
        submission when no attempt starts any more, ``memory_factor`` the memory an attempt
        after an OOM kill gets. Only the arguments given change; the rest keep their values
        or the service's defaults (see docs/resilience.md).
        """
        policy = patched(
            self.spec.retry,
            max_attempts=max_attempts,
            on=on,
            backoff=backoff,
            max_backoff=max_backoff,
            backoff_factor=backoff_factor,
            budgets=dict(budgets) if budgets is not None else None,
            deadline=deadline,
            memory_factor=memory_factor,
        )
        return self._replace("spec", retry=policy)

    def with_spot_fallback(
        self, after_preemptions: int | None = None, pending: str | int | None = None
    ) -> Function:
        """Move a run that may use spot nodes to on-demand nodes for its next attempt after
        ``after_preemptions`` preemptions on spot (0 never), or when an attempt that may run
        only on spot waits longer than ``pending`` for a node (-1 never). A fallback is a
        retry: the run needs attempts left (``with_retries``)."""
        fallback = {"after_preemptions": after_preemptions, "pending": pending}
        given = {key: value for key, value in fallback.items() if value is not None}
        return self._replace("spec", retry=patched(self.spec.retry, spot_fallback=given))

    def with_checkpoints(
        self, path: str | None = None, grace_period_seconds: int | None = None
    ) -> Function:
        """Keep checkpoints at ``path`` (on a mounted volume; ``{{run.uid}}`` is replaced), found
        by the next attempt as ``context.last_checkpoint``, and give a stopped pod
        ``grace_period_seconds`` between SIGTERM (``context.on_preemption``) and SIGKILL."""
        changes: dict[str, Any] = {}
        if path is not None:
            changes["checkpoint_path"] = path
        if grace_period_seconds is not None:
            changes["termination_grace_period_seconds"] = grace_period_seconds
        return self._replace("spec", **changes)

    def with_priority_class(self, name: str | None = None) -> Function:
        """Order the function in the scheduling queue; ``None`` returns to the service default.

        Which names exist is the service's configuration, checked when the function renders.
        """
        if name is not None:
            check_priority_class_name("with_priority_class(name=...)", name)
        return self._replace("spec", priority_class_name=name)

    # -- environment ----------------------------------------------------------------------------

    def set_env(self, name: str, value: Any = None, value_from: Any = None) -> Function:
        """Set one variable, replacing a variable of the same name.

        ``value_from`` references a Secret key, ConfigMap key or pod field instead of a value
        (a ``valueFrom`` dict or the Kubernetes client's ``V1EnvVarSource``).
        """
        if value_from is not None:
            if value is not None:
                raise InvalidValueError(
                    "set_env",
                    {"value": value, "value_from": value_from},
                    "give either value or value_from",
                    "set_env('A', value='1')",
                )
            variable = environment.value_from_var(name, value_from)
        else:
            variable = environment.value_var(name, value)
        return self._replace("spec", env=environment.upsert(self.spec.env, variable))

    def set_envs(
        self, env_vars: Mapping[str, Any] | None = None, file_path: str | Path | None = None
    ) -> Function:
        """Set several variables, from a mapping or from a dotenv file (exactly one of them)."""
        if (env_vars is None) == (file_path is None):
            raise InvalidValueError(
                "set_envs",
                {"env_vars": env_vars, "file_path": file_path},
                "give exactly one of env_vars and file_path",
                "set_envs(env_vars={'MY_ENV': 'MY_VAL'}) or set_envs(file_path='env.txt')",
            )
        if file_path is not None:
            values: Mapping[str, Any] = environment.read_env_file(file_path)
        elif isinstance(env_vars, Mapping):
            values = env_vars
        else:
            raise InvalidValueError(
                "set_envs(env_vars=...)",
                env_vars,
                "env_vars is a mapping of names to values",
                "{'MY_ENV': 'MY_VAL'}",
            )
        env = self.spec.env
        for name, value in values.items():
            env = environment.upsert(env, environment.value_var(name, value))
        return self._replace("spec", env=env)

    def set_env_from_secret(
        self, name: str, secret: str | None = None, secret_key: str | None = None
    ) -> Function:
        """Set a variable from a Kubernetes Secret by reference; the value is never copied."""
        variable = environment.secret_var(name, secret, secret_key or name)
        return self._replace("spec", env=environment.upsert(self.spec.env, variable))

    # -- volumes --------------------------------------------------------------------------------

    def apply(self, modifier: Callable[[Function], Any]) -> Function:
        """Apply a modifier such as ``mount_pvc(...)`` to this function."""
        if not callable(modifier):
            raise InvalidValueError(
                "apply",
                modifier,
                "apply takes a modifier such as mount_pvc(...)",
                "fn.apply(runplane.mount_pvc('data-claim', 'data', '/data'))",
            )
        modifier(self)
        return self

    def add_volume(self, volume: Volume, mounts: Sequence[Mount]) -> Function:
        volumes, volume_mounts = add_volume(
            self.spec.volumes, self.spec.volume_mounts, volume, mounts
        )
        return self._replace("spec", volumes=volumes, volume_mounts=volume_mounts)

    # -- running ------------------------------------------------------------------------------

    def run(
        self,
        runspec: Any = None,
        handler: Any = None,
        name: str = "",
        project: str = "",
        params: Mapping[str, Any] | None = None,
        inputs: Mapping[str, Any] | None = None,
        out_path: str = "",
        workdir: str = "",
        artifact_path: str | None = None,
        watch: bool = True,
        schedule: str | None = None,
        hyperparams: Mapping[str, Any] | None = None,
        hyper_param_options: Any = None,
        verbose: bool | None = None,
        scrape_metrics: bool | None = None,
        local: bool | None = None,
        local_code_path: str | None = None,
        auto_build: bool | None = None,
        param_file_secrets: Mapping[str, str] | None = None,
        notifications: Any = None,
        returns: Sequence[str] | None = None,
        state_thresholds: Mapping[str, Any] | None = None,
        reset_on_run: bool | None = None,
        labels: Mapping[str, str] | None = None,
        selector: str | None = None,
        retry: Any = None,
    ) -> Any:
        """Run the function and return a handle to the run ("Run now").

        Runs go to the service named by ``RUNPLANE_API``, else they run here (the embedded
        default); ``local=True`` runs here either way. ``params`` are converted to the
        handler's annotated types; ``inputs`` are paths passed to the handler by name;
        ``state_thresholds`` override the function's for this run. With ``watch`` the call
        waits, printing the run's output. With ``schedule`` (a cron expression, "Schedule for
        later") the service stores a schedule instead and its record is returned.

        The rest is MLRun's ``run``: ``runspec`` a task (``new_task``) or, as runplane has it,
        the params; ``handler`` a name in the code or a Python function (its module's code is
        sent); ``name`` and ``project`` the run's; ``hyperparams`` with
        ``hyper_param_options`` or ``selector`` one child run per parameter set and a parent
        run with the best; ``returns`` how to log returned values (``["accuracy",
        "data:dataset"]``); ``retry`` MLRun's retries (``3``, or ``{"count": 3, "backoff":
        {"base_delay": "30s"}}``), as this run's retry policy. ``verbose``,
        ``scrape_metrics``, ``auto_build``, ``notifications``, ``reset_on_run`` and
        ``local_code_path`` change nothing here.
        """
        if isinstance(handler, Mapping) and inputs is None:  # runplane's run(params, inputs)
            handler, inputs = None, handler
        options = {
            "runspec": runspec,
            "handler": handler,
            "name": name,
            "project": project,
            "params": params,
            "inputs": inputs,
            "artifact_path": artifact_path or out_path or None,
            "workdir": workdir,
            "watch": watch,
            "schedule": schedule,
            "hyperparams": hyperparams,
            "hyper_param_options": hyper_param_options,
            "local": local,
            "returns": returns,
            "state_thresholds": state_thresholds,
            "labels": labels,
            "selector": selector,
            "param_file_secrets": param_file_secrets,
            "retry": retry,
        }
        given = {k: v for k, v in options.items() if v is not None}
        return hooks.client().run(self, RunArguments(**given))

    def deploy(self) -> Any:
        """Deploy a serving function: replicas on this machine, or a Deployment, Service and
        autoscaler through the service when ``RUNPLANE_API`` is set; a job is ready as it is
        (``True``): runplane builds no images."""
        return hooks.client().deploy(self)

    def invoke(
        self,
        path: str = "",
        body: Any = None,
        method: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 60.0,
    ) -> Any:
        """Call the deployed function at ``path``: a dict or list ``body`` is sent as JSON (POST
        unless ``method`` says otherwise; GET without a body). Returns the answer parsed from
        JSON when it is JSON, else its bytes; an error status raises."""
        return hooks.client().invoke(
            self, path=path, body=body, method=method, headers=headers, timeout=timeout
        )

    @property
    def client(self) -> Any:
        """A dask function's ``distributed.Client``; its cluster starts on first use (a
        ``LocalCluster`` here, see docs/runtimes.md)."""
        return hooks.client().dask_client(self)

    def close(self) -> None:
        """Stop a dask function's cluster."""
        hooks.client().close(self)

    # -- thresholds and serving -------------------------------------------------------------------

    def set_state_thresholds(
        self, state_thresholds: Mapping[str, Any], patch: bool = True
    ) -> Function:
        """Abort runs that stay too long in a state; with ``patch`` only the given states change."""
        given = check_thresholds("set_state_thresholds", state_thresholds)
        thresholds = {**self.spec.state_thresholds, **given} if patch else given
        return self._replace("spec", state_thresholds=thresholds)

    def set_image_pull_configuration(
        self, image_pull_policy: str | None = None, image_pull_secret_name: str | None = None
    ) -> Function:
        """Choose when nodes pull the image (``Always``, ``IfNotPresent``, ``Never``) and the
        Secret they pull it with (a ``kubernetes.io/dockerconfigjson`` Secret's name)."""
        changes: dict[str, Any] = {}
        if image_pull_policy is not None:
            changes["image_pull_policy"] = image_pull_policy
        if image_pull_secret_name is not None:
            changes["image_pull_secret"] = image_pull_secret_name
        return self._replace("spec", **changes)

    # -- build and source -----------------------------------------------------------------------

    def with_requirements(
        self,
        requirements: str | Sequence[str] | None = None,
        requirements_file: str = "",
        overwrite: bool = False,
        prepare_image_for_deploy: bool = True,
    ) -> Function:
        """Record the Python packages the function needs (a list, or a requirements file).

        A run here uses this machine's environment; on a cluster the function's image must
        have them (``runplane`` builds no images)."""
        wanted = environment.read_requirements(requirements, requirements_file)
        current = [] if overwrite else list(self.spec.build.requirements)
        return self._replace(
            "build", requirements=current + [r for r in wanted if r not in current]
        )

    def with_commands(self, commands: Sequence[str], overwrite: bool = False) -> Function:
        """Record the shell commands an image build of the function runs."""
        current = [] if overwrite else list(self.spec.build.commands)
        return self._replace("build", commands=current + [c for c in commands if c not in current])

    def with_source_archive(
        self,
        source: str,
        workdir: str | None = None,
        handler: str | None = None,
        pull_at_runtime: bool = True,
        target_dir: str | None = None,
    ) -> Function:
        """Record where the function's code comes from (an archive, a git repository or a local
        directory). A run executes embedded code: with a local directory, ``handler`` may be
        ``module.function`` and that module's file is embedded when the run is submitted."""
        self._replace("build", source_archive=source)
        if handler:
            self._replace("spec", handler=handler)
        return self

    def set_config(self, key: str, value: Any) -> Function:
        """Record a server setting by its dotted path (MLRun's Nuclio settings, say
        ``spec.scaleToZero.scaleResources``); kept with the function, not rendered."""
        check_text("set_config(key=...)", key, MAX_TEXT_BYTES, "'spec.readinessTimeoutSeconds'")
        return self._replace("spec", config={**self.spec.config, key: value})

    def set_label(self, key: str, value: str) -> Function:
        """Label the function (and its runs' pods)."""
        return self._replace_metadata(labels={**self.metadata.labels, key: str(value)})

    def set_labels(self, labels: Mapping[str, str]) -> Function:
        return self._replace_metadata(labels={**self.metadata.labels, **dict(labels)})

    def with_annotations(self, annotations: Mapping[str, str]) -> Function:
        return self._replace("spec", annotations={**self.spec.annotations, **dict(annotations)})

    def _replace_metadata(self, **changes: Any) -> Function:
        data = {**self.metadata.model_dump(), **changes}
        try:
            self.metadata = Metadata.model_validate(data)
        except pydantic.ValidationError as error:
            raise translate(error, prefix="metadata") from None
        return self

    def with_code(self, from_file: str = "", body: str | None = None) -> Function:
        """Embed code: the text ``body``, or the file ``from_file``."""
        if (body is None) == (not from_file):
            raise InvalidValueError(
                "with_code",
                {"from_file": from_file, "body": body},
                "give exactly one of from_file and body",
                "fn.with_code(from_file='train.py')",
            )
        if body is None:
            body = Path(from_file).read_text(encoding="utf-8")
            filename = Path(from_file).name
        else:
            filename = self.spec.build.filename or f"{self.metadata.name or 'handler'}.py"
        encoded = base64.b64encode(body.encode()).decode()
        return self._replace("build", source=encoded, filename=filename)

    # -- storing --------------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        """``project/name:tag``, as stored."""
        return f"{self.metadata.project}/{self.metadata.name}:{self.metadata.tag or 'latest'}"

    def save(self, tag: str = "", versioned: bool = False, refresh: bool = False) -> str:
        """Store the function where runs go (the runplane service, or this machine's
        catalog); returns its URI, for ``import_function('db://...')``."""
        if tag:
            self._replace_metadata(tag=tag)
        return str(hooks.client().save(self))

    def to_json(self) -> str:
        import json

        return json.dumps(self.to_dict())

    def with_http(self, workers: int | None = None, worker_timeout: int | None = None) -> Function:
        """Set the serving HTTP server's worker processes and their timeout in seconds."""
        http = self.spec.http.model_dump() if self.spec.http else {}
        if workers is not None:
            http["workers"] = workers
        if worker_timeout is not None:
            http["worker_timeout"] = worker_timeout
        return self._replace("spec", http=http)
