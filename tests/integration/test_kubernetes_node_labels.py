"""An admin's node label, through the Kubernetes runtime, against the real control plane: the
Node object changes, the real scheduler places a pod selecting the label on that node, removal
takes the label away, and a service account without ``patch`` on nodes is refused in words that
say which permission it lacks."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator

import pytest

from runplane.config import Settings
from runplane.errors import InvalidValueError, NotFoundError, PolicyError
from runplane.runtimes.kubernetes import KubernetesRuntime
from runplane.runtimes.kubernetes.api.calls import Calls
from runplane.runtimes.kubernetes.api.rest import RestApi
from runplane.runtimes.kubernetes.nodes import label_node
from testbed import kube, topology
from testbed.pytest_plugin import TestbedCluster

pytestmark = pytest.mark.testbed

POOL = "runplane.io/pool"


@pytest.fixture(scope="module")
def runtime(testbed_cluster: TestbedCluster) -> Iterator[KubernetesRuntime]:
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("RUNPLANE_") and name != "RUNPLANE_SKIP_TESTBED":
                patch.delenv(name)
        patch.setenv("RUNPLANE_CONFIG", os.devnull)
        settings = Settings(namespace=topology.RUNS_NAMESPACE)
    rt = KubernetesRuntime(
        settings, api=testbed_cluster.api, instance=f"lbl-{uuid.uuid4().hex[:6]}"
    )
    yield rt
    rt.close()


@pytest.fixture
def node(testbed_cluster: TestbedCluster) -> Iterator[str]:
    name = testbed_cluster.add_node("on-demand", f"lbl-{uuid.uuid4().hex[:8]}")
    yield name
    testbed_cluster.delete_node(name)


def labels_of(tb: TestbedCluster, name: str) -> dict[str, str]:
    meta = tb.core.read_node(name).metadata
    return dict((meta.labels if meta else None) or {})


def test_label_node_changes_the_node_and_the_scheduler_places_on_it(
    testbed_cluster: TestbedCluster, runtime: KubernetesRuntime, node: str
) -> None:
    assert runtime.capabilities.node_labels
    before = labels_of(testbed_cluster, node)
    after = runtime.label_node(node, {POOL: "training"})
    assert after == {**before, POOL: "training"}
    assert labels_of(testbed_cluster, node)[POOL] == "training"
    listed = {n.name: n for n in runtime.nodes()}
    assert listed[node].labels[POOL] == "training"

    # The real scheduler sees the label at once: a pod selecting it lands on that node only.
    core = testbed_cluster.core
    pod = f"lbl-{uuid.uuid4().hex[:8]}"
    core.create_namespaced_pod(
        testbed_cluster.namespace,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod},
            "spec": {
                "nodeSelector": {POOL: "training"},
                "containers": [{"name": "main", "image": "registry.example/runplane/job:1"}],
            },
        },
    )
    try:
        deadline = time.monotonic() + 30
        while kube.node_name(testbed_cluster.read_pod(pod)) is None:
            assert time.monotonic() < deadline, "the pod selecting the new label was not placed"
            time.sleep(0.1)
        assert kube.node_name(testbed_cluster.read_pod(pod)) == node
    finally:
        core.delete_namespaced_pod(pod, testbed_cluster.namespace, grace_period_seconds=0)

    assert runtime.label_node(node, {POOL: None}) == before
    assert POOL not in labels_of(testbed_cluster, node)


def test_bad_changes_and_unknown_nodes_are_refused(runtime: KubernetesRuntime, node: str) -> None:
    with pytest.raises(InvalidValueError, match="kubernetes.io/"):
        runtime.label_node(node, {"kubernetes.io/hostname": "elsewhere"})
    with pytest.raises(InvalidValueError, match="a label value is at most 63"):
        runtime.label_node(node, {POOL: "-bad-"})
    with pytest.raises(NotFoundError, match="the cluster has no such node"):
        runtime.label_node("no-such-node", {POOL: "x"})


def test_an_account_without_patch_on_nodes_is_told_which_permission_it_lacks(
    testbed_cluster: TestbedCluster, node: str
) -> None:
    api = kube.api_client(testbed_cluster.kubeconfig)
    api.set_default_header("Impersonate-User", "system:serviceaccount:runplane:no-node-patch")
    calls = Calls(RestApi(api), topology.RUNS_NAMESPACE, timeout=10)
    with pytest.raises(PolicyError, match="needs the verb patch on nodes"):
        label_node(calls, node, {POOL: "x"})
    assert POOL not in labels_of(testbed_cluster, node)
