"""metrics-server beside the real node, so HorizontalPodAutoscalers really act.

It runs as the testbed runs its other controllers: a process on the host (built from its Go
module by ``testbed/build.py``), not a pod. The apiserver reaches it as an aggregated API: the
``v1beta1.metrics.k8s.io`` APIService names a Service without a selector whose one endpoint is
the host's address on the pod bridge, where metrics-server listens with a certificate from the
run's CA; the apiserver routes to that endpoint directly (``cluster.aggregation_args``).
metrics-server scrapes the kubelet's ``/metrics/resource`` at the node's InternalIP (where the
kubelet listens, ``realnode.NODE_ADDRESS``) every ``RESOLUTION``, verifying its serving
certificate by the run's CA, and the controller-manager's autoscaler reads ``metrics.k8s.io``
through the apiserver as in any cluster.

It uses the admin kubeconfig (to list nodes and pods, and to read the apiserver's request
header settings in ``kube-system``): a testbed shortcut, not advice.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
import urllib.error
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from testbed import build, kube, pki, topology
from testbed.cluster import (
    POD_GATEWAY,
    Cluster,
    Process,
    _http_ok,
    _insecure,
    _spawn,
    _stop_group,
    _tail,
    _wait,
    free_port,
)

NAME = "metrics-server"
NAMESPACE = "kube-system"
API_SERVICE = "v1beta1.metrics.k8s.io"
#: How often the kubelet is scraped: the autoscaler sees a change within about this long.
#: metrics-server's own default is 60 s; 10 s is its least.
RESOLUTION = "15s"
#: Where it listens: the host's side of the pod bridge, an address an endpoint may name (the
#: apiserver refuses loopback endpoints); it exists while the real node runs.
ADDRESS = POD_GATEWAY


@dataclass
class MetricsServer:
    """The process and what registers it; ``stop`` undoes both."""

    cluster: Cluster
    process: Process
    port: int
    #: From the start of the process to the real node's metrics served by the apiserver.
    start_s: float = 0.0

    def unregister(self) -> None:
        """Remove the APIService first: an aggregated API that no longer answers makes
        discovery fail, and with it namespace deletion."""
        api = kube.api_client(self.cluster.kubeconfig, pool=2)
        core = client.CoreV1Api(api)
        _unless_absent(lambda: client.ApiregistrationV1Api(api).delete_api_service(API_SERVICE))
        _unless_absent(lambda: core.delete_namespaced_service(NAME, NAMESPACE))
        _unless_absent(lambda: core.delete_namespaced_endpoints(NAME, NAMESPACE))

    def stop(self) -> None:
        try:
            self.unregister()
        finally:
            _stop_group(self.process)


def _unless_absent(call: Callable[[], object]) -> None:
    try:
        call()
    except ApiException as error:
        if error.status != 404:
            raise


def argv(cluster: Cluster, port: int, serving: pki.KeyPair) -> list[str]:
    kubeconfig = str(cluster.kubeconfig)
    ca = cluster.run_dir / "pki" / "ca.crt"
    return [
        str(build.metrics_server_binary()),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--bind-address={ADDRESS}",
        f"--secure-port={port}",
        f"--tls-cert-file={serving.cert}",
        f"--tls-private-key-file={serving.key}",
        "--kubelet-preferred-address-types=InternalIP",
        "--kubelet-use-node-status-port",
        f"--kubelet-certificate-authority={ca}",
        # the kwok nodes have no kubelet to scrape
        "--node-selector=" + ",".join(f"{k}={v}" for k, v in topology.REAL_NODE_LABELS.items()),
        f"--metric-resolution={RESOLUTION}",
        "--v=1",
    ]


def _objects(port: int, ca: bytes) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    meta = {"name": NAME, "namespace": NAMESPACE, "labels": {"app": NAME}}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]},
    }
    endpoints = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": meta,
        "subsets": [{"addresses": [{"ip": ADDRESS}], "ports": [{"name": "https", "port": port}]}],
    }
    api_service = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": API_SERVICE, "labels": {"app": NAME}},
        "spec": {
            "group": "metrics.k8s.io",
            "version": "v1beta1",
            "service": {"name": NAME, "namespace": NAMESPACE, "port": 443},
            "caBundle": base64.b64encode(ca).decode(),
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
        },
    }
    return service, endpoints, api_service


def _register(api: client.ApiClient, port: int, ca: bytes) -> None:
    """Create (or replace) the Service, its endpoint and the APIService."""
    service, endpoints, api_service = _objects(port, ca)
    core = client.CoreV1Api(api)
    for create, replace, body in (
        (core.create_namespaced_service, core.replace_namespaced_service, service),
        (core.create_namespaced_endpoints, core.replace_namespaced_endpoints, endpoints),
    ):
        try:
            create(NAMESPACE, cast(Any, body))
        except ApiException as error:
            if error.status != 409:
                raise
            replace(NAME, NAMESPACE, cast(Any, body))
    registration = client.ApiregistrationV1Api(api)
    _unless_absent(lambda: registration.delete_api_service(API_SERVICE))
    registration.create_api_service(cast(Any, api_service))


def _node_metrics(api: client.ApiClient) -> list[Any]:
    """The nodes metrics-server has measured, through the apiserver (as the autoscaler asks)."""
    custom = client.CustomObjectsApi(api)
    try:
        found: Any = custom.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes")
    except ApiException:
        return []
    return list(found.get("items") or [])


def start(cluster: Cluster, die_with_parent: bool = True, timeout: float = 120.0) -> MetricsServer:
    """Start metrics-server for ``cluster`` (whose real node runs), register it, and return
    once the apiserver serves the real node's metrics through it."""
    # built if missing, or waited for while another process builds it (CI, beside the tests)
    build.build_metrics_server()
    began = time.monotonic()
    directory = cluster.run_dir / "pki"
    serving = pki.issue_server(
        directory,
        "metrics-server",
        NAME,
        (NAME, f"{NAME}.{NAMESPACE}", f"{NAME}.{NAMESPACE}.svc"),
        (ADDRESS,),
    )
    port = free_port()
    process = _spawn(NAME, argv(cluster, port, serving), cluster.run_dir, None, die_with_parent)
    running = MetricsServer(cluster, process, port)
    try:
        # /livez, not /readyz: it is ready only once it holds metrics of pods, and the node
        # may have none yet
        _wait(
            "metrics-server /livez",
            lambda: _http_ok(f"https://{ADDRESS}:{port}/livez", _insecure()),
            [process],
            timeout,
        )
        api = kube.api_client(cluster.kubeconfig, pool=2)
        _register(api, port, (directory / "ca.crt").read_bytes())
        measured = lambda: bool(_node_metrics(api))  # noqa: E731
        _wait("node metrics from metrics-server", measured, [process], timeout)
    except (TimeoutError, RuntimeError, urllib.error.URLError) as error:
        state = _api_service_state(cluster)  # before stop() removes it
        running.stop()
        raise RuntimeError(f"{error}; APIService: {state}\n{_tail(process.log)}") from error
    except BaseException:
        running.stop()
        raise
    running.start_s = round(time.monotonic() - began, 1)
    return running


def _api_service_state(cluster: Cluster) -> str:
    with contextlib.suppress(Exception):
        api = kube.api_client(cluster.kubeconfig, pool=2)
        found = client.ApiregistrationV1Api(api).read_api_service(API_SERVICE)
        return json.dumps(kube.plain(api, found.status))
    return "(unreadable)"


@contextlib.contextmanager
def running(cluster: Cluster) -> Iterator[MetricsServer]:
    """metrics-server for the block, unregistered and stopped after it."""
    server = start(cluster)
    try:
        yield server
    finally:
        server.stop()
