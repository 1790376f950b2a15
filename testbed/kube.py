"""Typed seams around the untyped corners of the official ``kubernetes`` client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from kubernetes import client, config, watch


def api_client(kubeconfig: Path, pool: int = 32) -> client.ApiClient:
    """A client for one kubeconfig; a bigger pool because seeding and tests use threads (the
    size is set before the client exists: its connection pool is made with it)."""
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)  # type: ignore[no-untyped-call]
    configuration.connection_pool_maxsize = pool
    return client.ApiClient(configuration)


def plain(api: client.ApiClient, obj: object) -> Any:
    """The JSON-shaped form of a client model, for dumps and messages."""
    return api.sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]


def pod_status(pod: client.V1Pod) -> client.V1PodStatus:
    return pod.status or client.V1PodStatus()


def pod_condition(pod: client.V1Pod, kind: str) -> client.V1PodCondition | None:
    return next((c for c in pod_status(pod).conditions or [] if c.type == kind), None)


def node_name(pod: client.V1Pod) -> str | None:
    return pod.spec.node_name if pod.spec else None


def watch_pods(
    core: client.CoreV1Api, namespace: str, field_selector: str, since: str | None, timeout: int
) -> Iterator[client.V1Pod]:
    """Pod objects from a watch starting after ``since`` (a list's resourceVersion), so nothing
    between the list and the watch is missed."""
    stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
        core.list_namespaced_pod,
        namespace,
        field_selector=field_selector,
        resource_version=since,
        timeout_seconds=timeout,
    )
    for event in stream:
        yield cast(client.V1Pod, event["object"])
