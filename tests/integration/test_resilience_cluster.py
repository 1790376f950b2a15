"""Retries on a real control plane: a run whose spot node is deleted runs again on another node
within seconds, two spot preemptions move a run to on-demand nodes, a run preempted by a
higher class is retried, an abort never is, and a service killed between attempts neither
loses nor repeats one."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from kubernetes import client as k8s

import runplane
from runplane import names
from runplane.config import load_settings
from runplane.service.api import create_app
from runplane.service.server import Server
from testbed import serve, topology
from testbed.pytest_plugin import TestbedCluster, only_runplane_env

pytestmark = pytest.mark.testbed

TOKEN = {"Authorization": "Bearer resilience-token-for-the-tests"}
IMAGE = "registry.example/runplane/job:1"
CODE = "def handler(context):\n    return {'done': True}\n"
ENDED = {"completed", "error", "aborted"}
#: The goal: a lost spot node's run is running again elsewhere within this many seconds.
REPLACEMENT_GOAL = 10.0


@pytest.fixture(scope="module")
def environment(
    testbed_cluster: TestbedCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    home = tmp_path_factory.mktemp("resilience")
    with only_runplane_env(
        testbed_cluster.service_env(home, "resilience-token-for-the-tests")
    ) as values:
        yield values


@pytest.fixture(scope="module")
def client(environment: dict[str, str]) -> Iterator[TestClient]:
    server = Server(load_settings())
    yield TestClient(create_app(server))
    server.close()


@pytest.fixture(scope="module")
def code_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("code") / "job.py"
    path.write_text(CODE)
    return path


def job(code_file: Path, name: str, duration: str = "", **requests: Any) -> runplane.Function:
    fn = runplane.code_to_function(name, filename=str(code_file), handler="handler", image=IMAGE)
    fn.with_requests(**(requests or {"cpu": "100m", "mem": "64Mi"}))
    if duration:
        fn.spec.annotations = {"runplane.io/test-duration": duration}
    return fn


def on_nodes(fn: runplane.Function, nodes: list[str]) -> runplane.Function:
    """Only these nodes (the preemption mode adds its own terms to this one)."""
    term = {
        "matchExpressions": [{"key": topology.HOSTNAME_LABEL, "operator": "In", "values": nodes}]
    }
    return fn.with_node_selection(
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
            }
        }
    )


def submit(client: TestClient, fn: runplane.Function) -> str:
    answer = client.post("/api/v1/runs", headers=TOKEN, json={"function": fn.to_dict()})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["uid"])


def until(client: TestClient, uid: str, predicate: Any, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while not predicate(run := client.get(f"/api/v1/runs/{uid}", headers=TOKEN).json()):
        assert time.monotonic() < deadline, json.dumps(run, indent=1)[-3000:]
        time.sleep(0.05)
    return run  # type: ignore[no-any-return]


def running(number: int) -> Any:
    """Attempt ``number`` has started (the service recorded it running)."""

    def check(run: dict[str, Any]) -> bool:
        attempts = run["attempts"]
        return bool(
            len(attempts) >= number
            and attempts[number - 1]["started_at"]
            and run["state"] == "running"
        )

    return check


def pods(tb: TestbedCluster, uid: str) -> list[str]:
    found = tb.core.list_namespaced_pod(tb.namespace, label_selector=f"{names.RUN_UID}={uid}")
    return sorted(p.metadata.name for p in found.items if p.metadata)


def fresh_nodes(tb: TestbedCluster, group: str, count: int) -> list[str]:
    tag = uuid.uuid4().hex[:6]
    return [tb.add_node(group, f"res-{group}-{tag}-{i}") for i in range(count)]


def test_a_run_on_a_lost_spot_node_runs_again_on_another_within_seconds(
    client, testbed_cluster, code_file
):
    nodes = fresh_nodes(testbed_cluster, "spot", 2)
    try:
        fn = on_nodes(job(code_file, "lost", duration="4s"), nodes)
        fn.with_preemption_mode("constrain").with_retries(3, backoff=0)
        uid = submit(client, fn)
        first = until(client, uid, running(1))["attempts"][0]
        lost = time.monotonic()
        testbed_cluster.delete_node(first["node"])
        replaced = until(client, uid, running(2))
        elapsed = time.monotonic() - lost
        assert elapsed <= REPLACEMENT_GOAL, elapsed
        ended, second = replaced["attempts"]
        assert (ended["failure"], ended["reason"]) == ("node_lost", "NodeLost")
        assert (ended["node_group"], ended["spot"]) == ("spot", True)
        assert second["node"] in nodes
        assert second["node"] != first["node"]
        assert (second["node_group"], second["spot"]) == ("spot", True)
        run = until(client, uid, lambda r: r["state"] in ENDED)
        assert run["state"] == "completed", run["status_text"]
        assert len(run["attempts"]) == 2
        assert pods(testbed_cluster, uid) in ([], [f"lost-{uid[:16]}-2"])
    finally:
        for node in nodes:
            testbed_cluster.delete_node(node)


def evict(tb: TestbedCluster, name: str) -> None:
    """What a drain or a spot interruption handler does: the eviction API."""
    body = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name=name, namespace=tb.namespace))
    tb.core.create_namespaced_pod_eviction(name, tb.namespace, body)


def test_after_two_spot_preemptions_a_constrain_run_moves_to_on_demand(
    client, testbed_cluster, code_file
):
    fn = job(code_file, "hopper", duration="3s").with_preemption_mode("constrain")
    fn.with_retries(4, backoff=0)
    uid = submit(client, fn)
    for number in (1, 2):
        until(client, uid, running(number))
        evict(testbed_cluster, f"hopper-{uid[:16]}-{number}")
    run = until(client, uid, lambda r: r["state"] in ENDED)
    assert run["state"] == "completed", run["status_text"]
    first, second, third = run["attempts"]
    for spot_attempt in (first, second):
        assert (spot_attempt["failure"], spot_attempt["reason"]) == ("preempted", "Preempted")
        assert spot_attempt["message"].startswith("EvictionByEvictionAPI")
        assert (spot_attempt["node_group"], spot_attempt["preemption_mode"]) == (
            "spot",
            "constrain",
        )
    assert second["adjustments"] == ""  # one preemption: still spot
    assert third["preemption_mode"] == "prevent"
    assert third["adjustments"].startswith("on-demand nodes (mode prevent): preempted 2 times")
    assert (third["node_group"], third["spot"]) == ("on-demand", False)


def test_a_run_preempted_by_a_higher_class_is_retried(client, testbed_cluster, code_file, make_pod):
    (node,) = fresh_nodes(testbed_cluster, "on-demand", 1)
    cpu = testbed_cluster.topology.group("on-demand").allocatable_cpu
    try:
        fn = job(code_file, "victim", duration="2s", cpu=cpu)
        fn.with_node_selection(node_selector={topology.HOSTNAME_LABEL: node})
        fn.with_retries(2, backoff=0)
        uid = submit(client, fn)
        until(client, uid, running(1))
        core = make_pod(
            f"core-{uid[:8]}",
            cpu=cpu,
            priorityClassName=topology.SYSTEM_PRIORITY_CLASS,
            nodeSelector={topology.HOSTNAME_LABEL: node},
        )
        waiting = until(client, uid, lambda r: len(r["attempts"]) == 2)
        assert waiting["attempts"][0]["failure"] == "preempted"
        assert waiting["attempts"][0]["message"].startswith("PreemptionByScheduler")
        assert waiting["attempts"][0]["spot"] is False
        testbed_cluster.core.delete_namespaced_pod(
            core, testbed_cluster.namespace, grace_period_seconds=0
        )
        run = until(client, uid, lambda r: r["state"] in ENDED)
        assert run["state"] == "completed", run["status_text"]
        assert run["attempts"][1]["node"] == node
    finally:
        testbed_cluster.delete_node(node)


def test_an_aborted_run_is_never_retried(client, testbed_cluster, code_file):
    every = ["preempted", "node_lost", "oom", "image_pull", "unschedulable", "deadline", "error"]
    fn = job(code_file, "stopped", duration="120s").with_retries(5, on=every, backoff=0)
    uid = submit(client, fn)
    until(client, uid, running(1))
    assert client.post(f"/api/v1/runs/{uid}/abort", headers=TOKEN).status_code == 200
    run = until(client, uid, lambda r: r["state"] in ENDED)
    assert (run["state"], run["reason"]) == ("aborted", "Aborted")
    (attempt,) = run["attempts"]
    assert attempt["failure"] == "aborted"
    assert f"stopped-{uid[:16]}-2" not in pods(testbed_cluster, uid)


def test_a_service_killed_between_attempts_neither_loses_nor_repeats_one(
    environment, testbed_cluster, code_file, tmp_path
):
    headers = TOKEN
    env = dict(os.environ) | {
        "RUNPLANE_SERVICE__DATABASE_URL": f"sqlite:///{tmp_path / 'killed.db'}",
        "RUNPLANE_SERVICE__INSTANCE": f"res-killed-{uuid.uuid4().hex[:6]}",
    }
    nodes = fresh_nodes(testbed_cluster, "spot", 2)
    fn = on_nodes(job(code_file, "phoenix", duration="2s"), nodes)
    fn.with_preemption_mode("constrain").with_retries(3, backoff="4s")

    def get(url: str, uid: str) -> dict[str, Any]:
        return httpx.get(f"{url}/api/v1/runs/{uid}", headers=headers, timeout=30).json()  # type: ignore[no-any-return]

    def wait(url: str, uid: str, predicate: Any) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while not predicate(run := get(url, uid)):
            assert time.monotonic() < deadline, run
            time.sleep(0.05)
        return run

    process, url = serve.start_service(env, tmp_path / "first.log")
    try:
        body = {"function": fn.to_dict()}
        uid = httpx.post(f"{url}/api/v1/runs", headers=headers, json=body, timeout=30).json()["uid"]
        first = wait(url, uid, running(1))["attempts"][0]
        testbed_cluster.delete_node(first["node"])
        waiting = wait(url, uid, lambda r: r["reason"] == "Retrying")
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    assert waiting["retry_at"] is not None
    assert f"phoenix-{uid[:16]}-2" not in pods(testbed_cluster, uid)  # decided, not launched

    process, url = serve.start_service(env, tmp_path / "second.log")
    try:
        run = wait(url, uid, lambda r: r["state"] in ENDED)
        assert run["state"] == "completed", run["status_text"]
        assert [(a["number"], a["failure"]) for a in run["attempts"]] == [
            (1, "node_lost"),
            (2, ""),
        ]
        assert pods(testbed_cluster, uid) in ([], [f"phoenix-{uid[:16]}-2"])
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
        for node in nodes:
            testbed_cluster.delete_node(node)
