"""A serving function on the real node, driven through ``runplane serve`` as a user drives it:
deployed with ``fn.deploy()``, invoked with ``fn.invoke()`` and ``runplane invoke`` (the
service sends each call on through the API server's service proxy, for the caller's token
only), listed with ``runplane get deployments``, scaled from 1 to 2 replicas by its
HorizontalPodAutoscaler while clients load it (metrics-server measures the pods' CPU, the
controller-manager's autoscaler acts), and deleted with ``runplane delete deployment``,
leaving no pod. The image is the testbed's plain Python one: nothing of runplane is in it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s

from runplane import names
from testbed import metrics_server
from testbed.metrics_server import MetricsServer
from testbed.pytest_plugin import TestbedCluster
from testbed.realnode import RealNode
from tests.integration.test_real_node_runs import TOKEN_VALUE, Service, real_node_service

pytestmark = [pytest.mark.testbed, pytest.mark.testbed_tool("metrics-server")]

#: Echoes, or burns CPU for the milliseconds asked (hashing: pure CPU, no sleep), so the
#: replicas' CPU rises above the autoscaler's target while clients call ``/burn``.
HANDLER = """
import hashlib
import socket
import time


def handler(context, event):
    if event.path.endswith("/burn"):
        end = time.monotonic() + event.body["ms"] / 1000
        rounds = 0
        while time.monotonic() < end:
            hashlib.sha256(b"x" * 4096).digest()
            rounds += 1
        return {"rounds": rounds}
    if event.path.endswith("/missing"):
        return 404, {"error": "no such thing"}
    return {"path": event.path, "x": event.body["x"] * 2, "pod": socket.gethostname()}
"""

#: fn.deploy() and fn.invoke() through the service (RUNPLANE_API, RUNPLANE_TOKEN), as a user's
#: notebook would: a request of 100m CPU (the autoscaler's 100 %), at most 500m used.
CLIENT = """
import json, sys
import runplane

fn = runplane.code_to_function("echo", filename=sys.argv[1], kind="serving", handler="handler")
fn.with_requests(cpu="100m", mem="128Mi").with_limits(cpu="500m", mem="128Mi")
fn.spec.min_replicas, fn.spec.max_replicas = 1, 2
fn.with_http(workers=4)
if sys.argv[2] == "deploy":
    print(json.dumps(fn.deploy()))
else:
    answers = [fn.invoke("/predict", body={"x": 21})]
    try:
        fn.invoke("/missing", body={"x": 1})
    except runplane.errors.RunplaneError as error:
        answers.append(str(error))
    print(json.dumps(answers))
"""


@pytest.fixture(scope="module")
def metrics(testbed_cluster: TestbedCluster, real_node: RealNode) -> Iterator[MetricsServer]:
    with metrics_server.running(testbed_cluster.cluster) as running:
        real_node.timings["metrics_server_start_s"] = running.start_s
        yield running


@pytest.fixture(scope="module")
def service(
    testbed_cluster: TestbedCluster,
    real_node: RealNode,
    metrics: MetricsServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Service]:
    home = tmp_path_factory.mktemp("serving-service")
    with real_node_service(testbed_cluster, real_node, home, "serving") as running:
        yield running


def _sdk(service: Service, script: Path, action: str) -> Any:
    """The client program's JSON answer, run as a user runs it (its own process)."""
    api = service.url.removesuffix("/api/v1")
    env = service.env | {"RUNPLANE_API": api, "RUNPLANE_TOKEN": TOKEN_VALUE}
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, str(script), action],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _cli(service: Service, *args: str) -> str:
    process = service.cli(*args)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return out


def _listed(service: Service) -> dict[str, Any]:
    answer = service.http.get(f"{service.url}/deployments")
    assert answer.status_code == 200, answer.text
    (echo,) = [d for d in answer.json() if d["name"] == "echo"]
    return dict(echo)


def _await(what: str, check: Callable[[], Any], timeout: float, shown: Callable[[], Any]) -> Any:
    """``check()``'s first true answer, polled every half second up to ``timeout``."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what} not within {timeout:.0f} s: {shown()}"
        time.sleep(0.5)
    return found


def _rescaled(core: k8s.CoreV1Api, namespace: str) -> list[str]:
    """The autoscaler's rescale events in the namespace: each says its new size and why."""
    events = core.list_namespaced_event(
        namespace, field_selector="involvedObject.kind=HorizontalPodAutoscaler"
    )
    return [str(e.message) for e in events.items if e.reason == "SuccessfulRescale"]


class Load:
    """Clients calling ``/burn`` through the service until stopped; the answers' statuses."""

    def __init__(self, service: Service, clients: int = 3) -> None:
        self.url = f"{service.url}/deployments/default/echo/invoke/burn"
        self.stopped = threading.Event()
        self.statuses: list[str] = []
        self.threads = [threading.Thread(target=self._call, daemon=True) for _ in range(clients)]

    def _call(self) -> None:
        headers = {"Authorization": f"Bearer {TOKEN_VALUE}"}
        with httpx.Client(headers=headers, timeout=60) as http:
            while not self.stopped.is_set():
                try:
                    answer = http.post(self.url, json={"ms": 300})
                    self.statuses.append(answer.headers.get("X-Runplane-Function-Status", "?"))
                except httpx.HTTPError as error:
                    self.statuses.append(type(error).__name__)

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        for thread in self.threads:
            thread.join(timeout=90)


def test_a_serving_function_through_the_service_scales_by_its_autoscaler(
    testbed_cluster: TestbedCluster, service: Service, tmp_path: Path
) -> None:
    core = testbed_cluster.core
    script = tmp_path / "echo.py"
    script.write_text(textwrap.dedent(HANDLER))

    deployed = _sdk(service, script, "deploy")
    assert deployed["name"] == "echo"
    assert deployed["namespace"] == service.namespace
    applied = set(deployed["applied"])
    assert {"Deployment/echo", "Service/echo", "HorizontalPodAutoscaler/echo"} <= applied
    ready = _await(
        "one ready replica",
        lambda: (d := _listed(service))["state"] == "ready" and d,
        180,
        lambda: _listed(service),
    )
    assert (ready["desired"], ready["ready"]) == (1, 1)
    assert (ready["min_replicas"], ready["max_replicas"]) == (1, 2)
    assert ready["owner"] == "ci"
    assert ready["url"] == f"http://echo.{service.namespace}.svc:80"

    # fn.invoke() through the service: the answer, the path, the function's own 404
    answer, missing = _sdk(service, script, "invoke")
    assert (answer["path"], answer["x"]) == ("/predict", 42)
    assert answer["pod"].startswith("echo-")
    assert missing == 'the function answered 404: {"error": "no such thing"}'
    invoked = json.loads(_cli(service, "invoke", "echo", "/predict", "--body", '{"x": 4}'))
    assert (invoked["path"], invoked["x"]) == ("/predict", 8)
    # only with a token: the service sends nothing on for an anonymous caller
    invoke = f"{service.url}/deployments/default/echo/invoke/predict"
    anonymous = httpx.post(invoke, json={"x": 1}, timeout=30)
    assert anonymous.status_code == 401, anonymous.text
    assert "X-Runplane-Function-Status" not in anonymous.headers

    # under load, the autoscaler (fed by metrics-server) takes it from 1 to 2 replicas
    with Load(service) as load:
        (rescaled, *_) = _await(
            "the autoscaler's rescale",
            lambda: _rescaled(core, service.namespace),
            420,
            lambda: (_listed(service), load.statuses[-5:]),
        )
        assert rescaled.startswith("New size: 2; reason: cpu resource utilization"), rescaled
        scaled = _await(
            "two ready replicas",
            lambda: (d := _listed(service))["ready"] == 2 and d,
            240,
            lambda: _listed(service),
        )
    assert "200" in load.statuses
    assert (scaled["state"], scaled["desired"]) == ("ready", 2)
    assert [r["state"] for r in scaled["replicas"]] == ["ready", "ready"]
    assert scaled["scaling"].startswith("CPU "), scaled["scaling"]
    assert " -> 2 replica(s) (last step at " in scaled["scaling"], scaled["scaling"]

    # the CLI lists it as the embedded default does, and deletes it
    (shown,) = json.loads(_cli(service, "get", "deployments", "-o", "json"))
    assert (shown["project"], shown["name"], shown["state"]) == ("default", "echo", "ready")
    table = _cli(service, "get", "deployments")
    (row,) = [line for line in table.splitlines() if " echo " in f" {line} "]
    assert "2/2" in row, table
    assert "2 (1-2)" in row, table
    assert _cli(service, "delete", "deployment", "echo").strip() == "default/echo deleted"
    selector = f"{names.FUNCTION}=echo"
    # the removal answers once the replicas' pods are gone, not when the deletes are taken
    assert not core.list_namespaced_pod(service.namespace, label_selector=selector).items
    apps = k8s.AppsV1Api(testbed_cluster.api)
    assert not apps.list_namespaced_deployment(service.namespace).items
    assert not core.list_namespaced_service(service.namespace, label_selector=selector).items
    autoscaling = k8s.AutoscalingV2Api(testbed_cluster.api)
    assert not autoscaling.list_namespaced_horizontal_pod_autoscaler(service.namespace).items
    assert json.loads(_cli(service, "get", "deployments", "-o", "json")) == []
