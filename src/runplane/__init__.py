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
    "import_function": "runplane.spec",
    "mount_pvc": "runplane.spec",
    "mount_configmap": "runplane.spec",
    "mount_secret": "runplane.spec",
    "mount_v3io": "runplane.spec",
    "Settings": "runplane.config",
}
_SUBMODULES = ("errors", "platforms", "spec", "config", "placement")

if TYPE_CHECKING:
    from typing import Any

    from runplane import config, errors, placement, platforms, spec
    from runplane.client import RunHandle
    from runplane.config import Settings
    from runplane.rendering import Rendered
    from runplane.spec import (
        Function,
        VolumeMount,
        code_to_function,
        import_function,
        mount_configmap,
        mount_pvc,
        mount_secret,
        mount_v3io,
        new_function,
    )

__all__ = [
    "Function",
    "Settings",
    "VolumeMount",
    "__version__",
    "code_to_function",
    "config",
    "errors",
    "import_function",
    "mount_configmap",
    "mount_pvc",
    "mount_secret",
    "mount_v3io",
    "new_function",
    "placement",
    "platforms",
    "render",
    "run",
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

    return client.run(function, **options)


class _Client:
    """The client layer for ``Function.run``/``deploy``, imported on the first call."""

    def run(self, function: Any, /, **options: Any) -> Any:
        return run(function, **options)

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


_hooks.register(_Client())


def _load(module: str) -> Any:
    """The module, imported on first use (``__import__`` spares loading ``importlib``)."""
    return __import__(module, fromlist=["_"])


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(_load(_EXPORTS[name]), name)
    elif name in _SUBMODULES:
        value = _load(f"runplane.{name}")
    else:
        raise AttributeError(f"module 'runplane' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
