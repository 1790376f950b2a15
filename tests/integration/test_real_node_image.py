"""The runplane image on the real node: ``runplane serve`` run as a cluster runs it.

The image ``python -m testbed image`` builds (or finds in its cache) is imported into the real
node's containerd and started the way a locked-down Deployment starts it: as the image's own
user, with a read-only root filesystem and emptyDirs for the data directory and ``/tmp``, no
privilege escalation, every capability dropped, the runtime's default seccomp profile. The host
reaches the pod's address through the node's bridge, as a client reaches a Service. A second
pod with the same settings runs the CLI and looks at the image from inside.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from testbed import kube, service_image
from testbed.pytest_plugin import TEST_LABEL, TestbedCluster
from testbed.realnode import RealNode

# The first test's setup may build the image (about two minutes cold; CI builds it first).
pytestmark = [pytest.mark.testbed, pytest.mark.timeout(600)]

TEST = f"rimage-{uuid.uuid4().hex[:6]}"
TOKEN = secrets.token_urlsafe(24)

#: Run inside the image: what a platform team's security review asks of it.
INSPECT = r"""
import json, os, shutil, subprocess
version = subprocess.run(["runplane", "--version"], capture_output=True, text=True, check=True)
try:
    open("/opt/runplane/written", "w")
    root_read_only = False
except OSError as error:
    root_read_only = error.errno == 30  # EROFS
import psycopg  # the PostgreSQL driver and its bundled libpq load
import runplane.runtimes.kubernetes.runtime  # the Kubernetes client the service uses
print(json.dumps({
    "version": version.stdout.strip(),
    "uid": os.getuid(),
    "gid": os.getgid(),
    "root_read_only": root_read_only,
    "data_writable": os.access(os.environ["RUNPLANE_LOCAL__HOME"], os.W_OK),
    "libpq": psycopg.pq.version(),
    "toolchain": [t for t in ("cc", "gcc", "c++", "clang", "ld", "make") if shutil.which(t)],
    "packages": open("/usr/share/runplane/packages.txt").read(),
}))
"""


@pytest.fixture(scope="module")
def image(real_node: RealNode, pytestconfig: pytest.Config) -> service_image.Built:
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        built = service_image.build()
    began = time.monotonic()
    real_node.import_archive(built.archive)
    real_node.timings["runplane_image_import_s"] = round(time.monotonic() - began, 2)
    return built


@pytest.fixture
def locked_down_pod(
    testbed_cluster: TestbedCluster, real_node: RealNode, image: service_image.Built
) -> Iterator[Callable[..., str]]:
    """Pods of the image on the real node with the restrictions a chart sets; deleted after."""
    core, namespace = testbed_cluster.core, testbed_cluster.namespace

    def create(name: str, **container: Any) -> str:
        body: Any = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {TEST_LABEL: TEST}},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 5,
                "nodeSelector": real_node.node_selector,
                "tolerations": [real_node.toleration],
                "securityContext": {
                    "runAsNonRoot": True,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [
                    {
                        "name": "runplane",
                        "image": image.name,
                        "imagePullPolicy": "Never",
                        "securityContext": {
                            "readOnlyRootFilesystem": True,
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        "resources": {
                            "requests": {"cpu": "100m", "memory": "256Mi"},
                            "limits": {"cpu": "1", "memory": "1Gi"},
                        },
                        "volumeMounts": [
                            {"name": "data", "mountPath": service_image.DATA_DIR},
                            {"name": "tmp", "mountPath": "/tmp"},
                        ],
                        **container,
                    }
                ],
                "volumes": [{"name": "data", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}],
            },
        }
        core.create_namespaced_pod(namespace, body)
        return name

    yield create
    core.delete_collection_namespaced_pod(
        namespace, label_selector=f"{TEST_LABEL}={TEST}", grace_period_seconds=5
    )
    deadline = time.monotonic() + 60
    while core.list_namespaced_pod(namespace, label_selector=f"{TEST_LABEL}={TEST}").items:
        assert time.monotonic() < deadline, f"pods of {TEST} not deleted"
        time.sleep(0.2)


def _ready(pod: client.V1Pod) -> bool:
    condition = kube.pod_condition(pod, "Ready")
    return condition is not None and condition.status == "True"


def _ended(pod: client.V1Pod) -> bool:
    return kube.pod_status(pod).phase in ("Succeeded", "Failed")


def _ids(pod_uid: str, command: str) -> list[tuple[str, str]]:
    """The real and effective user and group ids of the pod's processes whose command line
    has ``command``, read from this host's /proc: kubelet puts a pod's processes in a cgroup
    named after its uid."""
    marks = (f"pod{pod_uid}", f"pod{pod_uid.replace('-', '_')}")
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cgroup = (entry / "cgroup").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            status = (entry / "status").read_text()
        except OSError:
            continue
        if any(mark in cgroup for mark in marks) and command in cmdline:
            uid = re.search(r"^Uid:\s+(.*)$", status, re.M)
            gid = re.search(r"^Gid:\s+(.*)$", status, re.M)
            assert uid
            assert gid
            found.append((uid.group(1), gid.group(1)))
    return found


def test_the_image_serves_runplane_as_its_own_user_on_a_read_only_root(
    testbed_cluster: TestbedCluster,
    real_node: RealNode,
    image: service_image.Built,
    locked_down_pod: Callable[..., str],
) -> None:
    tokens = [{"token": TOKEN, "user": "ops", "role": "admin"}]
    name = locked_down_pod(
        f"{TEST}-serve",
        # the image's own entrypoint and command: `runplane serve --host 0.0.0.0`
        env=[{"name": "RUNPLANE_SERVICE__TOKENS", "value": json.dumps(tokens)}],
        ports=[{"containerPort": service_image.PORT, "name": "http"}],
        readinessProbe={
            "httpGet": {"path": "/api/v1/health", "port": "http"},
            "periodSeconds": 1,
            "failureThreshold": 300,
        },
    )
    pod = testbed_cluster.wait_pod(name, _ready, timeout=180, what="Ready")
    assert kube.node_name(pod) == real_node.name
    address = f"http://{kube.pod_status(pod).pod_ip}:{service_image.PORT}"
    with httpx.Client(base_url=address, timeout=30) as http:
        health = http.get("/api/v1/health")
        assert health.status_code == 200
        assert health.json() == {"status": "ok", "version": service_image.version()}
        assert http.get("/api/v1/runs").status_code == 401
        runs = http.get("/api/v1/runs", headers={"Authorization": f"Bearer {TOKEN}"})
        assert runs.status_code == 200, runs.text
        login = http.get("/ui/login")
        assert login.status_code == 200
        assert "token" in login.text.lower()

    uid = pod.metadata.uid
    ids = _ids(uid, "serve")
    user = str(service_image.USER_ID)
    assert ids, "no `runplane serve` process found in the pod's cgroup"
    assert all(u.split() == [user] * 4 and g.split() == [user] * 4 for u, g in ids), ids
    # The service's database went to the data directory's emptyDir, owned by its user.
    data = real_node.paths.kubelet_root / "pods" / uid / "volumes"
    database = data / "kubernetes.io~empty-dir" / "data" / "runplane.db"
    assert database.is_file()
    assert database.stat().st_uid == service_image.USER_ID


def test_the_image_holds_the_cli_its_recorded_packages_and_no_toolchain(
    testbed_cluster: TestbedCluster,
    image: service_image.Built,
    locked_down_pod: Callable[..., str],
) -> None:
    name = locked_down_pod(f"{TEST}-inspect", command=["python", "-c", INSPECT])
    pod = testbed_cluster.wait_pod(name, _ended, timeout=120, what="ended")
    log = testbed_cluster.core.read_namespaced_pod_log(name, testbed_cluster.namespace)
    assert kube.pod_status(pod).phase == "Succeeded", log
    seen = json.loads(log.splitlines()[-1])
    assert seen["version"] == f"runplane, version {service_image.version()}"
    assert (seen["uid"], seen["gid"]) == (service_image.USER_ID, service_image.USER_ID)
    assert seen["root_read_only"] is True
    assert seen["data_writable"] is True
    assert seen["libpq"] > 0
    assert seen["toolchain"] == []
    # What the image records is what the build printed and kept beside the archive.
    assert seen["packages"] == image.packages.read_text()
    kinds = {line.split("\t")[0] for line in seen["packages"].splitlines()[1:]}
    assert kinds == {"debian", "wheel"}
