"""The other runtimes' objects against the real API server: the operators' CRDs installed
(testbed/crds), rendered MPIJob, SparkApplication and DaskCluster objects accepted as rendered,
and every pod their templates make placed by the real scheduler as the preemption mode says.

No operator runs here: each test does the operator's part of making pods from the templates,
so what is proved is the rendering and the placement, not the operators."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

import runplane
from runplane import names
from runplane.config import Settings
from runplane.rendering import RunRef, render
from testbed import kube, topology
from testbed.pytest_plugin import TestbedCluster

pytestmark = pytest.mark.testbed

CRDS = Path(__file__).parents[2] / "testbed" / "crds"
INSTALLED = (
    "kubeflow.org_mpijobs.v2beta1.yaml",
    "sparkoperator.k8s.io_sparkapplications.yaml",
    "kubernetes.dask.org_daskclusters.yaml",
)
LABEL = "runplane.io/test"
TEST = f"crd-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def crds(testbed_cluster: TestbedCluster) -> Iterator[TestbedCluster]:
    extensions = client.ApiextensionsV1Api(testbed_cluster.api)
    installed = []
    for file in INSTALLED:
        crd = yaml.safe_load((CRDS / file).read_text())
        try:
            extensions.create_custom_resource_definition(crd)
        except ApiException as error:
            if error.status != 409:
                raise
        installed.append(crd["metadata"]["name"])
    deadline = time.monotonic() + 60
    for name in installed:
        while True:
            status = extensions.read_custom_resource_definition(name).status
            conditions = {c.type: c.status for c in (status.conditions or [])} if status else {}
            if conditions.get("Established") == "True":
                break
            assert time.monotonic() < deadline, f"CRD {name} not established"
            time.sleep(0.2)
    yield testbed_cluster
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
    return created


def _as_operator(tb: TestbedCluster, template: dict[str, Any], name: str) -> str:
    """A pod from a replica template, as the operator would make it."""
    metadata = {
        "name": name,
        "namespace": tb.namespace,
        "labels": {**template["metadata"]["labels"], LABEL: TEST},
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
