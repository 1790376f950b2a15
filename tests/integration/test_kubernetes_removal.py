"""Removing a serving function on Kubernetes returns once its replicas' pods are gone, not
when the API server has taken the deletes: the garbage collector removes the pods of a deleted
Deployment afterwards, and until they stop they hold room on their nodes."""

from __future__ import annotations

import time
import uuid
from typing import Any

from kubernetes import client

from runplane import names
from runplane.runtimes.kubernetes.api.calls import Calls
from runplane.runtimes.kubernetes.api.rest import RestApi
from runplane.runtimes.kubernetes.deploy import remove
from runplane.runtimes.kubernetes.gone import await_pods_gone
from testbed.pytest_plugin import TestbedCluster


def _deployment(name: str, project: str, replicas: int) -> dict[str, Any]:
    labels = {names.PROJECT: project, names.FUNCTION: name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.example/runplane/serving:1",
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                        }
                    ],
                },
            },
        },
    }


def _replicas(tb: TestbedCluster, selector: str) -> list[client.V1Pod]:
    return list(tb.core.list_namespaced_pod(tb.namespace, label_selector=selector).items)


def test_removing_a_deployment_returns_once_its_replicas_pods_are_gone(
    testbed_cluster: TestbedCluster,
) -> None:
    name, project = f"echo-{uuid.uuid4().hex[:6]}", "removal"
    selector = f"{names.PROJECT}={project},{names.FUNCTION}={name}"
    apps = client.AppsV1Api(testbed_cluster.api)
    apps.create_namespaced_deployment(testbed_cluster.namespace, _deployment(name, project, 3))
    deadline = time.monotonic() + 60
    while len(_replicas(testbed_cluster, selector)) < 3:
        assert time.monotonic() < deadline, "the Deployment never made its 3 pods"
        time.sleep(0.2)
    calls = Calls(RestApi(testbed_cluster.api), testbed_cluster.namespace, 30.0, 3)
    assert remove(calls, project, name) == f"{project}/{name}"
    assert _replicas(testbed_cluster, selector) == []  # gone when remove returned


def test_awaiting_pods_that_outlive_the_bound_names_them(testbed_cluster: TestbedCluster) -> None:
    name, project = f"stay-{uuid.uuid4().hex[:6]}", "removal"
    selector = f"{names.PROJECT}={project},{names.FUNCTION}={name}"
    apps = client.AppsV1Api(testbed_cluster.api)
    apps.create_namespaced_deployment(testbed_cluster.namespace, _deployment(name, project, 1))
    deadline = time.monotonic() + 60
    while not (pods := _replicas(testbed_cluster, selector)):
        assert time.monotonic() < deadline, "the Deployment never made its pod"
        time.sleep(0.2)
    calls = Calls(RestApi(testbed_cluster.api), testbed_cluster.namespace, 30.0, 3)
    # Nothing deletes them: the bound is reached and the pod is named.
    assert await_pods_gone(calls, selector, 1.0) == [pods[0].metadata.name]
    apps.delete_namespaced_deployment(name, testbed_cluster.namespace)
    assert await_pods_gone(calls, selector, 60.0) == []
