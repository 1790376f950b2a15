"""Deploying a serving function: its objects applied as the function now says, nothing more.

Server-side apply (field manager ``runplane``) makes a repeated deploy a no-op and lets other
controllers own the fields they set (the autoscaler owns ``replicas`` once it exists). A
function rendered without autoscaling removes the HorizontalPodAutoscaler an earlier deploy
made, so a deploy leaves exactly what the function says.
"""

from __future__ import annotations

import json
import logging
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
from runplane.runtimes.kubernetes.gone import await_pods_gone

log = logging.getLogger(__name__)

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


def _items(calls: Calls, what: str, api_version: str, kind: str, selector: str) -> list[Any]:
    path = collection_path(api_version, kind, calls.namespace)
    found = calls.read(what, path, {"labelSelector": selector})
    return list(found.get("items") or [])


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    labels = obj["metadata"].get("labels") or {}
    return labels.get(names.PROJECT, ""), labels.get(names.FUNCTION, "")


def listing(calls: Calls, port: int) -> list[dict[str, Any]]:
    """The serving functions' Deployments in the namespace, as ``runplane get deployments``
    shows them: ``desired`` is the Deployment's count (the autoscaler's, when it has one),
    ``ready`` its ready replicas, ``replicas`` its pods with their restarts, ``scaling`` what
    the autoscaler last saw; ``url`` is the Service's address inside the cluster."""
    deployments = _items(calls, "listing deployments", "apps/v1", "Deployment", _selector())
    if not deployments:
        return []
    autoscalers = {
        _key(found): found
        for found in _items(calls, "listing autoscalers", *_AUTOSCALER, _selector())
    }
    # a run's pods carry the function's labels too; a replica's never has a run's uid
    pods: dict[tuple[str, str], list[dict[str, Any]]] = {}
    replicas = f"{_selector()},!{names.RUN_UID}"
    for pod in _items(calls, "listing replicas", "v1", "Pod", replicas):
        pods.setdefault(_key(pod), []).append(pod)
    listed = []
    for item in deployments:
        meta = item["metadata"]
        project, function = _key(item)
        desired = int((item.get("spec") or {}).get("replicas") or 0)
        ready = int((item.get("status") or {}).get("readyReplicas") or 0)
        autoscaler = autoscalers.get((project, function))
        bounds = (autoscaler or {}).get("spec") or {}
        listed.append(
            {
                "project": project,
                "name": meta["name"],
                "owner": (meta.get("annotations") or {}).get(names.DEPLOYED_BY, ""),
                "state": deployment_state(desired, ready),
                "desired": desired,
                "ready": ready,
                "min_replicas": bounds.get("minReplicas", 1) if autoscaler else None,
                "max_replicas": bounds.get("maxReplicas") if autoscaler else None,
                "scaling": scaling_of(autoscaler) if autoscaler else "",
                "replicas": _replicas(pods.get((project, function), [])),
                "url": f"http://{meta['name']}.{calls.namespace}.svc:{port}",
            }
        )
    return listed


def _replicas(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A deployment's pods as its replicas, oldest first: ``state`` is ``ready`` when the pod
    is, else its phase; ``restarts`` its containers' restarts."""
    pods = sorted(pods, key=lambda p: (p["metadata"].get("creationTimestamp") or "", _name(p)))
    found = []
    for index, pod in enumerate(pods):
        status = pod.get("status") or {}
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        containers = status.get("containerStatuses") or []
        found.append(
            {
                "index": index,
                "pod": _name(pod),
                "state": "ready"
                if conditions.get("Ready") == "True"
                else str(status.get("phase") or "Pending").lower(),
                "restarts": sum(int(c.get("restartCount") or 0) for c in containers),
            }
        )
    return found


def _name(obj: Mapping[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def scaling_of(autoscaler: Mapping[str, Any]) -> str:
    """What a HorizontalPodAutoscaler last saw and did, in the words the local supervisor
    uses (``CPU 480% of request against a target of 75%: ...``), or why it cannot scale
    (no metrics: metrics-server missing, or no CPU request)."""
    status = autoscaler.get("status") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    active = conditions.get("ScalingActive") or {}
    if active.get("status") == "False":
        return f"not scaling: {active.get('message') or active.get('reason')}"
    target = next(
        (
            m["resource"]["target"].get("averageUtilization")
            for m in (autoscaler.get("spec") or {}).get("metrics") or []
            if m.get("type") == "Resource"
        ),
        None,
    )
    current = next(
        (
            m["resource"]["current"].get("averageUtilization")
            for m in status.get("currentMetrics") or []
            if m.get("type") == "Resource"
        ),
        None,
    )
    said = ""
    if current is not None and target is not None:
        said = f"CPU {current}% of request against a target of {target}%: "
    count = status.get("desiredReplicas")
    if count is None:
        return said.removesuffix(": ")
    said += f"{status.get('currentReplicas', count)} -> {count} replica(s)"
    if status.get("lastScaleTime"):
        said += f" (last step at {status['lastScaleTime']})"
    return said


#: The most seconds a removal waits for its replicas' pods to be gone: a replica that stops
#: on SIGTERM is gone within a few, and the answer must come within a client's 30 s request
#: timeout (a pod that waits out a 30 s grace period is logged as still stopping).
REMOVAL_WAIT = 25.0


def remove(calls: Calls, project: str, name: str, wait: float = REMOVAL_WAIT) -> str:
    """Delete a serving function's Deployment, Service and autoscaler, and return once its
    replicas' pods are gone (at most ``wait`` seconds: :mod:`.gone`); ``project/name``."""
    if not any(d["project"] == project and d["name"] == name for d in listing(calls, 0)):
        raise NotFoundError(
            f"deployment {name!r} of project {project!r} does not exist in namespace "
            f"{calls.namespace} (runplane get deployments lists them)"
        )
    for api_version, kind in (("apps/v1", "Deployment"), ("v1", "Service"), _AUTOSCALER):
        path = object_path(api_version, kind, calls.namespace, name)
        calls.change(f"deleting {kind} {name}", "DELETE", path, body=BACKGROUND)
    replicas = f"{_selector(project, name)},!{names.RUN_UID}"
    left = await_pods_gone(calls, replicas, wait)
    if left:
        log.warning(
            "deployment %s/%s removed; pods still stopping after %.0fs: %s",
            project,
            name,
            wait,
            ", ".join(left),
        )
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
