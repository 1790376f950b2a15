"""JSON in, JSON out over the official client's connection, auth and TLS handling.

The generated ``CoreV1Api`` methods convert request bodies into models and responses back
again. runplane's manifests and the watch's consumers are plain dicts, and a round trip through
models can drop fields a client release does not know yet, so the runtime sends the rendered
JSON exactly as rendered and reads pods as the server wrote them. Errors stay the client's
``ApiException``, with the status code callers branch on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol, cast

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

Timeout = float | tuple[float, float] | None
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

#: Where each kind runplane renders lives in the API (group/version path, plural).
_RESOURCES = {
    ("v1", "Pod"): ("/api/v1", "pods"),
    ("v1", "Secret"): ("/api/v1", "secrets"),
    ("v1", "ConfigMap"): ("/api/v1", "configmaps"),
    ("v1", "Service"): ("/api/v1", "services"),
    ("apps/v1", "Deployment"): ("/apis/apps/v1", "deployments"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"): (
        "/apis/autoscaling/v2",
        "horizontalpodautoscalers",
    ),
    ("kubeflow.org/v2beta1", "MPIJob"): ("/apis/kubeflow.org/v2beta1", "mpijobs"),
    ("kubeflow.org/v1", "MPIJob"): ("/apis/kubeflow.org/v1", "mpijobs"),
    ("sparkoperator.k8s.io/v1beta2", "SparkApplication"): (
        "/apis/sparkoperator.k8s.io/v1beta2",
        "sparkapplications",
    ),
}
#: The operators' workloads a run may be (docs/runtimes.md), besides a Pod.
WORKLOADS = tuple(key for key in _RESOURCES if key[1] in ("MPIJob", "SparkApplication"))


def collection_path(api_version: str, kind: str, namespace: str) -> str:
    prefix, plural = _RESOURCES[(api_version, kind)]
    return f"{prefix}/namespaces/{namespace}/{plural}"


def object_path(api_version: str, kind: str, namespace: str, name: str) -> str:
    prefix, plural = _RESOURCES[(api_version, kind)]
    return f"{prefix}/namespaces/{namespace}/{plural}/{name}"


class Requests(Protocol):
    """What the watch needs of the API: JSON answers, and a GET read as it streams."""

    def json(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        body: object = None,
        content_type: str = ...,
        timeout: Timeout = None,
    ) -> dict[str, Any]: ...

    def stream(
        self, path: str, query: Mapping[str, Any], timeout: Timeout = None
    ) -> urllib3.BaseHTTPResponse: ...


class RestApi:
    """The few core/v1 calls the runtime makes, on raw JSON."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api

    def send(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        body: object = None,
        content_type: str = JSON,
        timeout: Timeout = None,
    ) -> Any:
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        headers = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        request = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=params,
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self.api.call_api(*request, _request_timeout=timeout)
        if not 200 <= response.status <= 299:
            response.read()  # type: ignore[no-untyped-call]
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return response

    def json(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None = None,
        body: object = None,
        content_type: str = JSON,
        timeout: Timeout = None,
    ) -> dict[str, Any]:
        response = self.send(method, path, query, body, content_type, timeout)
        response.read()
        return cast(dict[str, Any], json.loads(response.data or b"{}"))

    def stream(
        self, path: str, query: Mapping[str, Any], timeout: Timeout = None
    ) -> urllib3.BaseHTTPResponse:
        """A GET whose body is read as it arrives (a watch)."""
        response = self.send("GET", path, query, timeout=timeout)
        return cast(urllib3.BaseHTTPResponse, response.response)


def pods_path(namespace: str, name: str | None = None) -> str:
    return f"/api/v1/namespaces/{namespace}/pods" + (f"/{name}" if name else "")


def secrets_path(namespace: str, name: str | None = None) -> str:
    return f"/api/v1/namespaces/{namespace}/secrets" + (f"/{name}" if name else "")


def configmaps_path(namespace: str, name: str | None = None) -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps" + (f"/{name}" if name else "")
