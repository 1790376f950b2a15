"""The real node's in-cluster network: pods reach the API server and Services as in a cluster.

kube-proxy routes every ClusterIP, the ``kubernetes`` Service's among them, whose endpoint is the
apiserver's advertised address on the pod bridge. A pod uses only what any in-cluster client
uses: ``KUBERNETES_SERVICE_HOST``/``_PORT`` and the projected service-account token and CA.
The testbed image has no Kubernetes client, so the pods speak HTTP with the standard library.
"""

from __future__ import annotations

import json
import sys
import sysconfig
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from testbed import build, kube
from testbed.pytest_plugin import TEST_LABEL, TestbedCluster
from testbed.realnode import RealNode

pytestmark = pytest.mark.testbed

#: Asks the API server who the pod is and what it may do, through the ClusterIP in the
#: service environment and the projected token, then its version through the cluster DNS
#: name; prints one JSON line.
API_PROBE = r"""
import json, os, ssl, urllib.error, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
token = open(sa + "/token").read()
namespace = open(sa + "/namespace").read()
tls = ssl.create_default_context(cafile=sa + "/ca.crt")
host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
base = "https://%s:%s" % (host, port)

def call(method, path, body=None, base=base):
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}
    request = urllib.request.Request(base + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, context=tls, timeout=20) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)

review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
who = call("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", review)
pods = call("GET", "/api/v1/namespaces/%s/pods" % namespace)
secrets = call("GET", "/api/v1/namespaces/%s/secrets" % namespace)
# the same through the cluster DNS name, on the Service's port, its name in the certificate
version = call("GET", "/version", base="https://kubernetes.default.svc")
print(json.dumps({
    "base": base,
    "version": [version[0], version[1].get("gitVersion")],
    "user": who[1].get("status", {}).get("userInfo", {}).get("username"),
    "pods": [pods[0], [p["metadata"]["name"] for p in pods[1].get("items", [])]],
    "secrets": [secrets[0], secrets[1].get("message", "")],
}))
"""

#: GETs the URL in argv[1] until it answers (the Service's rules follow its endpoint within
#: about a second of the server's readiness); prints the status and body.
HTTP_PROBE = r"""
import sys, time, urllib.request
deadline = time.monotonic() + 60
while True:
    try:
        with urllib.request.urlopen(sys.argv[1], timeout=5) as response:
            print(response.status, response.read().decode().strip())
            break
    except OSError as error:
        if time.monotonic() > deadline:
            raise
        print("retrying:", error, flush=True)
        time.sleep(0.5)
"""

#: runplane's own Kubernetes client, configured in-cluster (no kubeconfig), asks who it is.
RUNPLANE_PROBE = r"""
import json
from kubernetes import client
from runplane.runtimes.kubernetes.api.client import api_client
api = api_client()
review = client.AuthenticationV1Api(api).create_self_subject_review(
    {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
)
print(json.dumps({"host": api.configuration.host, "user": review.status.user_info.username}))
"""

Create = Callable[..., str]


def _finished(pod: client.V1Pod) -> bool:
    return kube.pod_status(pod).phase in ("Succeeded", "Failed")


def _ready(pod: client.V1Pod) -> bool:
    condition = kube.pod_condition(pod, "Ready")
    return condition is not None and condition.status == "True"


def _wait_for(what: str, check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.2)


@pytest.fixture
def on_node(testbed_cluster: TestbedCluster, real_node: RealNode) -> Iterator[Create]:
    """Create objects for the real node, labelled with the test; deleted afterwards, pods
    waited for until the kubelet has taken them down."""
    core = testbed_cluster.core
    rbac = client.RbacAuthorizationV1Api(testbed_cluster.api)
    namespace = testbed_cluster.namespace
    test = f"net-{uuid.uuid4().hex[:8]}"
    selector = f"{TEST_LABEL}={test}"
    made: list[tuple[Callable[..., Any], str]] = []

    def create(
        kind: str, name: str, spec: dict[str, Any], labels: dict[str, str] | None = None
    ) -> str:
        name = f"{test}-{name}"
        metadata = {"name": name, "labels": {TEST_LABEL: test, **(labels or {})}}
        body: Any = {**spec, "metadata": metadata}
        if kind == "pod":
            pod = body["spec"]
            pod.setdefault("restartPolicy", "Never")
            pod["terminationGracePeriodSeconds"] = 1
            pod["nodeSelector"] = real_node.node_selector
            pod["tolerations"] = [real_node.toleration]
            for container in pod["containers"]:
                container.setdefault("image", real_node.image)
                container["imagePullPolicy"] = "Never"
            core.create_namespaced_pod(namespace, body)
            return name
        creators: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
            "service": (core.create_namespaced_service, core.delete_namespaced_service),
            "serviceaccount": (
                core.create_namespaced_service_account,
                core.delete_namespaced_service_account,
            ),
            "role": (rbac.create_namespaced_role, rbac.delete_namespaced_role),
            "rolebinding": (
                rbac.create_namespaced_role_binding,
                rbac.delete_namespaced_role_binding,
            ),
        }
        make, delete = creators[kind]
        make(namespace, body)
        made.append((delete, name))
        return name

    yield create
    core.delete_collection_namespaced_pod(
        namespace, label_selector=selector, grace_period_seconds=1
    )
    _wait_for(
        f"pods of {test} to be gone",
        lambda: not core.list_namespaced_pod(namespace, label_selector=selector).items,
    )
    for delete, name in reversed(made):
        delete(name, namespace)


def _log_of_success(testbed_cluster: TestbedCluster, name: str) -> str:
    pod = testbed_cluster.wait_pod(name, _finished, timeout=120)
    log = testbed_cluster.core.read_namespaced_pod_log(name, testbed_cluster.namespace)
    assert kube.pod_status(pod).phase == "Succeeded", log
    return str(log)


def test_pod_reaches_the_api_server_as_its_service_account(
    testbed_cluster: TestbedCluster, on_node: Create
) -> None:
    namespace = testbed_cluster.namespace
    # what the pod's projected volume needs: the CA the controller-manager publishes
    _wait_for(
        "kube-root-ca.crt",
        lambda: bool(
            testbed_cluster.core.list_namespaced_config_map(
                namespace, field_selector="metadata.name=kube-root-ca.crt"
            ).items
        ),
    )
    account = on_node("serviceaccount", "prober", {})
    role = on_node(
        "role",
        "pod-reader",
        {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]},
    )
    on_node(
        "rolebinding",
        "pod-reader",
        {
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        },
    )
    pod = on_node(
        "pod",
        "api",
        {
            "spec": {
                "serviceAccountName": account,
                "containers": [{"name": "main", "command": ["python3", "-c", API_PROBE]}],
            }
        },
    )
    seen = json.loads(_log_of_success(testbed_cluster, pod).strip().splitlines()[-1])
    # the client's view, as in any cluster: the Service's ClusterIP, verified against the CA
    assert seen["base"] == "https://10.96.0.1:443"
    assert seen["version"] == [200, build.K8S_VERSION]
    assert seen["user"] == f"system:serviceaccount:{namespace}:{account}"
    status, names = seen["pods"]
    assert status == 200
    assert pod in names
    status, message = seen["secrets"]
    assert status == 403
    assert f"system:serviceaccount:{namespace}:{account}" in message


def test_pod_reaches_another_pod_through_its_service(
    testbed_cluster: TestbedCluster, on_node: Create
) -> None:
    server = on_node(
        "pod",
        "web",
        {
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "command": ["python3", "-m", "http.server", "8080", "-d", "/etc"],
                        "ports": [{"containerPort": 8080}],
                        "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
                    }
                ]
            }
        },
        labels={"app": "web"},
    )
    service = on_node(
        "service",
        "web",
        {
            "spec": {
                "selector": {"app": "web", TEST_LABEL: server.rsplit("-", 1)[0]},
                "ports": [{"port": 80, "targetPort": 8080}],
            }
        },
    )
    spec = testbed_cluster.core.read_namespaced_service(service, testbed_cluster.namespace).spec
    assert spec is not None
    cluster_ip = spec.cluster_ip
    testbed_cluster.wait_pod(server, _ready, timeout=120)
    url = f"http://{cluster_ip}/hostname"
    client_pod = on_node(
        "pod",
        "client",
        {"spec": {"containers": [{"name": "main", "command": ["python3", "-c", HTTP_PROBE, url]}]}},
    )
    log = _log_of_success(testbed_cluster, client_pod)
    # the server answers with its /etc/hostname, which kubelet writes: the pod's name
    assert log.strip().splitlines()[-1] == f"200 {server}"


def test_runplane_client_in_a_pod_uses_the_in_cluster_configuration(
    testbed_cluster: TestbedCluster, on_node: Create
) -> None:
    """The Python image lacks runplane and its dependencies; the pod borrows this checkout's
    source and the test interpreter's packages (the same Python minor) read-only."""
    assert sys.version_info[:2] == (3, 11), "the packages must match the image's Python 3.11"
    source = Path(__file__).resolve().parents[2] / "src"
    packages = Path(sysconfig.get_paths()["purelib"])
    mounts = {"source": source, "packages": packages}
    pod = on_node(
        "pod",
        "runplane",
        {
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "command": ["python3", "-c", RUNPLANE_PROBE],
                        "env": [{"name": "PYTHONPATH", "value": "/opt/source:/opt/packages"}],
                        "volumeMounts": [
                            {"name": name, "mountPath": f"/opt/{name}", "readOnly": True}
                            for name in mounts
                        ],
                    }
                ],
                "volumes": [
                    {"name": name, "hostPath": {"path": str(path), "type": "Directory"}}
                    for name, path in mounts.items()
                ],
            }
        },
    )
    seen = json.loads(_log_of_success(testbed_cluster, pod).strip().splitlines()[-1])
    assert seen == {
        "host": "https://10.96.0.1:443",
        "user": f"system:serviceaccount:{testbed_cluster.namespace}:default",
    }
