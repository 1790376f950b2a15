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
from runplane.spec.labels import check_dns_label, check_label_key, check_labels
from runplane.spec.quantity import parse_quantity
from runplane.spec.resources import (
    COMPUTE,
    Resources,
    check_gpu_count,
    check_gpu_type,
    gpu_entries,
)
from runplane.spec.retries import MAX_ATTEMPTS, RetryPolicy, patched
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
    """``job`` runs to completion; ``serving`` is a long-running HTTP service."""

    JOB = "job"
    SERVING = "serving"


#: Other names of a kind: ``local`` (MLRun's in-process job, and what functions exported by
#: earlier runplane versions may say) runs as a job, here or through the service.
KIND_ALIASES = {"local": FunctionKind.JOB}


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

    @pydantic.field_validator("name", "project", mode="before")
    @classmethod
    def _dns(cls, value: Any, info: pydantic.ValidationInfo) -> Any:
        return check_dns_label(f"metadata.{info.field_name}", value)

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
    min_replicas: int | None = pydantic.Field(default=None, ge=1)
    max_replicas: int | None = pydantic.Field(default=None, ge=1)
    target_cpu_percent: int | None = pydantic.Field(default=None, ge=1)
    http: HttpSpec | None = None
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


def check_kind_rules(kind: FunctionKind, spec: FunctionSpec) -> None:
    """Settings that only make sense for some kinds of function."""
    if kind is FunctionKind.SERVING and spec.state_thresholds:
        raise ConflictError(
            "spec.state_thresholds",
            "state thresholds do not apply to serving functions, which are watched by their "
            "own health checks; remove them or use kind='job'",
        )
    if kind is not FunctionKind.SERVING and spec.http is not None:
        raise ConflictError(
            "spec.http", f"with_http applies to serving functions, not kind={kind.value!r}"
        )


class Function(SpecModel):
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
        given = _compute(mem=mem, cpu=cpu, call="with_requests")
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
        given: dict[str, Any] = _compute(mem=mem, cpu=cpu, call="with_limits")
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
        params: Mapping[str, Any] | None = None,
        inputs: Mapping[str, Any] | None = None,
        state_thresholds: Mapping[str, Any] | None = None,
        watch: bool = True,
        schedule: str | None = None,
        artifact_path: str | None = None,
    ) -> Any:
        """Run the function and return a handle to the run ("Run now").

        Runs go to the service named by ``RUNPLANE_API``, else they run here (the embedded
        default). ``params`` are converted to the handler's annotated types; ``inputs`` are
        paths passed to the handler by name; ``state_thresholds`` override the function's for
        this run. With ``watch`` the call waits, printing the run's output. With ``schedule``
        (a cron expression, "Schedule for later") the service stores a schedule instead and
        its record is returned. ``artifact_path`` sets ``spec.artifact_path`` for this run.
        """
        fn = self if artifact_path is None else self._replace("spec", artifact_path=artifact_path)
        return hooks.client().run(
            fn,
            params=params,
            inputs=inputs,
            state_thresholds=state_thresholds,
            watch=watch,
            schedule=schedule,
        )

    def deploy(self) -> Any:
        """Deploy a serving function (Deployment, Service, autoscaler) through the service."""
        return hooks.client().deploy(self)

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
        """Choose when nodes pull the image (``Always``, ``IfNotPresent``, ``Never``)."""
        if image_pull_secret_name is not None:
            raise InvalidValueError(
                "image_pull_secret_name",
                image_pull_secret_name,
                "image pull secrets are the namespace's service account's business in "
                "runplane; attach the secret to it (kubectl patch serviceaccount default ...)",
            )
        return self._replace("spec", image_pull_policy=image_pull_policy)

    def with_http(self, workers: int | None = None, worker_timeout: int | None = None) -> Function:
        """Set the serving HTTP server's worker processes and their timeout in seconds."""
        http = self.spec.http.model_dump() if self.spec.http else {}
        if workers is not None:
            http["workers"] = workers
        if worker_timeout is not None:
            http["worker_timeout"] = worker_timeout
        return self._replace("spec", http=http)


def _compute(mem: Any, cpu: Any, call: str) -> dict[str, Any]:
    given: dict[str, Any] = {}
    if mem is not None:
        parse_quantity(f"{call}(mem=...)", mem, "memory")
        given["memory"] = mem
    if cpu is not None:
        parse_quantity(f"{call}(cpu=...)", cpu, "cpu")
        given["cpu"] = cpu
    return given
