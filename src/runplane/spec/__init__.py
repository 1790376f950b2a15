"""The user's intent: a :class:`Function` and its parts. Pure data and validation, no I/O
beyond reading the files a caller names (see :mod:`runplane.spec.loaders`)."""

from runplane.spec.function import Function, FunctionKind, FunctionSpec, Metadata
from runplane.spec.loaders import code_to_function, import_function, new_function
from runplane.spec.resources import QoSClass, Resources, qos_class
from runplane.spec.scheduling import PreemptionMode
from runplane.spec.volumes import (
    VolumeMount,
    auto_mount,
    mount_configmap,
    mount_pvc,
    mount_secret,
    mount_v3io,
)

__all__ = [
    "Function",
    "FunctionKind",
    "FunctionSpec",
    "Metadata",
    "PreemptionMode",
    "QoSClass",
    "Resources",
    "VolumeMount",
    "auto_mount",
    "code_to_function",
    "import_function",
    "mount_configmap",
    "mount_pvc",
    "mount_secret",
    "mount_v3io",
    "new_function",
    "qos_class",
]
