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
from runplane.runtimes.kubernetes.calls import Calls
from runplane.runtimes.kubernetes.rest import APPLY_PATCH, object_path

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
            lambda path=path, body=body: calls.rest.json(  # type: ignore[misc]
                "PATCH",
                path,
                {"fieldManager": names.MANAGER, "force": "true"},
                body=body,
                content_type=APPLY_PATCH,
                timeout=calls.timeout,
            ),
        )
        applied.append(f"{manifest['kind']}/{meta['name']}")
        kinds.add((manifest["apiVersion"], manifest["kind"]))
        if manifest["kind"] == "Deployment":
            deployment = meta["name"]
    if deployment and _AUTOSCALER not in kinds:
        path = object_path(*_AUTOSCALER, calls.namespace, deployment)
        try:
            calls.rest.json("DELETE", path, timeout=calls.timeout)
        except ApiException as error:
            if error.status != 404:
                raise calls.refused(f"removing the autoscaler of {deployment}", error) from None
    return applied
