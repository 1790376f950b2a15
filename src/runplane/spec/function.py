"""The Function: a user's whole intent for a job or service, and the calls that shape it.

Every modifier validates its arguments, computes the new value, and only then assigns it, so a
refused call leaves the function exactly as it was. Modifiers return the function so calls
chain. Service defaults, preemption mode and auto-mount are *not* applied here: they are
applied at render time and never written back, which is what keeps modes from being sticky.

The function's parts live in their own modules (kinds, metadata, build, function_spec); their
names are importable from here too, where most of runplane reaches for them.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pydantic

from runplane import hooks, names
from runplane.errors import InvalidValueError, MissingValueError
from runplane.spec import env as environment
from runplane.spec import mlrun_layout
from runplane.spec.base import SpecModel, set_fields, translate
from runplane.spec.bounds import MAX_TEXT_BYTES, check_text
from runplane.spec.build import BuildSpec
from runplane.spec.function_spec import FunctionSpec
from runplane.spec.kinds import (
    FunctionKind,
    check_kind,
    check_kind_rules,
    check_servable,
    require_kind,
)
from runplane.spec.metadata import Metadata
from runplane.spec.resources import gpu_entries
from runplane.spec.retries import patched
from runplane.spec.roles import ResourceCalls
from runplane.spec.run_options import RunArguments
from runplane.spec.scheduling import check_preemption_mode, check_priority_class_name
from runplane.spec.thresholds import check_thresholds
from runplane.spec.volumes import Mount, Volume, add_volume

__all__ = [
    "BuildSpec",
    "Function",
    "FunctionKind",
    "FunctionSpec",
    "Metadata",
    "check_kind",
    "check_servable",
    "require_kind",
]


def given(**values: Any) -> dict[str, Any]:
    """The arguments a modifier was given: ``None`` means "leave this part as it is"."""
    return {key: value for key, value in values.items() if value is not None}


class Function(SpecModel, ResourceCalls):
    """A Python function with everything it needs to run: code, resources, placement, env."""

    kind: FunctionKind = FunctionKind.JOB
    metadata: Metadata
    spec: FunctionSpec = pydantic.Field(default_factory=FunctionSpec)

    # Secret values given inline (e.g. a V3IO access key): held by this object only, rendered
    # as a Secret, never dumped with the spec.
    _held_secrets: dict[str, dict[str, str]] = pydantic.PrivateAttr(default_factory=dict)
    # The layout of the MLRun dict this function was read from (new_function(runtime=dict)):
    # to_dict() writes it back in that shape (runplane.spec.mlrun_layout).
    _layout: dict[str, Any] | None = pydantic.PrivateAttr(default=None)

    @pydantic.field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, value: Any) -> Any:
        return check_kind(value)

    @pydantic.model_validator(mode="after")
    def _kind_rules(self) -> Function:
        check_kind_rules(self.kind, self.spec)
        return self

    # -- serialisation ------------------------------------------------------------------------

    def to_dict(self, fields: Any = None, exclude: Sequence[str] | None = None) -> dict[str, Any]:
        """The function as plain data; defaults are left out so exports stay readable. A
        function read from MLRun's dict form comes back in that form (its empty fields and
        the keys runplane only keeps, with the preemption mode MLRun adds); ``exclude``
        leaves top-level sections out."""
        data = set_fields(self)
        if self._layout is not None:
            data = mlrun_layout.write(self._layout, self.model_dump(mode="json"), data)
            mode = self.spec.preemption_mode
            data.setdefault("spec", {})["preemption_mode"] = (
                mode.value if mode else hooks.client().mlrun_defaults()["preemption_mode"]
            )
        for key in exclude or ():
            data.pop(key, None)
        return data

    def keep_layout(self, layout: Mapping[str, Any]) -> Function:
        """Write this function back in ``layout``'s shape (MLRun's dict form it came from)."""
        self._layout = dict(layout)
        return self

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
        return self._replace(
            "spec",
            **given(
                node_name=node_name,
                node_selector=node_selector,
                affinity=affinity,
                tolerations=tolerations,
            ),
        )

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
        fallback = given(after_preemptions=after_preemptions, pending=pending)
        return self._replace("spec", retry=patched(self.spec.retry, spot_fallback=fallback))

    def with_checkpoints(
        self, path: str | None = None, grace_period_seconds: int | None = None
    ) -> Function:
        """Keep checkpoints at ``path`` (on a mounted volume; ``{{run.uid}}`` is replaced), found
        by the next attempt as ``context.last_checkpoint``, and give a stopped run (its pod, or
        its process on the embedded default) ``grace_period_seconds`` between SIGTERM
        (``context.on_preemption``) and SIGKILL; 30 s unless given, as on Kubernetes."""
        return self._replace(
            "spec",
            **given(checkpoint_path=path, termination_grace_period_seconds=grace_period_seconds),
        )

    def with_priority_class(self, name: str | None = None) -> Function:
        """Order the function in the scheduling queue; ``None`` returns to the service default.

        Which names exist is the service's configuration, checked when the function renders.
        """
        if name is not None:
            check_priority_class_name("with_priority_class(name=...)", name)
        return self._replace("spec", priority_class_name=name)

    # -- environment ----------------------------------------------------------------------------

    def list_valid_priority_class_names(self) -> list[str]:
        """The priority classes a function may name: the service's ``priority_classes.valid``
        (``mlconf.valid_function_priority_class_names`` sets them, comma-separated)."""
        return list(hooks.client().mlrun_defaults()["priority_classes"])

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

    def get_env(self, name: str, default: Any = None) -> Any:
        """A variable's value (or its ``valueFrom`` reference), ``default`` when it is unset."""
        for variable in self.spec.env:
            if variable.get("name") == name:
                return variable.get("value", variable.get("valueFrom"))
        return default

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
        return self._replace(
            "spec",
            **given(image_pull_policy=image_pull_policy, image_pull_secret=image_pull_secret_name),
        )

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

    def build_config(
        self,
        image: str = "",
        base_image: str | None = None,
        commands: Sequence[str] | None = None,
        secret: str | None = None,
        source: str | None = None,
        extra: str | None = None,
        load_source_on_run: bool | None = None,
        with_mlrun: bool | None = None,
        auto_build: bool | None = None,
        requirements: str | Sequence[str] | None = None,
        overwrite: bool = False,
        prepare_image_for_deploy: bool = True,
        requirements_file: str = "",
        builder_env: Mapping[str, str] | None = None,
        extra_args: str | None = None,
        source_code_target_dir: str | None = None,
    ) -> Function:
        """Record an image build recipe, as MLRun's ``build_config``: commands and requirements
        are added once each in the order given (``overwrite`` replaces them). runplane builds
        no images; a cluster runs the function's image, which must already hold them."""
        if commands is not None:
            self.with_commands(commands, overwrite=overwrite)
        if requirements or requirements_file:
            self.with_requirements(requirements, requirements_file, overwrite=overwrite)
        changes = given(image=image or None, base_image=base_image)
        if source:
            changes["source_archive"] = source
        return self._replace("build", **changes) if changes else self

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
        if not pull_at_runtime and "://" not in source and not Path(source).is_absolute():
            raise InvalidValueError(
                "with_source_archive(source=...)",
                source,
                f"Source '{source}' must be a valid URL or absolute path when 'pull_at_runtime' "
                "is False set 'source' to a remote URL to clone/copy the source to the base "
                "image, or set 'pull_at_runtime' to True to pull the source at runtime.",
                "fn.with_source_archive('git://github.com/org/repo.git', pull_at_runtime=False)",
            )
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
        if body is not None and from_file:
            raise InvalidValueError(
                "with_code",
                {"from_file": from_file, "body": "..."},
                "must provide either body or from_file argument. not both",
                "fn.with_code(from_file='train.py')",
            )
        if body is None and not from_file:
            raise MissingValueError(
                "with_code",
                {"from_file": from_file, "body": body},
                "please specify the code: body (text) or from_file (a file's path)",
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
        return self._replace(
            "spec", http={**http, **given(workers=workers, worker_timeout=worker_timeout)}
        )
