"""Deploying a serving function: its objects applied as the function now says, nothing more.

Server-side apply (field manager ``runplane``) makes a repeated deploy a no-op and lets other
controllers own the fields they set (the autoscaler owns ``replicas`` once it exists). A
function rendered without autoscaling removes the HorizontalPodAutoscaler an earlier deploy
made, so a deploy leaves exactly what the function says.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from runplane import names
from runplane.errors import NotFoundError
from runplane.runtimes.contract import Answer, Call
from runplane.runtimes.deployments import deployment_state
from runplane.runtimes.kubernetes.api.calls import Calls
from runplane.runtimes.kubernetes.api.rest import (
    APPLY_PATCH,
    BACKGROUND,
    collection_path,
    object_path,
)

_AUTOSCALER = ("autoscaling/v2", "HorizontalPodAutoscaler")
_MOUNTED = ("ConfigMap", "Secret")


def apply(calls: Calls, manifests: Iterable[Mapping[str, Any]]) -> list[str]:
    """Create or update each object, what the pods mount (ConfigMaps, Secrets) first; returns
    ``Kind/name`` of each, in the order applied."""
    applied: list[str] = []
    kinds: set[tuple[str, str]] = set()
    deployment = ""
    for manifest in sorted(manifests, key=lambda m: m["kind"] not in _MOUNTED):
        meta = manifest["metadata"]
        namespace = meta.get("namespace", calls.namespace)
        path = object_path(manifest["apiVersion"], manifest["kind"], namespace, meta["name"])
        body = json.dumps(manifest)
        calls.checked(
            f"applying {manifest['kind']} {meta['name']}",
            lambda path=path, body=body: calls.json(  # type: ignore[misc]
                "PATCH",
                path,
                {"fieldManager": names.MANAGER, "force": "true"},
                body=body,
                content_type=APPLY_PATCH,
            ),
        )
        applied.append(f"{manifest['kind']}/{meta['name']}")
        kinds.add((manifest["apiVersion"], manifest["kind"]))
        if manifest["kind"] == "Deployment":
            deployment = meta["name"]
    if deployment and _AUTOSCALER not in kinds:
        path = object_path(*_AUTOSCALER, calls.namespace, deployment)
        calls.change(f"removing the autoscaler of {deployment}", "DELETE", path)
    return applied


def _selector(project: str | None = None, name: str | None = None) -> str:
    parts = [f"{names.PROJECT}={project}" if project else names.PROJECT]
    parts.append(f"{names.FUNCTION}={name}" if name else names.FUNCTION)
    return ",".join(parts)


def listing(calls: Calls, port: int) -> list[dict[str, Any]]:
    """The serving functions' Deployments in the namespace, as ``runplane get deployments``
    shows them; ``url`` is the Service's address inside the cluster."""
    path = collection_path("apps/v1", "Deployment", calls.namespace)
    found = calls.read("listing deployments", path, {"labelSelector": _selector()})
    listed = []
    for item in found.get("items") or []:
        meta = item["metadata"]
        labels = meta.get("labels") or {}
        desired = int((item.get("spec") or {}).get("replicas") or 0)
        ready = int((item.get("status") or {}).get("readyReplicas") or 0)
        listed.append(
            {
                "project": labels.get(names.PROJECT, ""),
                "name": meta["name"],
                "owner": (meta.get("annotations") or {}).get(names.DEPLOYED_BY, ""),
                "state": deployment_state(desired, ready),
                "desired": desired,
                "ready": ready,
                "url": f"http://{meta['name']}.{calls.namespace}.svc:{port}",
            }
        )
    return listed


def remove(calls: Calls, project: str, name: str) -> str:
    """Delete a serving function's Deployment, Service and autoscaler; ``project/name``."""
    if not any(d["project"] == project and d["name"] == name for d in listing(calls, 0)):
        raise NotFoundError(
            f"deployment {name!r} of project {project!r} does not exist in namespace "
            f"{calls.namespace} (runplane get deployments lists them)"
        )
    for api_version, kind in (("apps/v1", "Deployment"), ("v1", "Service"), _AUTOSCALER):
        path = object_path(api_version, kind, calls.namespace, name)
        calls.change(f"deleting {kind} {name}", "DELETE", path, body=BACKGROUND)
    return f"{project}/{name}"


def forward(calls: Calls, name: str, port: int, call: Call) -> Answer:
    """``call`` sent to the function's Service through the API server's service proxy, so the
    service needs no route into the cluster's network."""
    path = f"/api/v1/namespaces/{calls.namespace}/services/{name}:{port}/proxy/"
    path += call.path.lstrip("/")
    content_type = call.headers.get("content-type") or call.headers.get("Content-Type") or ""
    try:
        response = calls.rest.send(
            call.method,
            path,
            body=call.body or None,
            content_type=content_type or "application/octet-stream",
            timeout=call.timeout,
        )
        response.read()
        return Answer(
            response.status, response.getheader("Content-Type") or "", bytes(response.data or b"")
        )
    except ApiException as error:
        headers = error.headers or {}
        body = error.body if isinstance(error.body, bytes) else str(error.body or "").encode()
        return Answer(int(error.status or 502), headers.get("Content-Type", ""), body)
