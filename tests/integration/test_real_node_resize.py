"""Live right-sizing on the testbed's real kubelet node: a running job's pod resized in place
through its ``resize`` subresource (restartCount 0, attempt 1), by a person or as its memory
nears the limit; a resize the node cannot grant refused in the API server's or the kubelet's
words and left to the OOM retry (with the size asked for); and the same job without
right-sizing OOM-killed and retried larger."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

import runplane
from runplane import names
from runplane.spec.quantity import resource_amount
from testbed.pytest_plugin import TestbedCluster
from testbed.realnode import RealNode
from tests.growing import GROWING
from tests.integration.test_real_node_runs import Service, real_node_service

MiB = 2**20
#: Long enough for the job to wait out a resize on a busy machine.
PATIENT = {"params": {"room_wait": "120"}}


@pytest.fixture(scope="module")
def service(
    testbed_cluster: TestbedCluster, real_node: RealNode, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    home = tmp_path_factory.mktemp("resize-service")
    with real_node_service(testbed_cluster, real_node, home, "resize") as running:
        yield running


@pytest.fixture(scope="module")
def core(testbed_cluster: TestbedCluster) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(testbed_cluster.api)


def _growing(tmp_path: Path, name: str) -> runplane.Function:
    path = tmp_path / f"{name.replace('-', '_')}.py"
    path.write_text(GROWING)
    fn = runplane.code_to_function(name, filename=str(path), handler="handler")
    return fn.with_requests(mem="64Mi", cpu="100m").with_limits(mem="128Mi")


def _pod(core: k8s.CoreV1Api, service: Service, uid: str) -> Any:
    """The run's one pod as the API has it now."""
    pods = core.list_namespaced_pod(service.namespace, label_selector=f"{names.RUN_UID}={uid}")
    (pod,) = pods.items
    return pod


def _status(pod: Any) -> Any:
    (container,) = pod.status.container_statuses
    return container


def test_a_person_resizes_a_running_pod_in_place(
    service: Service, core: k8s.CoreV1Api, tmp_path: Path
) -> None:
    uid = service.submit(_growing(tmp_path, "by-hand"), **PATIENT)
    service.wait(uid, {"running"}, timeout=120)
    done = service.http.post(f"{service.url}/runs/{uid}/resize", json={"mem": "512Mi"})
    assert done.status_code == 200, done.text
    assert (done.json()["memory_from"], done.json()["memory_to"]) == (128 * MiB, 512 * MiB)
    pod = _pod(core, service, uid)
    assert _status(pod).resources.limits["memory"] == "512Mi"  # applied, as the kubelet says
    run = service.wait(uid, {"completed", "error"}, timeout=240)
    assert run["state"] == "completed", run["status_text"]
    assert [a["number"] for a in run["attempts"]] == [1]
    assert _status(_pod(core, service, uid)).restart_count == 0
    assert [(r["mode"], r["outcome"]) for r in run["resizes"]] == [("manual", "applied")]


def test_a_growing_job_is_right_sized_in_place_and_never_restarted(
    service: Service, core: k8s.CoreV1Api, tmp_path: Path
) -> None:
    fn = _growing(tmp_path, "right-sized").with_autoresize(max_mem="1Gi", step=2, window="1s")
    uid = service.submit(fn, **PATIENT)
    run = service.wait(uid, {"completed", "error"}, timeout=300)
    assert run["state"] == "completed", run["status_text"]
    assert [a["number"] for a in run["attempts"]] == [1]
    grown = [r for r in run["resizes"] if r["outcome"] == "applied"]
    assert 1 <= len(grown) <= 2, run["resizes"]
    assert (grown[0]["memory_from"], grown[0]["memory_to"]) == (128 * MiB, 256 * MiB)
    pod = _pod(core, service, uid)
    assert _status(pod).restart_count == 0
    assert {p.resource_name: p.restart_policy for p in pod.spec.containers[0].resize_policy} == {
        "cpu": "NotRequired",
        "memory": "NotRequired",
    }


def test_a_resize_the_node_cannot_grant_is_refused_and_the_oom_kill_retried(
    service: Service, core: k8s.CoreV1Api, tmp_path: Path
) -> None:
    fn = _growing(tmp_path, "too-big").with_retries(2, on=["oom"], backoff=0, memory_factor=4)
    uid = service.submit(fn, params={"room_wait": "30"})
    service.wait(uid, {"running"}, timeout=120)
    refused = service.http.post(f"{service.url}/runs/{uid}/resize", json={"mem": "64Ti"})
    assert refused.status_code == 409, refused.text
    # Above the node's allocatable: the API server refuses it before the kubelet is asked.
    assert "node didn't have enough allocatable resources: memory" in refused.json()["message"]
    pod = _pod(core, service, uid)
    assert pod.spec.containers[0].resources.limits["memory"] == "128Mi"  # taken back
    run = service.wait(uid, {"completed", "error"}, timeout=300)
    assert run["state"] == "completed", run["status_text"]
    first, second = run["attempts"]
    assert (first["reason"], first["failure"]) == ("OOMKilled", "oom")
    assert second["limits"]["memory"] == "512Mi"
    assert run["resizes"] == []  # nothing was applied


def test_without_right_sizing_the_job_is_oom_killed_and_retried(
    service: Service, tmp_path: Path
) -> None:
    fn = _growing(tmp_path, "killed").with_retries(2, on=["oom"], backoff=0, memory_factor=4)
    uid = service.submit(fn)
    run = service.wait(uid, {"completed", "error"}, timeout=300)
    assert run["state"] == "completed", run["status_text"]
    first, second = run["attempts"]
    assert (first["reason"], first["failure"]) == ("OOMKilled", "oom")
    assert second["limits"]["memory"] == "512Mi"


def test_right_sizing_the_node_cannot_grant_falls_back_to_a_larger_retry(
    service: Service, core: k8s.CoreV1Api, real_node: RealNode, tmp_path: Path
) -> None:
    fn = _growing(tmp_path, "no-room").with_autoresize(max_mem="1Gi", step=2, window="1s")
    fn.with_retries(2, on=["oom"], backoff=0)
    uid = service.submit(fn, params={"room_wait": "60"})
    service.wait(uid, {"running"}, timeout=120)
    filler = _fill(core, service, real_node)  # the node's requests full: a resize waits
    try:
        deadline = time.monotonic() + 120
        while not _fallbacks(run := service.get(uid)):
            assert time.monotonic() < deadline, f"no fallback was recorded: {run}"
            time.sleep(0.2)
        (fallback,) = run["resizes"]
        assert (fallback["memory_from"], fallback["memory_to"]) == (128 * MiB, 256 * MiB)
        assert "Deferred" in fallback["why"] or "Infeasible" in fallback["why"], fallback
    finally:
        core.delete_namespaced_pod(filler, service.namespace, grace_period_seconds=0)
    run = service.wait(uid, {"completed", "error"}, timeout=300)
    assert run["state"] == "completed", run["status_text"]
    first, second = run["attempts"]
    assert (first["reason"], first["failure"]) == ("OOMKilled", "oom")
    assert second["limits"]["memory"] == "256Mi"  # the size right-sizing asked for
    assert "the size live right-sizing asked for" in second["adjustments"]


def _fallbacks(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in run["resizes"] if r["outcome"] == "fallback"]


def _fill(core: k8s.CoreV1Api, service: Service, real_node: RealNode) -> str:
    """A pod that requests all but 32 MiB of the real node's unrequested memory (and uses
    none of it), Running before this returns; its name."""
    node = core.read_node(real_node.name)
    allocatable = resource_amount("memory", node.status.allocatable["memory"])
    pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={real_node.name}")
    requested = sum(
        resource_amount("memory", (c.resources.requests or {}).get("memory", 0))
        for pod in pods.items
        if pod.status.phase not in ("Succeeded", "Failed")
        for c in pod.spec.containers
    )
    name = f"filler-{uuid.uuid4().hex[:6]}"
    body = {
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": real_node.node_selector,
            "tolerations": [real_node.toleration],
            "containers": [
                {
                    "name": "sleep",
                    "image": real_node.image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["python3", "-c", "import time; time.sleep(3600)"],
                    "resources": {"requests": {"memory": str(allocatable - requested - 32 * MiB)}},
                }
            ],
        },
    }
    core.create_namespaced_pod(service.namespace, body)
    deadline = time.monotonic() + 120
    while core.read_namespaced_pod(name, service.namespace).status.phase != "Running":
        assert time.monotonic() < deadline, "the filler pod did not start"
        time.sleep(0.2)
    return name
