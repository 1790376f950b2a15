"""Gang placement: every pod of a multi-pod run fits at once, or the run waits whole.

The check itself (:func:`runplane.placement.fit_all`), the pods each workload starts with, and
the Kubernetes runtime's gate that holds such a run until they fit, on node and pod objects in
the API's own shape."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import runplane
from runplane import names
from runplane.config import Settings
from runplane.placement import Node, fit_all
from runplane.rendering import RunRef, render
from runplane.rendering.workloads import gang_pod_specs, jvm_bytes
from runplane.runs import RunState
from runplane.runtimes.events import RunEvent
from runplane.runtimes.kubernetes import podgroup
from runplane.runtimes.kubernetes.gang import GangGate
from runplane.runtimes.request import build_request


def _pod(cpu: str, memory: str = "1Gi", **spec: Any) -> dict[str, Any]:
    return {"containers": [{"resources": {"requests": {"cpu": cpu, "memory": memory}}}], **spec}


def test_all_pods_must_fit_together_not_each_alone() -> None:
    nodes = [Node.create("a", cpu="4"), Node.create("b", cpu="4")]
    pods = [_pod("3"), _pod("3"), _pod("3")]
    for pod in pods:
        assert fit_all([pod], nodes).fits  # each one alone has room
    together = fit_all(pods, nodes)
    assert not together.fits
    assert together.message == (
        "3 pods must start together and 2 fit; the next: "
        "0/2 nodes are available: 2 Insufficient cpu."
    )
    assert fit_all(pods[:2], nodes).nodes in (["a", "b"], ["b", "a"])
    assert nodes[0].requested == {}  # the check reserves on copies


def test_the_largest_pods_are_placed_first_where_they_leave_least_room() -> None:
    # In the order given (1, 1, 4 CPUs) a first fit would put a small pod on the big node
    # and leave the 4-CPU pod nowhere to go.
    nodes = [Node.create("big", cpu="4"), Node.create("small", cpu="2")]
    fit = fit_all([_pod("1"), _pod("1"), _pod("4")], nodes)
    assert fit.fits
    assert fit.nodes == ["small", "small", "big"]


def test_placement_rules_apply_to_each_pod_of_the_gang() -> None:
    spot = Node.create("spot", cpu="16", labels={"lifecycle": "spot"})
    plain = Node.create("plain", cpu="2")
    pods = [_pod("2", nodeSelector={"lifecycle": "spot"}), _pod("2")]
    assert fit_all(pods, [spot, plain]).nodes == ["spot", "plain"]
    assert not fit_all([pods[0], pods[0], _pod("1", nodeSelector={"x": "y"})], [spot]).fits


def _trainer(tmp_path: Path, kind: str = "mpijob") -> runplane.Function:
    code = tmp_path / "train.py"
    code.write_text("def train(context):\n    return 1\n")
    return runplane.code_to_function("trainer", filename=str(code), kind=kind, handler="train")


def test_an_mpijob_starts_with_its_launcher_and_every_worker(tmp_path: Path) -> None:
    fn = _trainer(tmp_path)
    fn.spec.replicas = 3
    fn.with_requests(cpu=2, mem="1Gi").with_limits(gpus=1)
    job = render(fn, Settings(), run=RunRef("a" * 32)).manifests[0]
    pods = gang_pod_specs(job)
    assert len(pods) == 4
    requests = [p["containers"][0].get("resources", {}).get("requests", {}) for p in pods]
    assert requests[0] == {}  # the launcher asks for nothing, as rendered
    assert all(r["cpu"] == "2" for r in requests[1:])
    assert all(p["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] for p in pods[1:])


def test_a_spark_application_starts_with_its_driver_and_executors_as_spark_asks(
    tmp_path: Path,
) -> None:
    fn = _trainer(tmp_path, "spark")
    fn.spec.replicas = 2
    fn.with_executor_requests(cpu=1, mem="2Gi").with_preemption_mode("constrain")
    app = render(fn, Settings(), run=RunRef("b" * 32)).manifests[0]
    driver, *executors = gang_pod_specs(app)
    assert len(executors) == 2
    (container,) = executors[0]["containers"]
    # The stated heap and overhead: the executor's 2 GiB, as the pod Spark makes asks for.
    assert int(container["resources"]["requests"]["memory"]) == 2 * 2**30
    assert container["resources"]["requests"]["cpu"] == "1"
    assert executors[0]["tolerations"] == app["spec"]["executor"]["tolerations"]
    # No memory given: Spark's default heap, 1g, and its overhead.
    assert driver["containers"][0]["resources"]["requests"]["memory"] == str(int(2**30 * 1.4))
    assert jvm_bytes("512m") == 512 * 2**20
    assert jvm_bytes("2g") == 2 * 2**30


def test_jobs_and_deployments_are_not_gangs(tmp_path: Path) -> None:
    code = tmp_path / "job.py"
    code.write_text("def handler(context):\n    return 1\n")
    job = runplane.code_to_function("job", filename=str(code), handler="handler")
    assert gang_pod_specs(render(job, Settings(), run=RunRef("c" * 32)).manifests[0]) == []


def _node(name: str, cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _running(name: str, node: str, cpu: str, uid: str = "") -> dict[str, Any]:
    labels = {names.RUN_UID: uid} if uid else {}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": "Running"},
    }


class Cluster:
    """Node and pod objects a test changes; the gate reads them as the runtime's snapshot."""

    def __init__(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        self.nodes, self.pods = nodes, pods
        self.admitted: list[str] = []
        self.events: list[RunEvent] = []

    def snapshot(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        return self.nodes, list(self.pods)


@pytest.fixture
def gate() -> Any:
    cluster = Cluster([_node("n1", "4"), _node("n2", "4")], [_running("other", "n1", "3")])
    gate = GangGate(
        cluster.snapshot,
        lambda request: cluster.admitted.append(request.uid),
        cluster.events.append,
        interval=3600,  # the test decides when to look again
    )
    yield gate, cluster
    gate.close()


def test_a_gang_waits_pending_with_the_reason_and_is_admitted_once_all_fit(
    gate: Any, tmp_path: Path
) -> None:
    gate_, cluster = gate
    fn = _trainer(tmp_path)
    fn.spec.replicas = 2
    fn.with_requests(cpu=3)
    request = build_request(fn, Settings(), uid="d" * 32)
    pods = gang_pod_specs(request.pod)  # a launcher (nothing) and 2 workers of 3 CPUs
    assert not gate_.offer(request, pods)
    assert cluster.admitted == []
    assert gate_.held() == [request.uid]
    (event,) = cluster.events
    assert (event.state, event.reason) == (RunState.PENDING, "Unschedulable")
    assert event.message == (
        "waiting for room for all its pods at once: 3 pods must start together and 1 fit; "
        "the next: 0/2 nodes are available: 2 Insufficient cpu."
    )
    assert gate_.recheck() == []  # nothing changed: no new event either
    assert len(cluster.events) == 1
    cluster.pods.clear()  # the other workload ended
    assert gate_.recheck() == [request.uid]
    assert cluster.admitted == [request.uid]
    assert gate_.held() == []


def test_an_admitted_gang_holds_its_room_until_its_pods_are_placed(
    gate: Any, tmp_path: Path
) -> None:
    gate_, cluster = gate
    cluster.pods.clear()
    fn = _trainer(tmp_path)
    fn.spec.replicas = 2
    fn.with_requests(cpu=3)
    first = build_request(fn, Settings(), uid="e" * 32)
    second = build_request(fn, Settings(), uid="f" * 32)
    pods = gang_pod_specs(first.pod)
    assert gate_.offer(first, pods)
    # Its operator has made no pod yet, but its room is taken: the second waits.
    assert not gate_.offer(second, gang_pod_specs(second.pod))
    assert gate_.offer(first, pods)  # a retried launch goes through, its room counted once
    # Its pods placed: they are counted as pods now, and the second still does not fit.
    cluster.pods += [_running(f"w{i}", f"n{i + 1}", "3", first.uid) for i in range(2)]
    cluster.pods.append(_running("launcher", "n1", "0", first.uid))
    assert gate_.recheck() == []
    cluster.pods.clear()
    assert gate_.recheck() == [second.uid]


def test_a_held_gang_is_dropped_by_its_abort(gate: Any, tmp_path: Path) -> None:
    gate_, cluster = gate
    fn = _trainer(tmp_path)
    fn.spec.replicas = 4
    fn.with_requests(cpu=2)
    request = build_request(fn, Settings(), uid="1" * 32)
    gate_.offer(request, gang_pod_specs(request.pod))
    assert gate_.drop(request.uid)
    assert not gate_.drop(request.uid)
    cluster.pods.clear()
    assert gate_.recheck() == []


def test_the_gate_looks_again_when_woken(tmp_path: Path) -> None:
    cluster = Cluster([_node("n1", "4")], [_running("other", "n1", "4")])
    admitted = threading.Event()
    gate_ = GangGate(
        cluster.snapshot, lambda request: admitted.set(), cluster.events.append, interval=3600
    )
    try:
        fn = _trainer(tmp_path)
        fn.with_requests(cpu=1)
        request = build_request(fn, Settings(), uid="2" * 32)
        gate_.offer(request, gang_pod_specs(request.pod))
        cluster.pods.clear()
        gate_.wake()
        assert admitted.wait(10)
    finally:
        gate_.close()


def test_a_pod_group_asks_for_every_pod_and_belongs_to_its_workload(tmp_path: Path) -> None:
    fn = _trainer(tmp_path)
    fn.spec.replicas = 2
    fn.with_requests(cpu="500m", mem="1Gi")
    job = render(fn, Settings(), run=RunRef("3" * 32)).manifests[0]
    job["metadata"]["uid"] = "uid-1"
    group = podgroup.pod_group(job, gang_pod_specs(job))
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert group["metadata"]["name"] == job["metadata"]["name"]
    assert group["metadata"]["ownerReferences"] == [
        {
            "apiVersion": job["apiVersion"],
            "kind": "MPIJob",
            "name": job["metadata"]["name"],
            "uid": "uid-1",
        }
    ]
    assert group["spec"] == {
        "minMember": 3,
        "minResources": {"cpu": "1000m", "memory": str(2 * 2**30)},
    }
