"""The other runtimes' objects against the real API server: the operators' CRDs installed
(testbed/crds), rendered MPIJob, SparkApplication and DaskCluster objects accepted as rendered,
and every pod their templates make placed by the real scheduler as the preemption mode says.

No operator runs here: each test does the operator's part of making pods from the templates,
so what is proved is the rendering and the placement, not the operators."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

import runplane
from runplane import names
from runplane.config import Settings
from runplane.rendering import RunRef, render
from runplane.runs import RunState
from runplane.runtimes.events import RunEvent
from runplane.runtimes.kubernetes import KubernetesRuntime
from runplane.runtimes.request import build_request
from testbed import kube, topology
from testbed.dask_operator import install_crds
from testbed.pytest_plugin import TestbedCluster

pytestmark = pytest.mark.testbed

INSTALLED = (
    "kubeflow.org_mpijobs.v2beta1.yaml",
    "sparkoperator.k8s.io_sparkapplications.yaml",
    "kubernetes.dask.org_daskclusters.yaml",
    "scheduling.x-k8s.io_podgroups.yaml",
)
LABEL = "runplane.io/test"
TEST = f"crd-{uuid.uuid4().hex[:8]}"


#: The custom objects this module created (group, version, plural, name): deleted at its end,
#: or an operator installed by a later test would make their pods on the shared cluster.
_CREATED: list[tuple[str, str, str, str]] = []


@pytest.fixture(scope="module")
def crds(testbed_cluster: TestbedCluster) -> Iterator[TestbedCluster]:
    install_crds(testbed_cluster, INSTALLED)
    yield testbed_cluster
    objects = client.CustomObjectsApi(testbed_cluster.api)
    for group, version, plural, name in _CREATED:
        try:
            objects.delete_namespaced_custom_object(
                group, version, testbed_cluster.namespace, plural, name
            )
        except ApiException as error:
            if error.status != 404:
                raise
    core = testbed_cluster.core
    core.delete_collection_namespaced_pod(
        testbed_cluster.namespace, label_selector=f"{LABEL}={TEST}", grace_period_seconds=0
    )


def _create(tb: TestbedCluster, manifest: dict[str, Any], plural: str) -> dict[str, Any]:
    group, version = manifest["apiVersion"].split("/")
    objects = client.CustomObjectsApi(tb.api)
    created: dict[str, Any] = objects.create_namespaced_custom_object(
        group, version, tb.namespace, plural, manifest
    )
    _CREATED.append((group, version, plural, created["metadata"]["name"]))
    return created


def _as_operator(
    tb: TestbedCluster,
    template: dict[str, Any],
    name: str,
    annotations: dict[str, str] | None = None,
) -> str:
    """A pod from a replica template, as the operator would make it."""
    metadata = {
        "name": name,
        "namespace": tb.namespace,
        "labels": {**template["metadata"]["labels"], LABEL: TEST},
        "annotations": dict(annotations or {}),
    }
    spec = {**template["spec"], "restartPolicy": "Never"}
    spec["containers"] = [{**spec["containers"][0], "image": "registry.example/mpi:1"}]
    tb.core.create_namespaced_pod(tb.namespace, {"metadata": metadata, "spec": spec})
    return name


def _group(tb: TestbedCluster, pod: str) -> str:
    placed = tb.wait_pod(pod, lambda p: bool(kube.node_name(p)), what="scheduled")
    node = tb.core.read_node(kube.node_name(placed))
    return ((node.metadata.labels if node.metadata else None) or {}).get(topology.GROUP_LABEL, "")


def _trainer(tmp_path: Path, mode: str) -> runplane.Function:
    code = tmp_path / "train.py"
    code.write_text("def train(context):\n    return 1\n")
    fn = runplane.code_to_function("trainer", filename=str(code), kind="mpijob", handler="train")
    fn.spec.replicas = 3
    fn.with_requests(cpu=1, mem="1Gi").with_limits(cpu=2, mem="2Gi")
    return fn.with_preemption_mode(mode).with_priority_class("high")


@pytest.mark.parametrize(
    ("mode", "groups"),
    [("prevent", {"on-demand"}), ("constrain", {"spot"}), ("allow", {"on-demand", "spot"})],
)
def test_an_mpijob_is_accepted_and_every_pod_lands_as_its_mode_says(
    crds: TestbedCluster, tmp_path: Path, mode: str, groups: set[str]
) -> None:
    tb = crds
    settings = Settings(namespace=tb.namespace)
    uid = uuid.uuid4().hex
    job = render(_trainer(tmp_path, mode), settings, run=RunRef(uid)).manifests[0]
    created = _create(tb, job, "mpijobs")
    assert created["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 3
    worker = created["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    assert worker["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "2", "memory": "2Gi"}
    assert worker["metadata"]["labels"][names.RUN_UID] == uid
    pods = [_as_operator(tb, worker, f"{TEST}-{mode}-worker-{i}") for i in range(3)]
    launcher = created["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    pods.append(_as_operator(tb, launcher, f"{TEST}-{mode}-launcher"))
    assert {_group(tb, pod) for pod in pods} <= groups
    for pod in pods:
        assert tb.read_pod(pod).spec.priority_class_name == "high"


def test_a_sparkapplication_and_a_daskcluster_are_accepted(
    crds: TestbedCluster, tmp_path: Path
) -> None:
    tb = crds
    settings = Settings(namespace=tb.namespace)
    code = tmp_path / "wc.py"
    code.write_text("def count(context):\n    return 1\n")
    spark = runplane.code_to_function("wc", filename=str(code), kind="spark", handler="count")
    spark.spec.replicas = 2
    spark.with_executor_requests(cpu=1, mem="512Mi").with_preemption_mode("constrain")
    app = render(spark, settings, run=RunRef(uuid.uuid4().hex)).manifests[0]
    created = _create(tb, app, "sparkapplications")
    assert created["spec"]["executor"]["instances"] == 2
    assert {
        "key": "app.iguazio.com/lifecycle",
        "operator": "Equal",
        "value": "preemptible",
        "effect": "NoSchedule",
    } in created["spec"]["executor"]["tolerations"]

    dask = runplane.new_function(f"{TEST}-dask", kind="dask")
    dask.spec.min_replicas, dask.spec.max_replicas = 1, 3
    dask.with_worker_requests(cpu=1, mem="1Gi").with_worker_limits(mem="1Gi")
    cluster = render(dask, settings).manifests[0]
    created = _create(tb, cluster, "daskclusters")
    worker = created["spec"]["worker"]
    assert worker["replicas"] == 1
    pod = _as_operator(tb, worker, f"{TEST}-dask-worker")
    assert _group(tb, pod) == "on-demand"  # prevent, the default mode


class Events:
    """The runtime's events as the service reads them; a test waits for one."""

    def __init__(self, runtime: KubernetesRuntime) -> None:
        self.seen: list[RunEvent] = []
        self._changed = threading.Condition()

        async def consume() -> None:
            async for event in runtime.events():
                with self._changed:
                    self.seen.append(event)
                    self._changed.notify_all()

        self.reader = threading.Thread(target=lambda: asyncio.run(consume()), daemon=True)
        self.reader.start()

    def of(self, uid: str) -> list[RunEvent]:
        with self._changed:
            return [e for e in self.seen if e.uid == uid]

    def wait(self, uid: str, test: Callable[[RunEvent], bool], timeout: float = 30) -> RunEvent:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for event in self.seen:
                    if event.uid == uid and test(event):
                        return event
                remaining = deadline - time.monotonic()
                assert remaining > 0, [(e.state, e.reason, e.message) for e in self.of(uid)]
                self._changed.wait(remaining)


@pytest.fixture(scope="module")
def runtime(crds: TestbedCluster) -> Iterator[tuple[KubernetesRuntime, Events, TestbedCluster]]:
    settings = Settings(namespace=crds.namespace)
    rt = KubernetesRuntime(settings, api=crds.api, instance=TEST, grace_period_seconds=0)
    events = Events(rt)
    assert rt.watch.wait_synced(10)
    yield rt, events, crds
    rt.close()
    events.reader.join(10)


def _job(tb: TestbedCluster, uid: str) -> dict[str, Any]:
    objects = client.CustomObjectsApi(tb.api)
    found: dict[str, Any] = objects.get_namespaced_custom_object(
        "kubeflow.org", "v2beta1", tb.namespace, "mpijobs", f"trainer-{uid[:16]}-1"
    )
    return found


def _operator_says(tb: TestbedCluster, uid: str, *conditions: tuple[str, str, str]) -> None:
    """What the MPI Operator records on the MPIJob: its conditions (type, reason, message)."""
    client.CustomObjectsApi(tb.api).patch_namespaced_custom_object_status(
        "kubeflow.org",
        "v2beta1",
        tb.namespace,
        "mpijobs",
        f"trainer-{uid[:16]}-1",
        {
            "status": {
                "conditions": [
                    {"type": kind, "status": "True", "reason": reason, "message": message}
                    for kind, reason, message in conditions
                ]
            }
        },
    )


def test_an_mpijob_run_ends_as_its_operator_says_with_its_launcher_s_report(
    runtime: tuple[KubernetesRuntime, Events, TestbedCluster], tmp_path: Path
) -> None:
    rt, events, testbed = runtime
    tb_settings = Settings(namespace=topology.RUNS_NAMESPACE)
    fn = _trainer(tmp_path, "prevent")
    fn.spec.replicas = 2
    uid = uuid.uuid4().hex
    request = build_request(fn, tb_settings, uid=uid)
    rt.check(request)
    rt.launch(request)
    rt.launch(request)  # a retried launch finds its own MPIJob
    job = _job(testbed, uid)
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    assert worker["metadata"]["labels"][names.INSTANCE] == TEST  # its pods are watched
    assert rt.existing()[uid] == [f"MPIJob/trainer-{uid[:16]}-1"]

    # A worker that cannot be placed tells why the run waits.
    big = {**worker, "spec": {**worker["spec"]}}
    big["spec"]["containers"] = [
        {**worker["spec"]["containers"][0], "resources": {"requests": {"cpu": "100"}}}
    ]
    _as_operator(testbed, big, f"{TEST}-run-worker-big")
    waiting = events.wait(uid, lambda e: "Insufficient cpu" in e.message)
    assert waiting.state is RunState.PENDING
    testbed.core.delete_namespaced_pod(f"{TEST}-run-worker-big", testbed.namespace)

    for index in range(2):
        _as_operator(testbed, worker, f"{TEST}-run-worker-{index}")
    _as_operator(testbed, launcher, f"{TEST}-run-launcher", {"runplane.io/test-duration": "2s"})
    created = ("Created", "MPIJobCreated", "MPIJob created.")
    _operator_says(testbed, uid, created, ("Running", "MPIJobRunning", "MPIJob is running."))
    events.wait(uid, lambda e: e.state is RunState.RUNNING)
    # The launcher's pod ending is not the run's end: its operator has not said so yet.
    deadline = time.monotonic() + 60
    while testbed.core.read_namespaced_pod(
        f"{TEST}-run-launcher", testbed.namespace
    ).status.phase not in ("Succeeded", "Failed"):
        assert time.monotonic() < deadline, "kwok never ended the launcher"
        time.sleep(0.1)
    # a run launched now reports after the launcher's end, had it been published (the
    # watch keeps order)
    code = tmp_path / "marker.py"
    code.write_text("def handler(context):\n    return 1\n")
    marker = uuid.uuid4().hex
    rt.launch(
        build_request(
            runplane.code_to_function("marker", filename=str(code), handler="handler"),
            tb_settings,
            uid=marker,
        )
    )
    events.wait(marker, lambda e: e.state is RunState.PENDING)
    rt.abort(marker, "Aborted", "done")
    assert not any(e.state.terminal for e in events.of(uid)), events.of(uid)
    _operator_says(testbed, uid, created, ("Succeeded", "MPIJobSucceeded", "MPIJob completed."))
    done = events.wait(uid, lambda e: e.state.terminal, timeout=60)
    assert (done.state, done.reason) == (RunState.COMPLETED, "Completed")
    states = [e.state for e in events.of(uid)]
    assert RunState.RUNNING in states
    assert states.count(RunState.COMPLETED) == 1
    # Workers still running (or deleted by the operator) change nothing after the end: a
    # run launched after the delete reports, and the watch keeps order, so nothing came.
    after = len(events.of(uid))
    testbed.core.delete_namespaced_pod(
        f"{TEST}-run-worker-0", testbed.namespace, grace_period_seconds=0
    )
    while testbed.core.list_namespaced_pod(
        testbed.namespace, field_selector=f"metadata.name={TEST}-run-worker-0"
    ).items:
        time.sleep(0.05)
    marker = uuid.uuid4().hex
    code = tmp_path / "marker.py"
    code.write_text("def handler(context):\n    return 1\n")
    fn_marker = runplane.code_to_function("marker", filename=str(code), handler="handler")
    rt.launch(build_request(fn_marker, tb_settings, uid=marker))
    events.wait(marker, lambda e: e.state is RunState.PENDING)
    assert len(events.of(uid)) == after
    rt.abort(marker, "Aborted", "done")


def test_aborting_an_mpijob_deletes_it(
    runtime: tuple[KubernetesRuntime, Events, TestbedCluster], tmp_path: Path
) -> None:
    rt, events, testbed = runtime
    uid = uuid.uuid4().hex
    request = build_request(
        _trainer(tmp_path, "prevent"), Settings(namespace=topology.RUNS_NAMESPACE), uid=uid
    )
    rt.launch(request)
    assert _job(testbed, uid)
    assert rt.abort(uid, "Aborted", "aborted by request")
    ended = events.wait(uid, lambda e: e.state.terminal)
    assert (ended.state, ended.message) == (RunState.ABORTED, "aborted by request")
    with pytest.raises(ApiException) as gone:
        _job(testbed, uid)
    assert gone.value.status == 404
    assert not rt.abort(uid, "Aborted", "again")


def test_a_spark_run_follows_its_driver(
    runtime: tuple[KubernetesRuntime, Events, TestbedCluster], tmp_path: Path
) -> None:
    rt, events, testbed = runtime
    code = tmp_path / "wc.py"
    code.write_text("def count(context):\n    return 1\n")
    fn = runplane.code_to_function("wc", filename=str(code), kind="spark", handler="count")
    fn.spec.replicas = 2
    fn.with_executor_requests(cpu="100m", mem="128Mi")
    uid = uuid.uuid4().hex
    rt.launch(build_request(fn, Settings(namespace=topology.RUNS_NAMESPACE), uid=uid))
    objects = client.CustomObjectsApi(testbed.api)
    app = objects.get_namespaced_custom_object(
        "sparkoperator.k8s.io",
        "v1beta2",
        testbed.namespace,
        "sparkapplications",
        f"wc-{uid[:16]}-1",
    )
    driver = app["spec"]["driver"]
    assert driver["labels"][names.INSTANCE] == TEST
    assert driver["labels"][names.ROLE] == "driver"
    # The driver pod as the operator makes it: its labels, Spark's container name.
    testbed.core.create_namespaced_pod(
        testbed.namespace,
        {
            "metadata": {
                "name": f"{TEST}-wc-driver",
                "labels": {**driver["labels"], LABEL: TEST},
                "annotations": {"runplane.io/test-duration": "2s"},
            },
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "spark-kubernetes-driver", "image": "spark:3.5.3"}],
            },
        },
    )
    done = events.wait(uid, lambda e: e.state.terminal, timeout=60)
    assert (done.state, done.reason) == (RunState.COMPLETED, "Completed")
    assert RunState.RUNNING in [e.state for e in events.of(uid)]
    assert rt.abort(uid, "Aborted", "cleanup")  # the finished application is deleted...
    assert [e.state for e in events.of(uid)].count(RunState.ABORTED) == 0  # ...and stays done


def _wait_mpijob(tb: TestbedCluster, name: str, timeout: float = 30) -> dict[str, Any]:
    """The MPIJob once it exists, awaited on a watch."""
    objects = client.CustomObjectsApi(tb.api)
    selector = f"metadata.name={name}"
    deadline = time.monotonic() + timeout
    while True:
        listed = objects.list_namespaced_custom_object(
            "kubeflow.org", "v2beta1", tb.namespace, "mpijobs", field_selector=selector
        )
        if listed["items"]:
            return dict(listed["items"][0])
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"MPIJob {name} was never created"
        for event in watch.Watch().stream(  # type: ignore[no-untyped-call]
            objects.list_namespaced_custom_object,
            "kubeflow.org",
            "v2beta1",
            tb.namespace,
            "mpijobs",
            field_selector=selector,
            resource_version=listed["metadata"]["resourceVersion"],
            timeout_seconds=max(1, int(remaining)),
        ):
            if event["type"] == "ADDED":
                return dict(event["object"])


def _gang_node(tb: TestbedCluster, name: str) -> str:
    """An on-demand node only this test's runs select (a label of the test's own)."""
    manifest = topology.node_manifest(tb.topology.group("on-demand"), name)
    manifest["metadata"]["labels"][LABEL] = TEST
    topology.create_nodes(tb.api, [manifest])
    topology.wait_nodes_ready(tb.api, [name], timeout=60)
    return name


def test_an_mpijob_is_held_until_all_its_pods_fit_then_submitted_with_its_pod_group(
    runtime: tuple[KubernetesRuntime, Events, TestbedCluster], tmp_path: Path
) -> None:
    rt, events, testbed = runtime
    nodes = [_gang_node(testbed, f"{TEST}-gang-a")]
    try:
        fn = _trainer(tmp_path, "prevent")
        fn.spec.replicas = 2  # a launcher and two workers of 5 CPUs: one worker per node
        fn.with_limits(cpu=5, mem="1Gi").with_requests(cpu=5, mem="1Gi")
        fn.with_node_selection(node_selector={LABEL: TEST})
        uid = uuid.uuid4().hex
        request = build_request(fn, Settings(namespace=topology.RUNS_NAMESPACE), uid=uid)
        rt.launch(request)
        held = events.wait(uid, lambda e: e.state is RunState.PENDING)
        assert held.reason == "Unschedulable"
        assert held.message.startswith(
            "waiting for room for all its pods at once: 3 pods must start together and 1 fit; "
            "the next: 0/"
        )
        assert "Insufficient cpu" in held.message
        assert rt.held() == [uid]
        with pytest.raises(ApiException) as absent:
            _job(testbed, uid)  # nothing of it is on the cluster while it waits
        assert absent.value.status == 404

        # A second node with room: the node watch wakes the check, the run goes whole.
        nodes.append(_gang_node(testbed, f"{TEST}-gang-b"))
        job = _wait_mpijob(testbed, f"trainer-{uid[:16]}-1")
        assert rt.held() == []
        group_name = job["metadata"]["name"]
        for replica in job["spec"]["mpiReplicaSpecs"].values():
            assert (
                replica["template"]["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"]
                == group_name
            )
        group = client.CustomObjectsApi(testbed.api).get_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", testbed.namespace, "podgroups", group_name
        )
        assert group["spec"]["minMember"] == 3
        assert group["spec"]["minResources"]["cpu"] == "10000m"
        assert [o["uid"] for o in group["metadata"]["ownerReferences"]] == [job["metadata"]["uid"]]
        assert rt.abort(uid, "Aborted", "done")

        # A held run aborted: nothing was on the cluster, it ends at once.
        other = uuid.uuid4().hex
        fn.spec.replicas = 3
        rt.launch(build_request(fn, Settings(namespace=topology.RUNS_NAMESPACE), uid=other))
        events.wait(other, lambda e: e.state is RunState.PENDING)
        assert rt.abort(other, "Aborted", "no room")
        ended = events.wait(other, lambda e: e.state.terminal)
        assert (ended.state, ended.message) == (RunState.ABORTED, "no room")
        assert rt.held() == []
    finally:
        for node in nodes:
            testbed.delete_node(node)
