"""runplane: run Python functions as jobs and services with explicit, correct resources.

``import runplane`` stays light: every public name is loaded on first use, so command-line
tools and notebooks do not pay for pydantic, YAML or the renderer until they need them.

This module is also where the layers meet: it sits above all of them, so it is the one place
that may hand the client layer to ``spec`` (see :mod:`runplane.hooks`).
"""

from __future__ import annotations

from runplane import hooks as _hooks

# Not imported from `typing`: importing typing alone costs more than the rest of this module.
TYPE_CHECKING = False

__version__ = "0.1.0"

_EXPORTS = {
    "Function": "runplane.spec",
    "VolumeMount": "runplane.spec",
    "code_to_function": "runplane.spec",
    "new_function": "runplane.spec",
    "mount_pvc": "runplane.spec",
    "mount_configmap": "runplane.spec",
    "mount_secret": "runplane.spec",
    "mount_v3io": "runplane.spec",
    "auto_mount": "runplane.spec",
    "Settings": "runplane.config",
    "import_function": "runplane.client.functions",
    # The names MLRun code calls, each in the module that holds it.
    "new_task": "runplane.model",
    "HyperParamOptions": "runplane.model",
    "RunTemplate": "runplane.model",
    "RunObject": "runplane.model",
    "get_or_create_ctx": "runplane.execution",
    "MLClientCtx": "runplane.execution",
    "DataItem": "runplane.execution",
    "get_dataitem": "runplane.execution",
    "handler": "runplane.execution",
    "run_function": "runplane.projects",
    "new_project": "runplane.projects",
    "get_or_create_project": "runplane.projects",
    "load_project": "runplane.projects",
    "get_current_project": "runplane.projects",
    "MlrunProject": "runplane.projects",
    "Project": "runplane.projects",
    "get_run_db": "runplane.rundb",
    "set_environment": "runplane.rundb",
}
_SUBMODULES = (
    "errors",
    "platforms",
    "spec",
    "config",
    "placement",
    "runtimes",
    "execution",
    "model",
    "projects",
    "rundb",
    # MLRun modules whose features runplane does not provide: using them says so.
    "feature_store",
    "model_monitoring",
    "alerts",
    "artifacts",
    "datastore",
    "frameworks",
    "serving",
    "package",
)

if TYPE_CHECKING:
    from typing import Any

    from runplane import (
        config,
        errors,
        execution,
        model,
        placement,
        platforms,
        projects,
        rundb,
        runtimes,
        spec,
    )
    from runplane.client import RunHandle
    from runplane.client.functions import import_function
    from runplane.config import Settings
    from runplane.execution import (
        DataItem,
        MLClientCtx,
        get_dataitem,
        get_or_create_ctx,
        handler,
    )
    from runplane.model import HyperParamOptions, RunObject, RunTemplate, new_task
    from runplane.projects import (
        MlrunProject,
        Project,
        get_current_project,
        get_or_create_project,
        load_project,
        new_project,
        run_function,
    )
    from runplane.rendering import Rendered
    from runplane.rundb import get_run_db, set_environment
    from runplane.settings_view import SettingsView
    from runplane.spec import (
        Function,
        VolumeMount,
        auto_mount,
        code_to_function,
        mount_configmap,
        mount_pvc,
        mount_secret,
        mount_v3io,
        new_function,
    )

    mlconf: SettingsView

__all__ = [
    "DataItem",
    "Function",
    "HyperParamOptions",
    "MLClientCtx",
    "MlrunProject",
    "Project",
    "RunObject",
    "RunTemplate",
    "Settings",
    "VolumeMount",
    "__version__",
    "auto_mount",
    "code_to_function",
    "config",
    "errors",
    "execution",
    "get_current_project",
    "get_dataitem",
    "get_or_create_ctx",
    "get_or_create_project",
    "get_run_db",
    "handler",
    "import_function",
    "load_project",
    "mlconf",
    "model",
    "mount_configmap",
    "mount_pvc",
    "mount_secret",
    "mount_v3io",
    "new_function",
    "new_project",
    "new_task",
    "placement",
    "platforms",
    "projects",
    "render",
    "run",
    "run_function",
    "rundb",
    "runtimes",
    "set_environment",
    "spec",
]


def render(
    function: Function, settings: Settings | None = None, role: str | None = None
) -> Rendered:
    """The Kubernetes objects ``function`` renders to, with its QoS class and lints, under
    ``settings`` (by default the configured service defaults and policies)."""
    from runplane import config, rendering

    return rendering.render(function, settings or config.current(), role=role)


def run(function: Function, **options: Any) -> RunHandle | Any:
    """Run ``function``: the same as ``function.run(**options)``."""
    from runplane import client
    from runplane.spec.run_options import RunArguments

    return client.run(function, RunArguments(**options))


class _Client:
    """The client layer for ``Function.run``/``deploy``, imported on the first call."""

    def run(self, function: Any, arguments: Any, /) -> Any:
        from runplane import client

        return client.run(function, arguments)

    def deploy(self, function: Any, /) -> Any:
        from runplane import client

        return client.deploy(function)

    def invoke(self, function: Any, /, **options: Any) -> Any:
        from runplane import client

        return client.invoke(function, **options)

    def dask_client(self, function: Any, /) -> Any:
        from runplane import config
        from runplane.client import dask

        return dask.dask_client(function, config.current())

    def close(self, function: Any, /) -> None:
        from runplane.client import dask

        dask.close(function)

    def save(self, function: Any, /) -> str:
        from runplane.client import functions

        return functions.save(function)

    def mlrun_defaults(self) -> dict[str, Any]:
        from runplane import config, settings_view

        settings = config.current()
        return {
            "preemption_mode": settings.function_defaults.preemption_mode.value,
            "image_pull_secret": settings_view.kept_image_pull_secret(),
            "priority_classes": list(settings.priority_classes.valid),
        }

    def project(self, data: Any, /) -> Any:
        from runplane.projects import Project

        if "metadata" in data:  # its to_dict() form
            return Project.from_dict(data, ".")
        return Project.from_record(data)


_hooks.register(_Client())


def _load(module: str) -> Any:
    """The module, imported on first use (``__import__`` spares loading ``importlib``)."""
    return __import__(module, fromlist=["_"])


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(_load(_EXPORTS[name]), name)
    elif name in _SUBMODULES:
        value = _load(f"runplane.{name}")
    elif name == "mlconf":
        value = _load("runplane.settings_view").SettingsView(_load("runplane.config").current)
    else:
        raise AttributeError(f"module 'runplane' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
