"""``helm install --wait`` of the chart on the testbed's real node, as a platform team installs
runplane: the service pod runs in the cluster under its service account (no kubeconfig), a job
submitted from the host with the CLI runs in a pod and returns its result, and the web UI's
login page loads through the Service.

It needs two parts of the testbed besides the chart: the runplane image
(``testbed/service_image.py``, imported into the node's containerd) and pods that reach the API
server and Services (kube-proxy on the real node, an apiserver address pods can reach). Where
this tree has not got them, the test says which are missing; with both, it runs (and CI runs
it). The install here is one replica on a SQLite file in its emptyDir (the node cannot pull
PostgreSQL's image): two replicas on PostgreSQL with a leader are another test's.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client

from testbed import build
from testbed.pytest_plugin import TestbedCluster
from testbed.realnode import RealNode

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(900), pytest.mark.testbed_tool("helm")]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "runplane"
TOKEN = secrets.token_urlsafe(24)
RELEASE = "rp"


def missing_parts() -> list[str]:
    """What of the testbed the install needs and this tree has not got."""
    missing = []
    if importlib.util.find_spec("testbed.service_image") is None:
        missing.append("the runplane image build (testbed/service_image.py)")
    if not hasattr(RealNode, "import_archive"):
        missing.append("importing an image archive into the real node (RealNode.import_archive)")
    if "kube-proxy" not in build.BINARIES:
        missing.append("kube-proxy on the real node (pods reaching the API server and Services)")
    return missing


if missing_parts():
    pytest.skip("the chart's install needs " + "; ".join(missing_parts()), allow_module_level=True)


@pytest.fixture(scope="module")
def image(real_node: RealNode, pytestconfig: pytest.Config) -> str:
    """The runplane image of this checkout, built (or found cached) and on the node."""
    service_image: Any = importlib.import_module("testbed.service_image")
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        built = service_image.build()
    real_node.import_archive(built.archive)  # type: ignore[attr-defined]
    return str(built.name)


def helm(env: dict[str, str], kubeconfig: Path, *args: str, timeout: float = 600) -> str:
    done = subprocess.run(
        [str(build.build_helm()), *args, "--kubeconfig", str(kubeconfig)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, f"helm {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def install_values(image: str, node: RealNode) -> dict[str, Any]:
    repository, _, tag = image.rpartition(":")
    return {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "replicas": 1,
        "leaderElection": {"enabled": False},
        "resources": {"cpu": "500m", "memory": "768Mi"},
        "nodeSelector": node.node_selector,
        "tolerations": [node.toleration],
        "priorityClasses": {"create": False},  # the testbed has runplane's classes already
        "postgresql": {"enabled": False},
        # One replica's database in its own emptyDir: enough to show the install works.
        "externalDatabase": {"url": "sqlite:////var/lib/runplane/runplane.db"},
        "tokens": {"list": [{"token": TOKEN, "user": "ci", "role": "admin"}]},
        "config": {
            "function_defaults": {
                "image": node.image,
                "node_selector": node.node_selector,
                "tolerations": [node.toleration],
            }
        },
    }


@pytest.fixture(scope="module")
def installed(
    testbed_cluster: TestbedCluster,
    real_node: RealNode,
    image: str,
    helm_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, str]]:
    """The chart installed in a namespace of its own and Ready: (namespace, service URL)."""
    namespace = f"install-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(testbed_cluster.api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    values = tmp_path_factory.mktemp("values") / "values.json"
    values.write_text(json.dumps(install_values(image, real_node)))
    kubeconfig = testbed_cluster.kubeconfig
    try:
        began = time.monotonic()
        helm(
            helm_env,
            kubeconfig,
            "install",
            RELEASE,
            str(CHART),
            "--namespace",
            namespace,
            "--values",
            str(values),
            "--wait",
            "--timeout",
            "5m",
        )
        real_node.timings["chart_install_s"] = round(time.monotonic() - began, 1)
        service = core.read_namespaced_service(f"{RELEASE}-runplane", namespace)
        yield namespace, f"http://{service.spec.cluster_ip}:{service.spec.ports[0].port}"
    finally:
        with contextlib.suppress(AssertionError):
            helm(helm_env, kubeconfig, "uninstall", RELEASE, "--namespace", namespace, "--wait")
        core.delete_namespace(namespace)


def test_the_service_runs_in_the_cluster_under_its_service_account(
    testbed_cluster: TestbedCluster, installed: tuple[str, str]
) -> None:
    namespace, url = installed
    core = client.CoreV1Api(testbed_cluster.api)
    (pod,) = core.list_namespaced_pod(
        namespace, label_selector="app.kubernetes.io/component=service"
    ).items
    assert pod.status.phase == "Running"
    assert pod.spec.service_account_name == f"{RELEASE}-runplane"
    assert pod.status.qos_class == "Guaranteed"
    (container,) = pod.spec.containers
    assert not any("KUBECONFIG" in (e.name or "") for e in container.env or [])
    ready = httpx.get(f"{url}/api/v1/ready", timeout=30)
    assert ready.status_code == 200, ready.text


def test_a_job_from_the_host_runs_in_a_pod_and_returns_its_result(
    installed: tuple[str, str], tmp_path: Path
) -> None:
    _, url = installed
    source = tmp_path / "job.py"
    source.write_text("def handler(context, x: int = 1):\n    return {'double': x * 2}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
    env |= {"RUNPLANE_API": url, "RUNPLANE_TOKEN": TOKEN, "RUNPLANE_CONFIG": os.devnull}
    cli = [sys.executable, "-m", "runplane"]
    args = ["run", str(source), "--handler", "handler", "--param", "x=21"]
    ran = subprocess.run(
        [*cli, *args, "--cpu", "100m", "--memory", "64Mi"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    listed = subprocess.run(
        [*cli, "runs", "-o", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    (run,) = json.loads(listed.stdout)
    assert run["state"] == "completed"
    assert run["results"]["double"] == 42


def test_the_web_ui_login_page_loads_through_the_service(installed: tuple[str, str]) -> None:
    _, url = installed
    page = httpx.get(f"{url}/ui/login", timeout=30, follow_redirects=True)
    assert page.status_code == 200
    assert "token" in page.text.lower()
