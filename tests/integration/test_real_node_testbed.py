"""Smoke tests of the testbed's real node: raw pods on a real kubelet with containerd and runc.

No runplane code runs here: these check that the node behaves like a cluster's node for the
things kwok cannot simulate (a real process, its log, the kernel's OOM kill, volumes, image
pulls, resource accounting), so runplane's own real-node tests can rely on them.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.utils import parse_quantity

from testbed import kube, realnode, topology
from testbed.pytest_plugin import TEST_LABEL, TestbedCluster
from testbed.realnode import RealNode

pytestmark = pytest.mark.testbed

MakePod = Callable[..., str]


def _phase(*phases: str) -> Callable[[client.V1Pod], bool]:
    return lambda pod: kube.pod_status(pod).phase in phases


def _container_state(pod: client.V1Pod) -> client.V1ContainerState | None:
    statuses = kube.pod_status(pod).container_statuses or []
    return statuses[0].state if statuses else None


def _unschedulable(pod: client.V1Pod) -> bool:
    scheduled = kube.pod_condition(pod, "PodScheduled")
    return scheduled is not None and scheduled.reason == "Unschedulable"


def _wait_for(what: str, check: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


@pytest.fixture
def real_pod(
    testbed_cluster: TestbedCluster, real_node: RealNode, request: pytest.FixtureRequest
) -> Iterator[MakePod]:
    """Create pods bound for the real node (its selector and toleration), labelled with the
    test; afterwards delete them and wait until the kubelet has taken them down, so each test
    starts with an empty node."""
    core = testbed_cluster.core
    namespace = testbed_cluster.namespace
    test = f"real-{uuid.uuid4().hex[:8]}"

    def create(
        name: str,
        command: list[str],
        *,
        image: str | None = None,
        pull: str = "Never",
        resources: dict[str, Any] | None = None,
        tolerate: bool = True,
        **spec: Any,
    ) -> str:
        container: dict[str, Any] = {
            "name": "main",
            "image": image or real_node.image,
            "imagePullPolicy": pull,
            "command": command,
            "resources": resources or {},
        }
        container.update(spec.pop("container", {}))
        body: Any = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {TEST_LABEL: test}},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 1,
                "nodeSelector": real_node.node_selector,
                "tolerations": [real_node.toleration] if tolerate else [],
                "containers": [container],
                **spec,
            },
        }
        core.create_namespaced_pod(namespace, body)
        return name

    yield create
    core.delete_collection_namespaced_pod(
        namespace, label_selector=f"{TEST_LABEL}={test}", grace_period_seconds=1
    )
    _wait_for(
        f"pods of {test} to be gone",
        lambda: (
            not core.list_namespaced_pod(namespace, label_selector=f"{TEST_LABEL}={test}").items
        ),
        timeout=60,
    )


def test_pod_runs_and_its_log_is_read_through_the_api(
    testbed_cluster: TestbedCluster, real_node: RealNode, real_pod: MakePod
) -> None:
    name = real_pod("hello", ["python3", "-c", "print('hello from the real node')"])
    pod = testbed_cluster.wait_pod(name, _phase("Succeeded", "Failed"), timeout=60)
    assert kube.pod_status(pod).phase == "Succeeded"
    assert kube.node_name(pod) == real_node.name
    assert kube.pod_status(pod).pod_ip  # an address from the CNI bridge
    # The apiserver fetches the log from the kubelet, dialling the node's InternalIP.
    log = testbed_cluster.core.read_namespaced_pod_log(name, testbed_cluster.namespace)
    assert log.strip() == "hello from the real node"


def test_the_node_proxy_reaches_the_kubelet_at_the_node_s_own_address(
    testbed_cluster: TestbedCluster, real_node: RealNode, real_pod: MakePod
) -> None:
    """The apiserver proxies to the kubelet (which it refuses for a loopback address): a
    running pod's working set is in the kubelet's stats summary read through the node proxy."""
    node = testbed_cluster.core.read_node(real_node.name)
    internal = [a.address for a in node.status.addresses if a.type == "InternalIP"]
    assert internal == [realnode.NODE_ADDRESS]
    name = real_pod(
        "held", ["python3", "-c", "import time; b = bytearray(24 << 20); time.sleep(60)"]
    )
    testbed_cluster.wait_pod(name, _phase("Running"), timeout=60)

    def working_set() -> int:
        answer = testbed_cluster.core.connect_get_node_proxy_with_path(
            real_node.name, "stats/summary", _preload_content=False
        )
        summary = json.loads(answer.data)
        assert summary["node"]["nodeName"] == real_node.name
        for pod in summary.get("pods") or []:
            if pod["podRef"]["name"] == name:
                return sum(int(c["memory"]["workingSetBytes"]) for c in pod["containers"])
        return 0

    _wait_for("the pod's 24 MiB in the summary", lambda: working_set() >= 24 << 20, timeout=60)


def test_memory_limit_is_enforced_by_the_kernel(
    testbed_cluster: TestbedCluster, real_pod: MakePod
) -> None:
    name = real_pod(
        "oom",
        ["python3", "-c", "print('allocating', flush=True); b = b'x' * (200 << 20)"],
        resources={"limits": {"memory": "64Mi"}},
    )
    pod = testbed_cluster.wait_pod(name, _phase("Succeeded", "Failed"), timeout=60)
    assert kube.pod_status(pod).phase == "Failed"
    state = _container_state(pod)
    assert state is not None
    assert state.terminated is not None
    assert (state.terminated.reason, state.terminated.exit_code) == ("OOMKilled", 137)


def test_secret_env_and_config_map_file_reach_the_container(
    testbed_cluster: TestbedCluster, real_pod: MakePod
) -> None:
    core, namespace = testbed_cluster.core, testbed_cluster.namespace
    suffix = uuid.uuid4().hex[:6]
    secret, config = f"real-secret-{suffix}", f"real-config-{suffix}"
    secret_body: Any = {"metadata": {"name": secret}, "stringData": {"token": "s3cr3t-value"}}
    core.create_namespaced_secret(namespace, secret_body)
    config_body: Any = {
        "metadata": {"name": config},
        "data": {"settings.ini": "[demo]\nanswer = 42\n"},
    }
    core.create_namespaced_config_map(namespace, config_body)
    try:
        script = (
            "import os; print('TOKEN=' + os.environ['TOKEN']); "
            "print(open('/etc/demo/settings.ini').read(), end='')"
        )
        name = real_pod(
            "config",
            ["python3", "-c", script],
            container={
                "env": [
                    {
                        "name": "TOKEN",
                        "valueFrom": {"secretKeyRef": {"name": secret, "key": "token"}},
                    }
                ],
                "volumeMounts": [{"name": "demo", "mountPath": "/etc/demo"}],
            },
            volumes=[{"name": "demo", "configMap": {"name": config}}],
        )
        pod = testbed_cluster.wait_pod(name, _phase("Succeeded", "Failed"), timeout=60)
        log = core.read_namespaced_pod_log(name, namespace)
        assert kube.pod_status(pod).phase == "Succeeded", log
        assert log.splitlines() == ["TOKEN=s3cr3t-value", "[demo]", "answer = 42"]
    finally:
        core.delete_namespaced_secret(secret, namespace)
        core.delete_namespaced_config_map(config, namespace)


def test_host_path_persistent_volume_is_writable(
    testbed_cluster: TestbedCluster, real_node: RealNode, real_pod: MakePod
) -> None:
    core, namespace = testbed_cluster.core, testbed_cluster.namespace
    suffix = uuid.uuid4().hex[:6]
    pv, pvc = f"real-pv-{suffix}", f"real-pvc-{suffix}"
    host_dir = testbed_cluster.run_dir / "volumes" / pv
    host_dir.mkdir(parents=True)
    core.create_persistent_volume(realnode.host_path_volume(pv, host_dir, real_node.name))
    claim: Any = {
        "metadata": {"name": pvc},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "volumeName": pv,
            "resources": {"requests": {"storage": "100Mi"}},
        },
    }
    try:
        core.create_namespaced_persistent_volume_claim(namespace, claim)

        def bound() -> bool:
            status = core.read_namespaced_persistent_volume_claim(pvc, namespace).status
            return status is not None and status.phase == "Bound"

        _wait_for(f"{pvc} Bound", bound)
        script = "open('/data/out.txt', 'w').write('written by the pod\\n'); print('ok')"
        name = real_pod(
            "volume",
            ["python3", "-c", script],
            container={"volumeMounts": [{"name": "data", "mountPath": "/data"}]},
            volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": pvc}}],
        )
        pod = testbed_cluster.wait_pod(name, _phase("Succeeded", "Failed"), timeout=60)
        assert kube.pod_status(pod).phase == "Succeeded"
        assert (host_dir / "out.txt").read_text() == "written by the pod\n"
    finally:
        _delete_quietly(core.delete_namespaced_persistent_volume_claim, pvc, namespace)
        _delete_quietly(core.delete_persistent_volume, pv)


def _delete_quietly(delete: Callable[..., object], *args: str) -> None:
    try:
        delete(*args)
    except ApiException as err:
        if err.status != 404:
            raise


def test_missing_image_backs_off(testbed_cluster: TestbedCluster, real_pod: MakePod) -> None:
    name = real_pod(
        "no-image",
        ["python3", "-c", "print('never')"],
        image="runplane.local/does-not-exist:1",
        pull="IfNotPresent",
    )

    def pull_failed(pod: client.V1Pod) -> bool:
        state = _container_state(pod)
        waiting = state.waiting if state else None
        return waiting is not None and waiting.reason in ("ErrImagePull", "ImagePullBackOff")

    pod = testbed_cluster.wait_pod(name, pull_failed, timeout=90, what="ErrImagePull")
    assert kube.pod_status(pod).phase == "Pending"


def test_taint_keeps_pods_without_the_toleration_off(
    testbed_cluster: TestbedCluster, real_pod: MakePod
) -> None:
    name = real_pod("untolerated", ["python3", "-c", "print('never')"], tolerate=False)
    pod = testbed_cluster.wait_pod(name, _unschedulable, timeout=30, what="Unschedulable")
    assert kube.node_name(pod) is None


def _cores(quantity: str) -> float:
    return float(parse_quantity(quantity))  # type: ignore[no-untyped-call]


def _requested_cpu(core: client.CoreV1Api, node: str) -> float:
    """CPU the scheduler counts as taken on a node: requests of its non-terminal pods."""
    pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
    total = 0.0
    for pod in pods:
        if kube.pod_status(pod).phase in ("Succeeded", "Failed"):
            continue
        for container in pod.spec.containers if pod.spec else []:
            requests = (container.resources.requests if container.resources else None) or {}
            total += _cores(requests.get("cpu", "0"))
    return total


def test_node_accounts_for_running_pods_requests(
    testbed_cluster: TestbedCluster, real_node: RealNode, real_pod: MakePod
) -> None:
    core = testbed_cluster.core
    node = core.read_node(real_node.name)
    assert node.status is not None
    allocatable = _cores((node.status.allocatable or {})["cpu"])
    assert allocatable >= 1  # kubelet reports the machine's CPUs
    big = f"{int(allocatable * 1000) - 100}m"
    sleep = ["python3", "-c", "import time; time.sleep(3600)"]
    hog = real_pod("hog", sleep, resources={"requests": {"cpu": big, "memory": "32Mi"}})
    testbed_cluster.wait_pod(hog, _phase("Running"), timeout=60)
    assert _requested_cpu(core, real_node.name) == pytest.approx(allocatable - 0.1)

    # 500m more does not fit beside it; the scheduler says why and keeps the pod pending.
    extra = real_pod("extra", sleep, resources={"requests": {"cpu": "500m", "memory": "32Mi"}})
    pod = testbed_cluster.wait_pod(extra, _unschedulable, timeout=30, what="Unschedulable")
    scheduled = kube.pod_condition(pod, "PodScheduled")
    assert scheduled is not None
    assert "Insufficient cpu" in (scheduled.message or "")

    # Once the hog is gone its CPU is free again, and the waiting pod starts.
    core.delete_namespaced_pod(hog, testbed_cluster.namespace, grace_period_seconds=1)
    pod = testbed_cluster.wait_pod(extra, _phase("Running"), timeout=60)
    assert kube.node_name(pod) == real_node.name
    assert _requested_cpu(core, real_node.name) == pytest.approx(0.5)


def test_real_node_is_labelled_and_tainted(
    testbed_cluster: TestbedCluster, real_node: RealNode
) -> None:
    node = testbed_cluster.core.read_node(real_node.name)
    labels = (node.metadata.labels if node.metadata else None) or {}
    assert {**labels, **topology.REAL_NODE_LABELS} == labels
    assert labels[topology.HOSTNAME_LABEL] == real_node.name
    taints = [
        {"key": t.key, "value": t.value, "effect": t.effect}
        for t in (node.spec.taints if node.spec else None) or []
    ]
    assert taints == [topology.REAL_NODE_TAINT]
    listed = (node.status.images if node.status else None) or []
    images = {name for image in listed for name in image.names or []}
    assert {real_node.image, real_node.pause_image} <= images
