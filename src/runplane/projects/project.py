"""A project: a directory (its ``context``) holding code and a ``project.yaml`` that names the
project's functions, parameters, code source and default image, and groups their runs.

Runs of a project's functions are recorded under its name, receive its parameters
(``context.get_project_param``) and secrets (``context.get_secret``), and find the project's
source directory on their import path.
"""

from __future__ import annotations

import copy
import getpass
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from runplane.bootstrap import ENV_PROJECT_PARAMS, ENV_SECRET_PREFIX
from runplane.client import functions as catalog
from runplane.errors import InvalidValueError, NotFoundError, OutOfScopeError
from runplane.spec.function import Function
from runplane.spec.labels import check_dns_label
from runplane.spec.loaders import code_to_function, new_function
from runplane.spec.scheduling import check_node_selector
from runplane.spec.volumes import check_key

PROJECT_FILE = "project.yaml"


def secret_name(project: str) -> str:
    """The Secret that holds a project's secrets (here: the local secret store's folder)."""
    return f"runplane-project-{project}"


def user_project_name(name: str) -> str:
    """``name`` made the user's own (``user_project=True``): ``name-<user>``."""
    user = getpass.getuser().split("@")[0]
    return f"{name}-{re.sub(r'[^a-z0-9-]', '-', user.lower()).strip('-')}"


@dataclass
class ProjectMetadata:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass
class ProjectSpec:
    description: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    workdir: str = ""
    default_image: str = ""
    #: Labels every function of the project runs on nodes with, unless the function's own
    #: selector says otherwise (MLRun's ``default_function_node_selector``).
    default_function_node_selector: dict[str, str] = field(default_factory=dict)
    functions: list[dict[str, Any]] = field(default_factory=list)
    secret_keys: list[str] = field(default_factory=list)
    builds: dict[str, dict[str, Any]] = field(default_factory=dict)
    load_source_on_run: bool = False
    origin_url: str = ""
    #: The service's retention policy terms this project overrides (``runs_max_age``,
    #: ``runs_max_count``, ``logs_max_age``; docs/retention.md); empty: the service's.
    retention: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: copy.deepcopy(v) for k, v in vars(self).items() if v not in ("", [], {})}


@dataclass
class BuildStatus:
    """What ``build_function`` did: ``ready``; ``outputs["image"]`` the image runs use."""

    ready: bool
    outputs: dict[str, Any]


@dataclass
class DeployStatus:
    """What ``deploy_function`` did; ``outputs["endpoint"]`` where the service answers."""

    state: str
    outputs: dict[str, Any]
    function: Function | None = None


class Project:
    """A project (MLRun's ``MlrunProject``): functions, parameters, secrets and source."""

    def __init__(self, name: str, context: str | Path = "./", description: str = "") -> None:
        self.metadata = ProjectMetadata(name=check_dns_label("project name", name, "'my-proj'"))
        self.spec = ProjectSpec(description=description or "")
        self.context = str(Path(context or "./").resolve())
        self._functions: dict[str, Function] = {}

    def __repr__(self) -> str:
        return f"<Project {self.name} at {self.context}>"

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def params(self) -> dict[str, Any]:
        return self.spec.params

    @property
    def source(self) -> str:
        return self.spec.source

    @property
    def default_image(self) -> str:
        return self.spec.default_image

    @property
    def default_function_node_selector(self) -> dict[str, str]:
        return self.spec.default_function_node_selector

    @default_function_node_selector.setter
    def default_function_node_selector(self, selector: Mapping[str, str] | None) -> None:
        self.spec.default_function_node_selector = check_node_selector(
            "default_function_node_selector", dict(selector or {})
        )

    @property
    def artifact_path(self) -> str:
        return str(Path(self.context) / "artifacts")

    # -- functions ----------------------------------------------------------------------------

    def set_function(
        self,
        func: str | Function | None = None,
        name: str = "",
        kind: str = "job",
        image: str | None = None,
        handler: str | None = None,
        with_repo: bool | None = None,
        tag: str | None = None,
        requirements: str | list[str] | None = None,
        requirements_file: str = "",
    ) -> Function:
        """Add a function to the project, from a ``.py``/``.ipynb`` file, an exported
        ``.yaml``, a stored function (``db://``), a function object, or (with ``with_repo``
        and ``handler="module.function"``) the project's source directory."""
        entry: dict[str, Any] = {"kind": kind or "job"}
        if isinstance(func, Function):
            fn = func
            name = name or fn.metadata.name
        elif isinstance(func, str) and func.startswith(("hub://", "db://")):
            fn = catalog.import_function(func, project=self.name, new_name=name or None)
            entry["url"] = func
        elif isinstance(func, str) and func and not Path(func).suffix and not name:
            fn = new_function(func, kind=kind or "job")  # a name: a function without code yet
        elif isinstance(func, str) and func:
            path = self._path(func)
            entry["url"] = func
            if path.suffix in (".yaml", ".yml", ".json"):
                fn = catalog.import_function(str(path))
            else:
                fn = code_to_function(
                    name or "", filename=str(path), kind=kind or "job", handler=handler or ""
                )
        else:
            fn = new_function(name or _name_of(handler), kind=kind or "job")
        if name:
            fn.metadata.name = name
        fn.metadata.project = self.name
        if tag:
            fn.metadata.tag = tag
        if image:
            fn.spec.image = image
        if handler:
            fn.spec.handler = handler
        if requirements or requirements_file:
            fn.with_requirements(requirements, requirements_file)
        if with_repo:
            fn.with_source_archive(self.source_dir)
        key = fn.metadata.name
        entry.update(
            name=key,
            image=fn.spec.image or None,
            handler=fn.spec.handler or None,
            with_repo=bool(with_repo),
            tag=tag,
        )
        if "url" not in entry:
            entry["spec"] = fn.to_dict()
        self.spec.functions = [f for f in self.spec.functions if f.get("name") != key]
        self.spec.functions.append({k: v for k, v in entry.items() if v is not None})
        self._functions[key] = fn
        return fn

    def get_function(
        self,
        key: str,
        sync: bool = False,
        enrich: bool = False,
        ignore_cache: bool = False,
        copy_function: bool = True,
        tag: str = "",
    ) -> Function:
        """The project's function ``key`` (a copy unless ``copy_function=False``)."""
        key = key.replace("_", "-").lower()  # the name it was stored under
        if key not in self._functions or ignore_cache:
            entry = next((f for f in self.spec.functions if f.get("name") == key), None)
            if entry is None:
                raise NotFoundError(
                    f"function {key!r} is not in project {self.name!r}; it has "
                    + (", ".join(self.function_names) or "no functions")
                    + f" (add it with project.set_function(..., name={key!r}))"
                )
            self._functions[key] = self._load_entry(entry)
        fn = self._functions[key]
        return fn.model_copy(deep=True) if copy_function else fn

    @property
    def function_names(self) -> list[str]:
        return [str(f["name"]) for f in self.spec.functions]

    def list_functions(self, name: str | None = None, tag: str | None = None) -> list[Function]:
        return [self.get_function(n) for n in self.function_names if not name or n == name]

    def remove_function(self, name: str) -> None:
        self.spec.functions = [f for f in self.spec.functions if f.get("name") != name]
        self._functions.pop(name, None)

    def _load_entry(self, entry: Mapping[str, Any]) -> Function:
        if "spec" in entry:
            fn = Function.from_dict(entry["spec"])
        else:
            url = str(entry["url"])
            if url.startswith(("hub://", "db://")):
                fn = catalog.import_function(url, project=self.name)
            elif Path(url).suffix in (".yaml", ".yml", ".json"):
                fn = catalog.import_function(str(self._path(url)))
            else:
                fn = code_to_function(
                    str(entry["name"]),
                    filename=str(self._path(url)),
                    kind=str(entry.get("kind") or "job"),
                    handler=str(entry.get("handler") or ""),
                )
        fn.metadata.name = str(entry["name"])
        fn.metadata.project = self.name
        if entry.get("image"):
            fn.spec.image = str(entry["image"])
        if entry.get("with_repo"):
            fn.with_source_archive(self.source_dir)
        return fn

    def _function_for_run(self, function: str | Function) -> Function:
        fn = self.get_function(function) if isinstance(function, str) else function
        fn = fn.model_copy(deep=True)
        fn.metadata.project = self.name
        if not fn.spec.image and self.spec.default_image:
            fn.spec.image = self.spec.default_image
        if self.spec.default_function_node_selector:
            fn.with_node_selection(node_selector=self._node_selector_of(fn))
        if self.spec.params:
            fn.set_env(ENV_PROJECT_PARAMS, json.dumps(self.spec.params, default=str))
        for key in self.spec.secret_keys:
            fn.set_env_from_secret(ENV_SECRET_PREFIX + key, secret_name(self.name), key)
        return fn

    def _node_selector_of(self, fn: Function) -> dict[str, str]:
        """The project's default selector under the function's own: a key the function sets
        wins, and one it sets to ``""`` is left out."""
        merged = {**self.spec.default_function_node_selector, **fn.spec.node_selector}
        return {key: value for key, value in merged.items() if value != ""}

    def run_function(
        self,
        function: str | Function,
        handler: Any = None,
        name: str = "",
        params: Mapping[str, Any] | None = None,
        hyperparams: Mapping[str, Any] | None = None,
        hyper_param_options: Any = None,
        inputs: Mapping[str, Any] | None = None,
        outputs: Sequence[str] | None = None,
        workdir: str = "",
        labels: Mapping[str, str] | None = None,
        base_task: Any = None,
        watch: bool = True,
        local: bool | None = None,
        verbose: bool | None = None,
        selector: str | None = None,
        auto_build: bool | None = None,
        schedule: str | None = None,
        artifact_path: str | None = None,
        notifications: Any = None,
        returns: Sequence[str] | None = None,
        builder_env: Mapping[str, str] | None = None,
        reset_on_run: bool | None = None,
        state_thresholds: Mapping[str, Any] | None = None,
        retry: Any = None,
    ) -> Any:
        """Run one of the project's functions (by name) or a function object in the
        project: the run is the project's, with its parameters, secrets and source."""
        fn = self._function_for_run(function)
        return fn.run(
            base_task,
            handler=handler,
            name=name,
            params=params,
            inputs=inputs,
            workdir=workdir or self.source_dir,
            artifact_path=artifact_path,
            watch=watch,
            schedule=schedule,
            hyperparams=hyperparams,
            hyper_param_options=hyper_param_options,
            local=local,
            returns=returns,
            labels=labels,
            selector=selector,
            state_thresholds=state_thresholds,
            retry=retry,
        )

    def build_function(
        self,
        function: str | Function,
        with_mlrun: bool | None = None,
        skip_deployed: bool = False,
        image: str | None = None,
        base_image: str | None = None,
        commands: list[str] | None = None,
        secret_name: str | None = None,
        requirements: str | list[str] | None = None,
        mlrun_version_specifier: str | None = None,
        builder_env: Mapping[str, str] | None = None,
        overwrite_build_params: bool = False,
        requirements_file: str | None = None,
        extra_args: str | None = None,
        force_build: bool = False,
    ) -> BuildStatus:
        """Record the function's image build (base image, requirements, commands) with the
        project. runplane builds no images: runs here use this machine's Python; a cluster
        runs ``image``, which must already hold what the recipe lists."""
        fn = (
            self.get_function(function, copy_function=False)
            if isinstance(function, str)
            else (function)
        )
        if base_image:
            fn._replace("build", base_image=base_image)
        if commands:
            fn.with_commands(commands, overwrite=overwrite_build_params)
        if requirements or requirements_file:
            fn.with_requirements(requirements, requirements_file or "", overwrite_build_params)
        if image:
            fn.spec.image = image
        target = fn.spec.image or self.spec.default_image or base_image or ""
        self.spec.builds[fn.metadata.name] = {
            "image": target,
            "base_image": fn.spec.build.base_image,
            "requirements": list(fn.spec.build.requirements),
            "commands": list(fn.spec.build.commands),
        }
        if fn.metadata.name in self.function_names:
            self.set_function(fn, name=fn.metadata.name)
        return BuildStatus(ready=True, outputs={"image": target})

    def build_image(self, image: str | None = None, **options: Any) -> BuildStatus:
        """Record the project's default image build."""
        if image:
            self.spec.default_image = image
        return BuildStatus(ready=True, outputs={"image": image or self.spec.default_image})

    def deploy_function(
        self,
        function: str | Function,
        models: Any = None,
        env: Mapping[str, str] | None = None,
        tag: str | None = None,
        verbose: bool | None = None,
        builder_env: Mapping[str, str] | None = None,
        mock: bool | None = None,
    ) -> DeployStatus:
        """Deploy a serving function of the project through the runplane service; a job's
        "deploy" is its build, recorded (see :meth:`build_function`)."""
        if models:
            raise OutOfScopeError(
                "serving graphs and model servers (deploy_function models=)",
                "serve a handler(context, event) with kind='serving'",
            )
        fn = self._function_for_run(function)
        for key, value in (env or {}).items():
            fn.set_env(key, value)
        if fn.kind.value != "serving":
            build = self.build_function(fn)
            return DeployStatus("ready", dict(build.outputs), fn)
        outputs = fn.deploy()
        return DeployStatus("ready", dict(outputs or {}), fn)

    # -- source, parameters, secrets -------------------------------------------------------------

    def set_source(
        self, source: str = "", pull_at_runtime: bool = False, workdir: str | None = None
    ) -> None:
        """Where the project's code is: a local directory (runs find its modules), or an
        archive or git URL (recorded; runs execute embedded code)."""
        self.spec.source = source
        self.spec.load_source_on_run = pull_at_runtime
        if workdir is not None:
            self.spec.workdir = workdir

    @property
    def source_dir(self) -> str:
        """The directory runs of the project import from: the source, when it is a local
        directory, else the context; and in it ``workdir``."""
        base = Path(self.context)
        if self.spec.source and "://" not in self.spec.source:
            source = self._path(self.spec.source)
            base = source if source.is_dir() else base
        return str(base / self.spec.workdir) if self.spec.workdir else str(base)

    def get_param(self, key: str, default: Any = None) -> Any:
        return self.spec.params.get(key, default)

    def set_param(self, key: str, value: Any) -> None:
        self.spec.params[key] = value

    def set_default_image(self, default_image: str) -> None:
        self.spec.default_image = default_image

    def set_secrets(
        self,
        secrets: Mapping[str, str] | None = None,
        file_path: str | None = None,
        provider: str | None = None,
    ) -> None:
        """Keep secrets for the project's runs (``context.get_secret(key)``), in this
        machine's secret store; on a cluster, the Secret ``runplane-project-<name>``."""
        from runplane.projects.secrets import store_secrets

        values = dict(secrets or {})
        if file_path:
            from runplane.spec.env import read_env_file

            values.update(read_env_file(file_path))
        for key in values:
            check_key("set_secrets key", key)
            if key in (".", ".."):
                raise InvalidValueError(
                    "set_secrets key", key, "a secret key names a file", "'AWS_KEY'"
                )
        store_secrets(secret_name(self.name), values)
        self.spec.secret_keys = sorted(set(self.spec.secret_keys) | set(values))

    def get_secret(self, key: str) -> str | None:
        from runplane.projects.secrets import read_secret

        return read_secret(secret_name(self.name), key)

    # -- runs ---------------------------------------------------------------------------------

    def list_runs(self, name: str | None = None, **filters: Any) -> Any:
        from runplane.rundb import get_run_db

        return get_run_db().list_runs(name=name, project=self.name, **filters)

    # -- out of scope ---------------------------------------------------------------------------

    def set_workflow(self, name: str, workflow_path: str, **options: Any) -> None:
        raise OutOfScopeError(
            "workflows (Kubeflow Pipelines)",
            "run the steps with project.run_function, one after the other, in Python",
        )

    def run(self, name: str = "", **options: Any) -> Any:
        self.set_workflow(name, "")

    def set_artifact(self, key: str, artifact: Any = None, **options: Any) -> None:
        raise OutOfScopeError(
            "the project artifact store", "artifacts are files kept with the run that logs them"
        )

    log_artifact = log_dataset = log_model = get_artifact = set_artifact

    def set_model_monitoring_credentials(self, *args: Any, **options: Any) -> None:
        raise OutOfScopeError("model monitoring", "see docs/mlrun-compatibility.md")

    enable_model_monitoring = set_model_monitoring_credentials

    def store_alert_config(self, *args: Any, **options: Any) -> None:
        raise OutOfScopeError("alerts", "see docs/mlrun-compatibility.md")

    # -- files ----------------------------------------------------------------------------------

    def _path(self, path: str) -> Path:
        candidate = Path(path)
        return candidate if candidate.is_absolute() else Path(self.context) / candidate

    def to_dict(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name}
        if self.metadata.labels:
            metadata["labels"] = dict(self.metadata.labels)
        return {"kind": "project", "metadata": metadata, "spec": self.spec.to_dict()}

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def export(self, filepath: str | None = None, include_files: str | None = None) -> None:
        """Write the project as YAML (``<context>/project.yaml`` by default)."""
        target = self._path(filepath) if filepath else Path(self.context) / PROJECT_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(self.to_yaml(), encoding="utf-8")

    def save(self, filepath: str | None = None, store: bool = True) -> Project:
        """Write ``project.yaml`` in the project's context directory and, with ``store``,
        keep the project's record where runs go (the service, or this machine): its
        description, parameters, default image, labels and, when it sets one, its retention
        policy."""
        self.export(filepath)
        if store:
            self.store_record()
        return self

    def store_record(self, update: bool = True) -> None:
        """Make the project's record where runs go, or (``update``, when it is the caller's)
        bring it up to date with this project."""
        from runplane.client import projects as records

        values = records.record_values(
            self.spec.description,
            self.spec.params,
            self.spec.default_image,
            self.metadata.labels,
            self.spec.retention,
        )
        records.store(self.name, values, update=update)

    @classmethod
    def from_record(cls, record: Mapping[str, Any], context: str | Path = "./") -> Project:
        """The project a stored record describes (no functions: those are in its
        ``project.yaml`` and the function catalog)."""
        project = cls(str(record["name"]), context, str(record.get("description") or ""))
        project.spec.params = dict(record.get("params") or {})
        project.spec.default_image = str(record.get("default_image") or "")
        project.metadata.labels = dict(record.get("labels") or {})
        project.spec.retention = dict(record.get("retention") or {})
        return project

    @property
    def owner(self) -> str:
        """Who made the project's record (empty when it has none yet)."""
        from runplane.client import projects as records

        record = records.get(self.name)
        return str(record.get("owner") or "") if record else ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], context: str | Path) -> Project:
        if not isinstance(data, Mapping) or data.get("kind", "project") != "project":
            raise InvalidValueError(
                PROJECT_FILE, data, "a project file has kind: project, metadata and spec"
            )
        metadata = dict(data.get("metadata") or {})
        spec = dict(data.get("spec") or {})
        project = cls(str(metadata.get("name", "")), context, str(spec.get("description", "")))
        project.metadata.labels = dict(metadata.get("labels") or {})
        known = set(vars(project.spec))
        for key, value in spec.items():
            if key in known:
                setattr(project.spec, key, copy.deepcopy(value))
        project.default_function_node_selector = project.spec.default_function_node_selector
        return project


def _name_of(handler: str | None) -> str:
    if not handler:
        raise InvalidValueError(
            "set_function",
            None,
            "a function needs code (func=) or a handler, and a name",
            "project.set_function('train.py', name='train', handler='train')",
        )
    return handler.replace(":", ".").rpartition(".")[2]
