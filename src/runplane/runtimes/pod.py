"""MLRun's ``mlrun.runtimes.pod``: the spec of a function that runs in a pod.

runplane keeps a function's pod settings in :class:`runplane.spec.FunctionSpec`; MLRun code
that builds a :class:`KubeResourceSpec` by itself gets its resources filled from
``mlconf.default_function_pod_resources`` as MLRun fills them (a key the spec leaves out takes
the default; a GPU asked for as much as its limit is kept in the limits only), checked by
runplane's rules, so a quantity Kubernetes would refuse is refused here.
"""

from __future__ import annotations

from typing import Any

import pydantic

from runplane import config, settings_view
from runplane.spec.base import translate
from runplane.spec.resources import Resources


def _filled(resources: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    defaults = settings_view.pod_resources(config.current())
    given = resources or {}
    requests = {**defaults["requests"], **(given.get("requests") or {})}
    limits = {**defaults["limits"], **(given.get("limits") or {})}
    for key in [k for k in requests if k not in ("cpu", "memory")]:
        if str(requests[key]) == str(limits.get(key)):
            del requests[key]
    Resources.model_validate({"requests": requests, "limits": limits})  # refuses, or passes
    return {"requests": requests, "limits": limits}


class KubeResourceSpec:
    """A pod's spec as MLRun code builds it: its resources filled and checked when made."""

    def __init__(self, resources: dict[str, Any] | None = None, **fields: Any) -> None:
        try:
            self.resources = _filled(resources)
        except pydantic.ValidationError as error:
            raise translate(error) from None
        for name, value in fields.items():
            setattr(self, name, value)
