"""runplane: run Python functions as jobs and services with explicit, correct resources.

``import runplane`` stays light: every public name is loaded on first use, so command-line
tools and notebooks do not pay for pydantic, YAML or the renderer until they need them.
"""

from __future__ import annotations

from importlib import import_module

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
    "render": "runplane.render",
    "Settings": "runplane.config",
}
_SUBMODULES = ("errors", "platforms", "spec", "config", "render", "placement")

if TYPE_CHECKING:
    from typing import Any

    from runplane import config, errors, placement, platforms, spec
    from runplane.config import Settings
    from runplane.render import render
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
    "spec",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name]), name)
    elif name in _SUBMODULES:
        value = import_module(f"runplane.{name}")
    else:
        raise AttributeError(f"module 'runplane' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
