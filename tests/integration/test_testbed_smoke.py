"""Smoke tests proving the testbed behaves like a real cluster where runplane depends on it:
the real scheduler's placement, priority and preemption, node loss, and kwok's pod lifecycle."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from cryptography import x509
from kubernetes import client

from testbed import cluster as tb_cluster
from testbed import kube, topology
from testbed.pytest_plugin import TestbedCluster, pod_manifest

pytestmark = pytest.mark.testbed

SPOT_TOLERATION = {
    "key": topology.LIFECYCLE_LABEL,
    "operator": "Equal",
    "value": topology.SPOT,
    "effect": "NoSchedule",
}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
MakePod = Callable[..., str]


def require(key: str, *values: str) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }


def phase(pod: client.V1Pod) -> str:
    return kube.pod_status(pod).phase or ""


def node_of(pod: client.V1Pod) -> str:
    return kube.node_name(pod) or ""


def reason(pod: client.V1Pod, kind: str) -> str:
    cond = kube.pod_condition(pod, kind)
    return (cond.reason or "") if cond else ""


def message(pod: client.V1Pod, kind: str) -> str:
    cond = kube.pod_condition(pod, kind)
    return (cond.message or "") if cond else ""


def states(pod: client.V1Pod) -> list[client.V1ContainerState]:
    return [s.state for s in kube.pod_status(pod).container_statuses or [] if s.state]


def terminated(pod: client.V1Pod) -> tuple[int, str]:
    done = [s.terminated for s in states(pod) if s.terminated]
    assert done, f"no terminated container in {kube.pod_status(pod)}"
    return done[0].exit_code, done[0].reason or ""


def running(pod: client.V1Pod) -> bool:
    return phase(pod) == "Running"


def unschedulable(pod: client.V1Pod) -> bool:
    cond = kube.pod_condition(pod, "PodScheduled")
    return cond is not None and cond.status == "False" and cond.reason == "Unschedulable"


def disrupted_failed(pod: client.V1Pod) -> bool:
    cond = kube.pod_condition(pod, "DisruptionTarget")
    return phase(pod) == "Failed" and cond is not None and cond.status == "True"


def group_of(tb: TestbedCluster, node: str) -> str:
    meta = tb.core.read_node(node).metadata
    return ((meta.labels if meta else None) or {}).get(topology.GROUP_LABEL, "")


@pytest.fixture(scope="module", autouse=True)
def orphaned_spot_pod(testbed_cluster: TestbedCluster) -> Iterator[Future[client.V1Pod]]:
    """Delete a spot node with a running pod at module start: PodGC only collects pods of a
    vanished node after a fixed 40 s quarantine, so this clock runs while other tests do. The
    Failed state lasts one watch event before PodGC force-deletes, hence a background watch."""
    tb = testbed_cluster
    node = tb.add_node("spot", "spot-reclaimed")
    pod: Any = pod_manifest(
        "on-reclaimed-spot",
        "podgc",
        tolerations=[SPOT_TOLERATION],
        nodeSelector={"kubernetes.io/hostname": node},
    )
    tb.core.create_namespaced_pod(tb.namespace, pod)
    tb.wait_pod("on-reclaimed-spot", running, what="Running")
    pool = ThreadPoolExecutor(max_workers=1)
    outcome = pool.submit(
        tb.wait_pod, "on-reclaimed-spot", disrupted_failed, 150, "Failed+DisruptionTarget by PodGC"
    )
    # The wait lists, then watches from the list's version: it sees what follows the delete.
    tb.core.delete_node(node)
    yield outcome
    pool.shutdown(wait=False, cancel_futures=True)
    try:
        tb.core.delete_namespaced_pod("on-reclaimed-spot", tb.namespace, grace_period_seconds=0)
    except client.ApiException as err:
        if err.status != 404:
            raise


def test_spot_pod_lands_on_spot_node(testbed_cluster: TestbedCluster, make_pod: MakePod) -> None:
    make_pod(
        "spot-job",
        tolerations=[SPOT_TOLERATION],
        affinity=require(topology.LIFECYCLE_LABEL, topology.SPOT),
    )
    pod = testbed_cluster.wait_pod("spot-job", running, what="Running")
    assert group_of(testbed_cluster, node_of(pod)) == "spot"
    assert kube.pod_status(pod).pod_ip


def test_pod_without_toleration_never_lands_on_tainted_groups(
    testbed_cluster: TestbedCluster, make_pod: MakePod
) -> None:
    names = [make_pod(f"plain-{i}") for i in range(6)]
    for name in names:
        pod = testbed_cluster.wait_pod(name, running, what="Running")
        assert group_of(testbed_cluster, node_of(pod)) == "on-demand"
    make_pod("spot-no-toleration", nodeSelector={topology.LIFECYCLE_LABEL: topology.SPOT})
    pod = testbed_cluster.wait_pod("spot-no-toleration", unschedulable, what="Unschedulable")
    text = message(pod, "PodScheduled")
    assert "untolerated taint" in text
    assert "didn't match Pod's node affinity" in text


def test_gpu_pod_lands_on_gpu_node(testbed_cluster: TestbedCluster, make_pod: MakePod) -> None:
    make_pod("gpu-train", extra_resources={"nvidia.com/gpu": "2"}, tolerations=[GPU_TOLERATION])
    pod = testbed_cluster.wait_pod("gpu-train", running, what="Running")
    assert group_of(testbed_cluster, node_of(pod)) == "gpu"


def test_oversized_pod_stays_pending_with_scheduler_reason(
    testbed_cluster: TestbedCluster, make_pod: MakePod
) -> None:
    make_pod("too-big", cpu="1000")
    pod = testbed_cluster.wait_pod("too-big", unschedulable, what="Unschedulable")
    assert phase(pod) == "Pending"
    assert not node_of(pod)
    text = message(pod, "PodScheduled")
    assert text.startswith("0/")
    assert "Insufficient cpu" in text


def test_high_priority_pending_pod_goes_first_and_evicts_nothing(
    testbed_cluster: TestbedCluster, make_pod: MakePod
) -> None:
    """On a node of its own (earlier tests' pods may still hold room on the seeded ones): both
    pending pods want the whole node, the filler leaves, and the higher priority takes it
    without having evicted anything meanwhile (``preemptionPolicy: Never``)."""
    tb = testbed_cluster
    group = tb.topology.group("on-demand")
    whole_node = group.allocatable_cpu
    node = tb.add_node("on-demand", f"prio-{uuid.uuid4().hex[:6]}")
    try:
        make_pod("filler", cpu=whole_node, nodeName=node)
        tb.wait_pod("filler", running, what="Running")
        only_there = {"kubernetes.io/hostname": node}
        make_pod("waiting-low", cpu=whole_node, priorityClassName="low", nodeSelector=only_there)
        tb.wait_pod("waiting-low", unschedulable, what="Unschedulable")
        make_pod("waiting-high", cpu=whole_node, priorityClassName="high", nodeSelector=only_there)
        tb.wait_pod("waiting-high", unschedulable, what="Unschedulable")
        # Both must be past their scheduling back-off, parked as unschedulable, so that freed
        # room goes to the queue in priority order: the scheduler idle for longer than its
        # longest back-off (other tests' pods going away may have made it try them again).
        tb.wait_scheduler_idle(quiet=tb_cluster.SCHEDULER_MAX_BACKOFF_SECONDS + 1)
        filler = tb.read_pod("filler")
        assert phase(filler) == "Running"
        assert kube.pod_condition(filler, "DisruptionTarget") is None
        tb.core.delete_namespaced_pod("filler", tb.namespace, grace_period_seconds=0)
        high = tb.wait_pod("waiting-high", running, timeout=30, what="Running")
        assert node_of(high) == node
        low = tb.read_pod("waiting-low")
        assert not node_of(low)
        assert unschedulable(low)
    finally:
        tb.delete_node(node)


def test_system_pod_preempts_user_pod(testbed_cluster: TestbedCluster, make_pod: MakePod) -> None:
    tb = testbed_cluster
    group = tb.topology.group("on-demand")
    node = group.node_names()[-1]
    make_pod("user-victim", cpu=group.allocatable_cpu, priorityClassName="medium", nodeName=node)
    tb.wait_pod("user-victim", running, what="Running")
    make_pod(
        "core-service",
        cpu=group.allocatable_cpu,
        priorityClassName=topology.SYSTEM_PRIORITY_CLASS,
        nodeSelector={"kubernetes.io/hostname": node},
    )
    victim = tb.wait_pod("user-victim", disrupted_failed, what="Failed+DisruptionTarget")
    assert reason(victim, "DisruptionTarget") == "PreemptionByScheduler"
    preemptor = tb.wait_pod("core-service", running, timeout=30, what="Running")
    assert node_of(preemptor) == node


def test_noexecute_taint_evicts(testbed_cluster: TestbedCluster, make_pod: MakePod) -> None:
    tb = testbed_cluster
    node = tb.add_node("spot", "spot-tainted")
    try:
        make_pod(
            "evictee", tolerations=[SPOT_TOLERATION], nodeSelector={"kubernetes.io/hostname": node}
        )
        tb.wait_pod("evictee", running, what="Running")
        taints = [
            topology.SPOT_TAINT,
            {"key": "runplane.io/maintenance", "value": "now", "effect": "NoExecute"},
        ]
        tb.core.patch_node(node, {"spec": {"taints": taints}})
        pod = tb.wait_pod("evictee", disrupted_failed, what="Failed+DisruptionTarget")
        assert reason(pod, "DisruptionTarget") == "DeletionByTaintManager"
    finally:
        tb.core.delete_node(node)


def test_stage_pod_completes_after_annotated_duration(
    testbed_cluster: TestbedCluster, make_pod: MakePod
) -> None:
    make_pod("short-job", annotations={"runplane.io/test-duration": "3s"})
    testbed_cluster.wait_pod("short-job", running, what="Running")
    begin = time.monotonic()
    done = testbed_cluster.wait_pod(
        "short-job", lambda p: phase(p) == "Succeeded", timeout=20, what="Succeeded"
    )
    assert time.monotonic() - begin >= 2.0
    assert terminated(done) == (0, "Completed")


def test_stage_pod_fails_oomkilled(testbed_cluster: TestbedCluster, make_pod: MakePod) -> None:
    make_pod(
        "oom-job",
        annotations={
            "runplane.io/test-duration": "1s",
            "runplane.io/test-exit-code": "137",
            "runplane.io/test-reason": "OOMKilled",
        },
    )
    pod = testbed_cluster.wait_pod(
        "oom-job", lambda p: phase(p) == "Failed", timeout=20, what="Failed"
    )
    assert terminated(pod) == (137, "OOMKilled")


def test_stage_image_pull_backoff(testbed_cluster: TestbedCluster, make_pod: MakePod) -> None:
    make_pod("bad-image", image="registry.example/does-not-exist:1")

    def backing_off(pod: client.V1Pod) -> bool:
        return any(s.waiting and s.waiting.reason == "ImagePullBackOff" for s in states(pod))

    pod = testbed_cluster.wait_pod("bad-image", backing_off, what="ImagePullBackOff")
    assert phase(pod) == "Pending"


def test_deleted_spot_node_pod_is_collected(orphaned_spot_pod: Future[client.V1Pod]) -> None:
    pod = orphaned_spot_pod.result(timeout=150)
    assert reason(pod, "DisruptionTarget") == "DeletionByPodGC"


def test_kubernetes_service_leads_to_the_advertised_address(
    testbed_cluster: TestbedCluster,
) -> None:
    """What in-cluster clients rely on, with no real node: the ``kubernetes`` Service's
    endpoint is the apiserver's advertised address and port, the serving certificate names
    that address and the Service, and each namespace gets the CA and a default account."""
    discovery = client.DiscoveryV1Api(testbed_cluster.api)
    slices = discovery.list_namespaced_endpoint_slice(
        "default", label_selector="kubernetes.io/service-name=kubernetes"
    ).items
    endpoints = {
        (address, port.port)
        for piece in slices
        for endpoint in piece.endpoints or []
        for address in endpoint.addresses
        for port in piece.ports or []
    }
    port = testbed_cluster.cluster.ports["apiserver"]
    assert endpoints == {(tb_cluster.ADVERTISE_ADDRESS, port)}
    pem = (testbed_cluster.run_dir / "pki" / "apiserver.crt").read_bytes()
    names = x509.load_pem_x509_certificate(pem).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    ips = {str(ip) for ip in names.value.get_values_for_type(x509.IPAddress)}
    assert {"127.0.0.1", tb_cluster.SERVICE_IP, tb_cluster.ADVERTISE_ADDRESS} <= ips
    assert "kubernetes.default.svc" in names.value.get_values_for_type(x509.DNSName)
    core = testbed_cluster.core
    namespace = testbed_cluster.namespace
    deadline = time.monotonic() + 60
    while not (
        core.list_namespaced_config_map(
            namespace, field_selector="metadata.name=kube-root-ca.crt"
        ).items
        and core.list_namespaced_service_account(
            namespace, field_selector="metadata.name=default"
        ).items
    ):
        assert time.monotonic() < deadline, "no kube-root-ca.crt or default ServiceAccount"
        time.sleep(0.2)
