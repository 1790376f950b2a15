"""The service on a real control plane: placement, thresholds, reasons, abort, and a restart
that loses nothing and duplicates nothing."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import runplane
from runplane import names
from runplane.config import load_settings
from runplane.rendering.bootstrap import bootstrap_configmap_name
from runplane.service.api import create_app
from runplane.service.server import Server
from testbed import serve, topology
from testbed.pytest_plugin import TestbedCluster, only_runplane_env

TOKEN = {"Authorization": "Bearer cluster-token-for-the-tests"}
IMAGE = "registry.example/runplane/job:1"
CODE = "def handler(context, x: int = 1):\n    return {'x': x}\n"


@pytest.fixture(scope="module")
def environment(
    testbed_cluster: TestbedCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    home = tmp_path_factory.mktemp("service")
    with only_runplane_env(
        testbed_cluster.service_env(home, "cluster-token-for-the-tests")
    ) as values:
        yield values


@pytest.fixture(scope="module")
def server(environment: dict[str, str]) -> Iterator[Server]:
    running = Server(load_settings())
    yield running
    running.close()


@pytest.fixture(scope="module")
def client(server: Server) -> TestClient:
    return TestClient(create_app(server))


@pytest.fixture(scope="module", autouse=True)
def lost_spot_run(
    client: TestClient, testbed_cluster: TestbedCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A run whose spot node is deleted at module start (reported lost at once, by the
    runtime's node watch)."""
    code = tmp_path_factory.mktemp("lost") / "lost.py"
    code.write_text(CODE)
    node = testbed_cluster.add_node("spot", f"svc-spot-{uuid.uuid4().hex[:6]}")
    fn = job(code, name="lost", annotations={"runplane.io/test-duration": "1h"})
    fn.with_preemption_mode("constrain").with_node_selection(
        node_selector={"kubernetes.io/hostname": node}
    )
    uid = submit(client, fn)
    wait(client, uid, {"running"})
    testbed_cluster.delete_node(node)
    return uid


@pytest.fixture(scope="module")
def code_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("code") / "job.py"
    path.write_text(CODE)
    return path


def job(
    code_file: Path, name: str = "job", annotations: dict[str, str] | None = None, **requests: Any
) -> runplane.Function:
    fn = runplane.code_to_function(name, filename=str(code_file), handler="handler", image=IMAGE)
    fn.with_requests(**(requests or {"cpu": "100m", "mem": "64Mi"}))
    if annotations:
        fn.spec.annotations = annotations
    return fn


def submit(client: TestClient, fn: runplane.Function, **body: Any) -> str:
    answer = client.post("/api/v1/runs", headers=TOKEN, json={"function": fn.to_dict(), **body})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["uid"])


def wait(
    client: TestClient, uid: str, states: set[str], timeout: float = 60, reason: str = ""
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    run: dict[str, Any] = {}
    while time.monotonic() < deadline:
        run = client.get(f"/api/v1/runs/{uid}", headers=TOKEN).json()
        if run["state"] in states and run["reason"].startswith(reason):
            return run
        time.sleep(0.1)
    raise AssertionError(f"run {uid} stayed {run.get('state')}: {run.get('status_text')}")


def wait_pod_phase(tb: TestbedCluster, uid: str, phase: str, timeout: float = 60) -> None:
    """Until the run's pod is in ``phase`` as the API server has it (not as runplane does)."""
    deadline = time.monotonic() + timeout
    while True:
        pods = tb.core.list_namespaced_pod(
            topology.RUNS_NAMESPACE, label_selector=f"{names.RUN_UID}={uid}"
        ).items
        if pods and all(p.status and p.status.phase == phase for p in pods):
            return
        assert time.monotonic() < deadline, f"the pod of run {uid} never reached {phase}"
        time.sleep(0.1)


def node_group(testbed_cluster: TestbedCluster, node: str) -> str:
    labels = testbed_cluster.core.read_node(node).metadata.labels or {}
    return str(labels.get(topology.GROUP_LABEL, ""))


@pytest.mark.parametrize(
    ("mode", "groups"),
    [("prevent", {"on-demand"}), ("constrain", {"spot"}), ("allow", {"on-demand", "spot"})],
)
def test_each_mode_lands_on_its_node_group(client, testbed_cluster, code_file, mode, groups):
    fn = job(code_file, annotations={"runplane.io/test-duration": "1s"})
    uid = submit(client, fn.with_preemption_mode(mode))
    run = wait(client, uid, {"completed"})
    assert node_group(testbed_cluster, run["attempts"][0]["node"]) in groups
    assert [t["state"] for t in run["transitions"]][-3:] == ["pending", "running", "completed"]


@pytest.mark.parametrize(
    ("case", "threshold", "text"),
    [
        ("impossible", "pending_not_scheduled", "0/"),
        ("image", "image_pull_backoff", "Back-off pulling image"),
        ("long", "running", ""),
    ],
)
def test_every_threshold_aborts_within_seconds(client, code_file, case, threshold, text):
    if case == "impossible":
        fn = job(code_file, cpu=500)
    elif case == "image":
        fn = job(code_file)
        fn.spec.image = "registry.example/does-not-exist:1"
    else:
        fn = job(code_file, annotations={"runplane.io/test-duration": "120s"})
    started = time.monotonic()
    uid = submit(client, fn, state_thresholds={threshold: "2s"})
    run = wait(client, uid, {"aborted"}, timeout=40)
    assert time.monotonic() - started < 25
    assert run["reason"] == "ThresholdExceeded"
    assert run["status_text"].startswith(
        f"Run aborted due to exceeded state threshold: {threshold}"
    )
    assert text in run["status_text"]


def test_oom_and_exit_codes_are_recorded(client, code_file):
    oom = submit(
        client,
        job(
            code_file,
            annotations={
                "runplane.io/test-exit-code": "137",
                "runplane.io/test-reason": "OOMKilled",
            },
        ),
    )
    failed = submit(
        client, job(code_file, name="fails", annotations={"runplane.io/test-exit-code": "3"})
    )
    oom_run = wait(client, oom, {"error"})
    assert oom_run["reason"] == "OOMKilled"
    assert oom_run["attempts"][0]["exit_code"] == 137
    failed_run = wait(client, failed, {"error"})
    assert failed_run["attempts"][0]["exit_code"] == 3


def test_abort_and_a_finished_run(client, code_file):
    uid = submit(client, job(code_file, annotations={"runplane.io/test-duration": "120s"}))
    wait(client, uid, {"running"})
    assert client.post(f"/api/v1/runs/{uid}/abort", headers=TOKEN).status_code == 200
    assert wait(client, uid, {"aborted"})["state"] == "aborted"
    assert client.post(f"/api/v1/runs/{uid}/abort", headers=TOKEN).status_code == 409


def test_a_restart_loses_nothing_and_duplicates_nothing(
    environment, testbed_cluster, code_file, tmp_path, monkeypatch
):
    """The service stops (as after a crash, without aborting anything); meanwhile a run
    finishes, a recorded run has no pod yet, and a stray labelled pod appears."""
    # A service of its own (database, instance label), so the module's service keeps watching.
    instance = f"svc-restart-{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("RUNPLANE_SERVICE__INSTANCE", instance)
    monkeypatch.setenv("RUNPLANE_SERVICE__DATABASE_URL", f"sqlite:///{tmp_path / 'restart.db'}")
    server = Server(load_settings())
    client = TestClient(create_app(server))
    finishing = submit(client, job(code_file, annotations={"runplane.io/test-duration": "3s"}))
    wait(client, finishing, {"running"})
    never_started = uuid.uuid4().hex
    stored = job(code_file, name="late", annotations={"runplane.io/test-duration": "1s"})
    server.runs.store.create(
        uid=never_started,
        project="default",
        name="late",
        runtime="kubernetes",
        function=stored.to_dict(),
        params={},
        inputs={},
        thresholds={},
        priority_class="medium",
        requests={},
        limits={},
        executor=None,
        owner="ci",
    )
    server.runs.runtime.close()  # the watch stops: nothing is aborted, pods keep running
    server.close()
    orphan = uuid.uuid4().hex
    testbed_cluster.core.create_namespaced_pod(
        topology.RUNS_NAMESPACE,
        {
            "metadata": {
                "name": f"stray-{orphan[:8]}",
                "labels": {names.RUN_UID: orphan, names.INSTANCE: instance},
            },
            "spec": {"containers": [{"name": "main", "image": IMAGE}]},
        },
    )
    wait_pod_phase(testbed_cluster, finishing, "Succeeded")  # while nobody watches

    restarted = Server(load_settings())
    try:
        again = TestClient(create_app(restarted))
        assert restarted.reconciliation is not None
        assert restarted.reconciliation.resubmitted == [never_started]
        assert restarted.reconciliation.orphans == [orphan]
        assert wait(again, finishing, {"completed"})["state"] == "completed"
        assert wait(again, never_started, {"completed"})["state"] == "completed"
        pods = testbed_cluster.core.list_namespaced_pod(
            topology.RUNS_NAMESPACE,
            label_selector=f"{names.RUN_UID} in ({finishing},{never_started})",
        ).items
        assert len(pods) == 2  # one pod per run: nothing was submitted twice
        deadline = time.monotonic() + 30
        while testbed_cluster.core.list_namespaced_pod(
            topology.RUNS_NAMESPACE, label_selector=f"{names.RUN_UID}={orphan}"
        ).items:
            assert time.monotonic() < deadline, "the orphan pod was not deleted"
            time.sleep(0.2)
    finally:
        restarted.close()


def test_deploy_serving_applies_and_replaces(client, testbed_cluster, code_file):
    serve = runplane.code_to_function(
        "predict", filename=str(code_file), handler="handler", kind="serving", image=IMAGE
    )
    serve.with_requests(cpu="100m", mem="64Mi").with_http(workers=2)
    serve.spec.min_replicas = 1
    serve.spec.max_replicas = 3
    answer = client.post("/api/v1/deployments", headers=TOKEN, json={"function": serve.to_dict()})
    assert answer.status_code == 201, answer.text
    assert answer.json()["applied"] == [
        f"ConfigMap/{bootstrap_configmap_name()}",  # what the pods mount comes first
        "Deployment/predict",
        "Service/predict",
        "HorizontalPodAutoscaler/predict",
    ]
    from kubernetes import client as k8s

    apps = k8s.AppsV1Api(testbed_cluster.api)
    scaling = k8s.AutoscalingV2Api(testbed_cluster.api)
    namespace = topology.RUNS_NAMESPACE
    assert apps.read_namespaced_deployment("predict", namespace).spec.replicas == 1
    assert (
        scaling.read_namespaced_horizontal_pod_autoscaler("predict", namespace).spec.max_replicas
        == 3
    )
    serve.spec.min_replicas = serve.spec.max_replicas = None
    serve.spec.replicas = 2
    again = client.post("/api/v1/deployments", headers=TOKEN, json={"function": serve.to_dict()})
    assert again.json()["applied"][1:] == ["Deployment/predict", "Service/predict"]
    assert apps.read_namespaced_deployment("predict", namespace).spec.replicas == 2
    names_left = [
        h.metadata.name for h in scaling.list_namespaced_horizontal_pod_autoscaler(namespace).items
    ]
    assert "predict" not in names_left  # not sticky: the autoscaler went with the range
    deadline = time.monotonic() + 30
    while apps.read_namespaced_deployment("predict", namespace).status.ready_replicas != 2:
        assert time.monotonic() < deadline, "the deployment's pods never became ready"
        time.sleep(0.2)
    apps.delete_namespaced_deployment("predict", namespace)
    k8s.CoreV1Api(testbed_cluster.api).delete_namespaced_service("predict", namespace)


def test_ready_once_the_pod_watch_has_listed_the_namespace(client):
    """Readiness on a cluster: the database answers and the pod watch listed and watches."""
    ready = client.get("/api/v1/ready")
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ready", "problems": []}


def test_cluster_summary_lists_node_groups(client):
    summary = client.get("/api/v1/cluster", headers=TOKEN).json()
    assert summary["runtime"] == "kubernetes"
    groups = {node["group"] for node in summary["nodes"]}
    assert {"system", "on-demand", "spot", "gpu"} <= groups
    gpu = next(node for node in summary["nodes"] if node["group"] == "gpu")
    assert gpu["allocatable"]["nvidia.com/gpu"] == 4
    assert all(node["free"]["cpu"] <= node["allocatable"]["cpu"] for node in summary["nodes"])


def test_high_priority_starts_first_and_evicts_nothing(client, testbed_cluster, code_file):
    node = testbed_cluster.add_node("on-demand", f"svc-prio-{uuid.uuid4().hex[:6]}")
    allocatable = testbed_cluster.core.read_node(node).status.allocatable["cpu"]
    more_than_half = f"{int(int(allocatable.rstrip('m')) * 0.6)}m"

    def pinned(name: str, seconds: str, priority: str) -> runplane.Function:
        fn = job(
            code_file,
            name=name,
            annotations={"runplane.io/test-duration": seconds},
            cpu=more_than_half,
        )
        return fn.with_node_selection(
            node_selector={"kubernetes.io/hostname": node}
        ).with_priority_class(priority)

    try:
        blocker = submit(client, pinned("blocker", "4s", "medium"))
        wait(client, blocker, {"running"})
        low = submit(client, pinned("low", "1s", "low"))
        wait(client, low, {"pending"}, reason="Unschedulable")  # queued behind the blocker
        high = submit(client, pinned("high", "1s", "high"))
        runs = {
            uid: wait(client, uid, {"completed", "error", "aborted"}, timeout=90)
            for uid in (blocker, low, high)
        }
        assert {run["state"] for run in runs.values()} == {"completed"}, runs
        assert runs[high]["started_at"] < runs[low]["started_at"]
        assert runs[blocker]["reason"] != "Preempted"  # the queue was reordered, nobody evicted
        assert len(runs[blocker]["attempts"]) == 1
    finally:
        testbed_cluster.delete_node(node)


def test_sigkill_of_the_service_loses_and_duplicates_nothing(
    environment, testbed_cluster, code_file, tmp_path
):
    import signal
    import subprocess

    import httpx

    instance = f"svc-killed-{uuid.uuid4().hex[:6]}"

    def start() -> tuple[subprocess.Popen[bytes], str]:
        # A database and instance label of its own: this service's reconciliation must not
        # take the module service's pods for orphans.
        env = dict(os.environ) | {
            "RUNPLANE_SERVICE__DATABASE_URL": f"sqlite:///{tmp_path / 'killed.db'}",
            "RUNPLANE_SERVICE__INSTANCE": instance,
        }
        process, base = serve.start_service(env, tmp_path / "service.log")
        return process, f"{base}/api/v1"

    process, url = start()
    fn = job(code_file, name="survivor", annotations={"runplane.io/test-duration": "3s"})
    uid = httpx.post(
        f"{url}/runs", headers=TOKEN, json={"function": fn.to_dict()}, timeout=30
    ).json()["uid"]
    deadline = time.monotonic() + 30
    while httpx.get(f"{url}/runs/{uid}", headers=TOKEN).json()["state"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    wait_pod_phase(testbed_cluster, uid, "Succeeded")  # while the service is dead
    process, url = start()
    try:
        deadline = time.monotonic() + 30
        while (run := httpx.get(f"{url}/runs/{uid}", headers=TOKEN).json())["state"] != "completed":
            assert time.monotonic() < deadline, run
            time.sleep(0.2)
        assert [t["state"] for t in run["transitions"]] == [
            "created",
            "pending",
            "running",
            "completed",
        ]
        pods = testbed_cluster.core.list_namespaced_pod(
            topology.RUNS_NAMESPACE, label_selector=f"{names.RUN_UID}={uid}"
        ).items
        assert len(pods) == 1
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_a_run_evicted_by_a_system_pod_is_recorded_preempted(
    client, testbed_cluster, code_file, make_pod
):
    node = testbed_cluster.add_node("on-demand", f"svc-evict-{uuid.uuid4().hex[:6]}")
    cpu = testbed_cluster.topology.group("on-demand").allocatable_cpu
    try:
        fn = job(
            code_file, name="victim", annotations={"runplane.io/test-duration": "120s"}, cpu=cpu
        ).with_node_selection(node_selector={"kubernetes.io/hostname": node})
        uid = submit(client, fn)
        wait(client, uid, {"running"})
        assert client.get(f"/api/v1/runs/{uid}/logs", headers=TOKEN).status_code == 200
        make_pod(
            f"core-{uid[:8]}",
            cpu=cpu,
            priorityClassName=topology.SYSTEM_PRIORITY_CLASS,
            nodeSelector={"kubernetes.io/hostname": node},
        )
        run = wait(client, uid, {"error"})
        assert run["reason"] == "Preempted"
        assert run["attempts"][0]["reason"] == "Preempted"
        assert run["status_text"].startswith("PreemptionByScheduler")
    finally:
        testbed_cluster.delete_node(node)


def test_a_run_on_a_deleted_spot_node_is_recorded_lost(client, lost_spot_run):
    run = wait(client, lost_spot_run, {"error", "completed", "aborted"}, timeout=30)
    assert run["state"] == "error", (run["reason"], run["status_text"], run["transitions"])
    assert run["reason"] == "NodeLost"
    (attempt,) = run["attempts"]
    assert (attempt["reason"], attempt["failure"]) == ("NodeLost", "node_lost")
    assert (attempt["node_group"], attempt["spot"]) == ("spot", True)


def test_a_run_the_cluster_refuses_ends_in_error(server, client, code_file, make_pod):
    uid = uuid.uuid4().hex
    make_pod(f"clash-{uid[:16]}-1")  # the run's pod name, taken by a pod that is not the run's
    server.runs.submit(job(code_file, name="clash"), uid=uid, owner="ci")
    run = wait(client, uid, {"error"})
    assert run["reason"] == "LaunchFailed"
    assert run["status_text"].startswith("the kubernetes runtime could not start the run: pod ")
    assert "already exists" in run["status_text"]


def test_the_service_makes_its_namespace(
    environment, testbed_cluster, code_file, tmp_path, monkeypatch
):
    namespace = f"runplane-new-{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("RUNPLANE_NAMESPACE", namespace)
    monkeypatch.setenv("RUNPLANE_SERVICE__DATABASE_URL", f"sqlite:///{tmp_path / 'ns.db'}")
    monkeypatch.setenv("RUNPLANE_SERVICE__INSTANCE", f"svc-ns-{uuid.uuid4().hex[:6]}")
    server = Server(load_settings())
    try:
        assert testbed_cluster.core.read_namespace(namespace).status.phase == "Active"
        client = TestClient(create_app(server))
        uid = submit(client, job(code_file, annotations={"runplane.io/test-duration": "1s"}))
        assert wait(client, uid, {"completed", "error"})["state"] == "completed"
    finally:
        server.close()
        testbed_cluster.core.delete_namespace(namespace)
