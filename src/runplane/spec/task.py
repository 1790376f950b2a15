"""A task: what one run of a function is asked to do (handler, parameters, inputs), and how a
hyperparameter search spreads it over child runs.

MLRun users build these with ``new_task(...)`` and pass them to ``fn.run(task)``; runplane's own
``fn.run(params=...)`` needs none. Pure data, checked at the call that sets it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runplane.errors import InvalidValueError

STRATEGIES: tuple[str, ...] = ("grid", "list", "random", "custom")


@dataclass
class HyperParamOptions:
    """How a hyperparameter search runs: the ``strategy`` that makes parameter sets (``grid``:
    every combination, ``list``: the n-th value of every list, ``random``: ``max_iterations``
    samples), the ``selector`` that picks the best child (``max.accuracy``, ``min.loss``; a
    bare name means max), an optional ``stop_condition`` (``"accuracy >= 0.9"``), how many
    children run at once (``parallel_runs``) and how many may fail (``max_errors``)."""

    param_file: str | None = None
    strategy: str | None = None
    selector: str | None = None
    stop_condition: str | None = None
    parallel_runs: int | None = None
    dask_cluster_uri: str | None = None
    max_iterations: int | None = None
    max_errors: int | None = None
    teardown_dask: bool | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.strategy is not None and self.strategy not in STRATEGIES:
            raise InvalidValueError(
                "hyper_param_options.strategy",
                self.strategy,
                "strategies are " + ", ".join(STRATEGIES),
                "strategy='grid'",
            )
        if self.max_iterations is not None and self.strategy != "random":
            raise InvalidValueError(
                "hyper_param_options.max_iterations",
                self.max_iterations,
                "max_iterations applies to strategy='random'",
                "with_hyper_params({...}, strategy='random', max_iterations=4)",
            )
        for name in ("parallel_runs", "max_iterations", "max_errors"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise InvalidValueError(
                    f"hyper_param_options.{name}", value, "a whole number", f"{name}=4"
                )
            if name != "max_errors" and value is not None and value < 1:
                raise InvalidValueError(
                    f"hyper_param_options.{name}", value, "at least 1", f"{name}=4"
                )
        if self.dask_cluster_uri:
            raise InvalidValueError(
                "hyper_param_options.dask_cluster_uri",
                self.dask_cluster_uri,
                "runplane runs each child as its own run, with the function's resources; "
                "limit how many run at once with parallel_runs",
                "parallel_runs=4",
            )

    def to_dict(self) -> dict[str, Any]:
        return {key: value for key, value in vars(self).items() if value is not None}


@dataclass
class TaskMetadata:
    name: str = ""
    project: str = ""
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class TaskSpec:
    parameters: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    handler: Any = None
    hyperparams: dict[str, list[Any]] = field(default_factory=dict)
    hyper_param_options: HyperParamOptions = field(default_factory=HyperParamOptions)
    returns: list[str] = field(default_factory=list)
    artifact_path: str | None = None
    outputs: list[str] = field(default_factory=list)


class RunTemplate:
    """A task for ``fn.run(task)``: name, handler, parameters, inputs and hyperparameters.
    Its ``with_*`` methods return the task, so they chain."""

    def __init__(self, metadata: TaskMetadata | None = None, spec: TaskSpec | None = None) -> None:
        self.metadata = metadata or TaskMetadata()
        self.spec = spec or TaskSpec()

    def __repr__(self) -> str:
        return f"<RunTemplate {self.metadata.name or '(unnamed)'}>"

    def with_params(self, **params: Any) -> RunTemplate:
        self.spec.parameters.update(params)
        return self

    def with_input(self, key: str, path: str) -> RunTemplate:
        self.spec.inputs[key] = path
        return self

    def with_hyper_params(
        self,
        hyperparams: Mapping[str, Sequence[Any]],
        selector: str | None = None,
        strategy: str | None = None,
        **options: Any,
    ) -> RunTemplate:
        """Run one child per parameter set and keep the best (see :class:`HyperParamOptions`
        for ``options``)."""
        self.spec.hyperparams = check_hyperparams(hyperparams)
        self.spec.hyper_param_options = _options(self, selector, strategy, options)
        return self

    def with_param_file(
        self,
        param_file: str,
        selector: str | None = None,
        strategy: str | None = None,
        **options: Any,
    ) -> RunTemplate:
        """Like ``with_hyper_params``, the parameter sets read from a CSV file (a header, then
        one set per row) or a JSON file (``{"p1": [1, 2]}``, or a list of sets)."""
        if not isinstance(param_file, str) or not param_file:
            raise InvalidValueError(
                "param_file", param_file, "a path to a CSV or JSON file", "'params.csv'"
            )
        chosen = _options(self, selector, strategy or "list", options)
        chosen.param_file = param_file
        self.spec.hyper_param_options = chosen
        return self

    def with_secrets(self, kind: str, source: Any) -> RunTemplate:
        raise InvalidValueError(
            "with_secrets",
            kind,
            "runplane passes secrets by reference: set them on the project "
            "(project.set_secrets) or the function (fn.set_env_from_secret)",
            "fn.set_env_from_secret('API_KEY', secret='my-secret')",
        )

    def set_label(self, key: str, value: Any) -> RunTemplate:
        self.metadata.labels[key] = str(value)
        return self

    def copy(self) -> RunTemplate:
        return copy.deepcopy(self)

    def to_dict(self) -> dict[str, Any]:
        spec = {
            "parameters": dict(self.spec.parameters),
            "inputs": dict(self.spec.inputs),
            "hyperparams": dict(self.spec.hyperparams),
            "hyper_param_options": self.spec.hyper_param_options.to_dict(),
            "returns": list(self.spec.returns),
        }
        if isinstance(self.spec.handler, str):
            spec["handler"] = self.spec.handler
        return {"metadata": vars(self.metadata).copy(), "spec": spec}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunTemplate:
        """A task from its dict form (``{"metadata": {...}, "spec": {"parameters": ...}}``)."""
        metadata = dict(data.get("metadata") or {})
        spec = dict(data.get("spec") or {})
        options = spec.get("hyper_param_options") or {}
        return cls(
            TaskMetadata(
                name=str(metadata.get("name", "")),
                project=str(metadata.get("project", "")),
                labels=dict(metadata.get("labels") or {}),
            ),
            TaskSpec(
                parameters=dict(spec.get("parameters") or {}),
                inputs=dict(spec.get("inputs") or {}),
                handler=spec.get("handler"),
                hyperparams=check_hyperparams(spec.get("hyperparams") or {}),
                hyper_param_options=HyperParamOptions(**options),
                returns=list(spec.get("returns") or []),
            ),
        )


def _options(
    task: RunTemplate, selector: str | None, strategy: str | None, options: Mapping[str, Any]
) -> HyperParamOptions:
    known = set(HyperParamOptions.__dataclass_fields__) - {"selector", "strategy"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise InvalidValueError(
            "hyper_param_options", unknown[0], "options are " + ", ".join(sorted(known))
        )
    current = task.spec.hyper_param_options.to_dict()
    current.update(options)
    if selector is not None:
        current["selector"] = selector
    if strategy is not None:
        current["strategy"] = strategy
    return HyperParamOptions(**current)


def check_hyperparams(hyperparams: object) -> dict[str, list[Any]]:
    if not isinstance(hyperparams, Mapping) or not all(
        isinstance(values, list | tuple) and values for values in hyperparams.values()
    ):
        raise InvalidValueError(
            "hyperparams",
            hyperparams,
            "a mapping of parameter names to non-empty lists of values",
            "{'p1': [1, 2], 'p2': [10, 20]}",
        )
    return {str(key): list(values) for key, values in hyperparams.items()}


def new_task(
    name: str = "",
    project: str = "",
    handler: Any = None,
    params: Mapping[str, Any] | None = None,
    hyper_params: Mapping[str, Sequence[Any]] | None = None,
    param_file: str | None = None,
    selector: str | None = None,
    hyper_param_options: HyperParamOptions | None = None,
    inputs: Mapping[str, Any] | None = None,
    outputs: Sequence[str] | None = None,
    in_path: str | None = None,
    out_path: str | None = None,
    artifact_path: str | None = None,
    secrets: Any = None,
    base: RunTemplate | None = None,
    returns: Sequence[str] | None = None,
) -> RunTemplate:
    """A task for ``fn.run(task)``: its name (the run's), handler, parameters and inputs."""
    if secrets:
        RunTemplate().with_secrets("inline", secrets)
    task = base.copy() if base is not None else RunTemplate()
    if name:
        task.metadata.name = name
    if project:
        task.metadata.project = project
    if handler is not None:
        task.spec.handler = handler
    task.spec.parameters.update(dict(params or {}))
    task.spec.inputs.update(dict(inputs or {}))
    task.spec.outputs = list(outputs or task.spec.outputs)
    task.spec.returns = list(returns or task.spec.returns)
    task.spec.artifact_path = artifact_path or out_path or task.spec.artifact_path
    if hyper_param_options is not None:
        if not isinstance(hyper_param_options, HyperParamOptions):
            raise InvalidValueError(
                "hyper_param_options",
                hyper_param_options,
                "a HyperParamOptions",
                "HyperParamOptions(selector='max.accuracy')",
            )
        task.spec.hyper_param_options = copy.copy(hyper_param_options)
    if hyper_params:
        task.with_hyper_params(hyper_params, selector=selector)
    elif param_file:
        task.with_param_file(param_file, selector=selector)
    elif selector:
        task.spec.hyper_param_options.selector = selector
    return task
