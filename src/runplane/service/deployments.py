"""Serving deployments on the service's runtime, the same for ``runplane serve`` and for the
embedded default: what may be deployed, how it is applied, and finding one by name. Who may act
on a deployment is the caller's to check (the server asks its token; the embedded default is
its machine's user's alone)."""

from __future__ import annotations

from typing import Any

from runplane import names
from runplane.config import Settings
from runplane.errors import InvalidValueError, NotFoundError
from runplane.rendering import render
from runplane.runtimes.contract import Runtime
from runplane.spec.function import Function, FunctionKind, check_servable, require_kind


def check_deployable(runtime: Runtime, fn: Function) -> None:
    """Refuse what no deploy of ``fn`` on ``runtime`` could start, before anything is applied."""
    require_kind(
        fn,
        FunctionKind.SERVING,
        "only serving functions are deployed; jobs are run",
        "new_function('serve', kind='serving')",
    )
    check_servable(fn)
    if not runtime.capabilities.deploy:
        raise InvalidValueError(
            "service.runtime",
            runtime.name,
            "serving functions are deployed to a Kubernetes cluster; start the service "
            "with service.runtime: kubernetes",
            "RUNPLANE_SERVICE__RUNTIME=kubernetes",
        )


def apply_deployment(
    runtime: Runtime,
    settings: Settings,
    fn: Function,
    role: str | None = None,
    deployed_by: str = "",
) -> list[str]:
    """Render ``fn`` (checked with :func:`check_deployable`) and create or update its objects;
    ``deployed_by`` is kept on the Deployment, as its owner in listings."""
    manifests = render(fn, settings, role=role).manifests
    if deployed_by:
        for manifest in manifests:
            if manifest["kind"] == "Deployment":
                annotations = manifest["metadata"].setdefault("annotations", {})
                annotations[names.DEPLOYED_BY] = deployed_by
    return runtime.deploy(manifests)


def list_deployments(
    runtime: Runtime, project: str | None = None, owner: str | None = None
) -> list[dict[str, Any]]:
    """The runtime's deployments, of ``project`` and ``owner`` when given."""
    return [
        found
        for found in runtime.deployments()
        if (owner is None or found["owner"] == owner)
        and (project is None or found["project"] == project)
    ]


def find_deployment(runtime: Runtime, project: str, name: str) -> dict[str, Any] | None:
    for found in runtime.deployments():
        if found["project"] == project and found["name"] == name:
            return found
    return None


def get_deployment(runtime: Runtime, project: str, name: str) -> dict[str, Any]:
    """The deployment ``project/name``; ``NotFoundError`` when the runtime has none."""
    found = find_deployment(runtime, project, name)
    if found is None:
        raise NotFoundError(
            f"deployment {project}/{name} does not exist (runplane get deployments lists them)"
        )
    return found
