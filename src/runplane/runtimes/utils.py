"""MLRun's ``mlrun.runtimes.utils``: the helpers MLRun code imports from it.

``RunError`` is what a failed run raises (runplane's :class:`~runplane.errors.RunFailedError`),
``generate_resources`` the resources dict MLRun's calls build, in Kubernetes' names.
"""

from __future__ import annotations

from typing import Any

from runplane import names
from runplane.errors import RunFailedError

#: MLRun's name of the error a failed run raises.
RunError = RunFailedError


def generate_resources(
    mem: Any = None, cpu: Any = None, gpus: Any = None, gpu_type: str = names.GPU
) -> dict[str, Any]:
    """``{"memory": mem, "cpu": cpu, gpu_type: gpus}`` with the unset ones left out."""
    resources: dict[str, Any] = {}
    if gpus is not None:
        resources[gpu_type] = gpus
    if mem is not None:
        resources["memory"] = mem
    if cpu is not None:
        resources["cpu"] = cpu
    return resources
