"""A spark run against the control plane alone: the operator's CRD present or not, and what the
operator's own status says when it could not submit (no operator runs here; the test writes
the status as the operator does). The run that computes is tests/integration/
test_real_node_spark.py's."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

import runplane
from runplane.config import Settings
from runplane.errors import ConflictError
from runplane.runs import RunState
from runplane.runtimes.kubernetes import KubernetesRuntime
from runplane.runtimes.request import build_request
from testbed.dask_operator import install_crds
from testbed.pytest_plugin import TestbedCluster
from tests.integration.test_crd_workloads import Events

pytestmark = pytest.mark.testbed

TEST = f"sparkapp-{uuid.uuid4().hex[:8]}"
CRD = "sparkapplications.sparkoperator.k8s.io"
GROUP, VERSION, PLURAL = "sparkoperator.k8s.io", "v1beta2", "sparkapplications"


@pytest.fixture(scope="module")
def runtime(testbed_cluster: TestbedCluster) -> Iterator[tuple[KubernetesRuntime, Events]]:
    install_crds(testbed_cluster, ("sparkoperator.k8s.io_sparkapplications.yaml",))
    settings = Settings(namespace=testbed_cluster.namespace)
    rt = KubernetesRuntime(settings, api=testbed_cluster.api, instance=TEST, grace_period_seconds=0)
    events = Events(rt)
    assert rt.watch.wait_synced(10)
    yield rt, events
    rt.close()
    events.reader.join(10)


def _spark(tmp_path: Path) -> runplane.Function:
    code = tmp_path / "wc.py"
    code.write_text("def count(context):\n    return 1\n")
    fn = runplane.code_to_function("wc", filename=str(code), kind="spark", handler="count")
    fn.spec.replicas = 2
    fn.with_driver_requests(cpu="100m", mem="1Gi").with_executor_requests(cpu="100m", mem="1Gi")
    return fn


def _application(tb: TestbedCluster, name: str, timeout: float = 60) -> dict[str, object]:
    objects = client.CustomObjectsApi(tb.api)
    deadline = time.monotonic() + timeout
    while True:
        try:
            found: dict[str, object] = objects.get_namespaced_custom_object(
                GROUP, VERSION, tb.namespace, PLURAL, name
            )
            return found
        except ApiException as error:
            if error.status != 404 or time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def test_an_application_the_operator_could_not_submit_ends_the_run_error(
    runtime: tuple[KubernetesRuntime, Events], testbed_cluster: TestbedCluster, tmp_path: Path
) -> None:
    rt, events = runtime
    tb = testbed_cluster
    uid = uuid.uuid4().hex
    rt.launch(build_request(_spark(tmp_path), Settings(namespace=tb.namespace), uid=uid))
    name = f"wc-{uid[:16]}-1"
    _application(tb, name)
    # What the operator writes when spark-submit fails: no driver pod will ever say so.
    status = {
        "driverInfo": {},
        "applicationState": {
            "state": "SUBMISSION_FAILED",
            "errorMessage": "failed to run spark-submit: pods is forbidden",
        },
    }
    client.CustomObjectsApi(tb.api).patch_namespaced_custom_object_status(
        GROUP, VERSION, tb.namespace, PLURAL, name, {"status": status}
    )
    ended = events.wait(uid, lambda e: e.state.terminal, timeout=60)
    assert (ended.state, ended.reason) == (RunState.ERROR, "SubmissionFailed")
    assert ended.message == (
        f"the Spark operator could not submit SparkApplication {name}: "
        "failed to run spark-submit: pods is forbidden"
    )
    assert rt.abort(uid, "Aborted", "cleanup")  # the application is deleted
    assert [e.state for e in events.of(uid)].count(RunState.ERROR) == 1


def test_a_cluster_without_the_crd_refuses_a_spark_run_before_anything_is_made(
    runtime: tuple[KubernetesRuntime, Events], testbed_cluster: TestbedCluster, tmp_path: Path
) -> None:
    rt, _ = runtime
    tb = testbed_cluster
    extensions = client.ApiextensionsV1Api(tb.api)
    request = build_request(_spark(tmp_path), Settings(namespace=tb.namespace), uid="x" * 32)
    rt.check(request)  # served now
    extensions.delete_custom_resource_definition(CRD)
    try:
        deadline = time.monotonic() + 60
        while CRD in {c.metadata.name for c in extensions.list_custom_resource_definition().items}:
            assert time.monotonic() < deadline, "the CRD was not deleted"
            time.sleep(0.2)
        # Discovery may lag the delete by a moment: the refusal is awaited, not assumed.
        deadline = time.monotonic() + 30
        while True:
            try:
                rt.check(request)
            except ConflictError as error:
                refused = str(error)
                break
            assert time.monotonic() < deadline, "a spark run was accepted without the CRD"
            time.sleep(0.5)
        assert refused.startswith(
            "kind: this cluster does not serve SparkApplication (sparkoperator.k8s.io/v1beta2)"
        )
        assert "the Kubeflow Spark Operator (v2)" in refused
        assert f"whose CRD {CRD} defines it, watching namespace {tb.namespace!r}" in refused
        assert "helm install spark-operator spark-operator/spark-operator" in refused
        assert f"spark.jobNamespaces={{{tb.namespace}}}" in refused
    finally:
        install_crds(tb, ("sparkoperator.k8s.io_sparkapplications.yaml",))
