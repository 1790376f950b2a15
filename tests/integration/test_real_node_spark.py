"""A spark function under the real Kubeflow Spark Operator, on the real node, through the service.

``runplane serve`` renders the function's SparkApplication; the operator (its own controller,
built from its Go module: ``testbed.spark_operator``) runs ``spark-submit`` for it, which makes
the driver pod from runplane's pod template; the driver (the testbed's Spark image,
``testbed.spark_image``, with runplane's entrypoint) runs runplane's bootstrap with pyspark, and
the handler's session asks the API server for its executors. What comes back is what any run
gives: its states, its results, the driver's output; an abort or a ``running`` threshold
deletes the application and leaves no pod.

Sizes are small for the 2-core node: 100m of CPU requested per pod; 1Gi of memory each (Spark's
heap needs 450 MiB at least; 60% of 1Gi is 614 MiB).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

import runplane
from runplane import names
from testbed import spark_image, spark_operator
from testbed.pytest_plugin import TestbedCluster
from testbed.realnode import RealNode
from tests.integration.test_real_node_runs import Service, real_node_service

pytestmark = [pytest.mark.testbed, pytest.mark.testbed_tool("spark-operator")]

TEST = f"rspark-{uuid.uuid4().hex[:6]}"
GROUP, VERSION, PLURAL = spark_operator.GROUP, spark_operator.VERSION, spark_operator.PLURAL

#: The driver waits for both executors (so the count is theirs), counts, and reports which
#: executors there were and where its tasks ran.
WORDCOUNT = """
import socket
import time


def count(context, text: str, executors: int = 2, hold: float = 0):
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("wordcount").getOrCreate()
    sc = spark.sparkContext
    deadline = time.monotonic() + 180
    while sc._jsc.sc().getExecutorMemoryStatus().size() - 1 < executors:
        assert time.monotonic() < deadline, "the executors never registered"
        time.sleep(0.5)
    print(f"executors registered: {executors}", flush=True)
    if hold:
        time.sleep(hold)
    lines = sc.parallelize(text.splitlines(), 4)
    counts = dict(
        lines.flatMap(lambda line: line.split())
        .map(lambda word: (word, 1))
        .reduceByKey(lambda a, b: a + b)
        .collect()
    )
    hosts = sorted(set(sc.parallelize(range(8), 8).map(lambda _: socket.gethostname()).collect()))
    context.log_result("hosts", hosts)
    context.log_result("master", sc.master)
    context.log_result("executor_memory", sc.getConf().get("spark.executor.memory"))
    context.log_result("executor_overhead", sc.getConf().get("spark.executor.memoryOverhead"))
    print(f"counted {sum(counts.values())} words", flush=True)
    spark.stop()
    return {"counts": counts}
"""
TEXT = "the cat\nthe dog and the cat\nand the bird\n"
COUNTS = {"the": 4, "cat": 2, "dog": 1, "and": 2, "bird": 1}


@pytest.fixture(scope="module")
def service(
    testbed_cluster: TestbedCluster,
    real_node: RealNode,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Service]:
    """The service in a namespace of its own, the Spark image on the node, and the operator
    watching the service's namespace."""
    archive = spark_image.build_image()  # built by testbed/ci.sh; a no-op then
    began = time.monotonic()
    real_node.import_archive(archive, timeout=300)
    real_node.timings["spark_image_import_s"] = round(time.monotonic() - began, 2)
    home = tmp_path_factory.mktemp("spark-service")
    with (
        real_node_service(testbed_cluster, real_node, home, "rspark") as running,
        spark_operator.running(testbed_cluster, TEST, running.namespace) as operator,
    ):
        running.operator = operator  # type: ignore[attr-defined]
        yield running


def _function(tmp_path: Path) -> runplane.Function:
    source = tmp_path / "wordcount.py"
    source.write_text(WORDCOUNT)
    fn = runplane.code_to_function(
        "wordcount",
        filename=str(source),
        kind="spark",
        handler="count",
        image=spark_image.SPARK_IMAGE,
    )
    fn.spec.replicas = 2
    fn.with_driver_requests(cpu="100m", mem="1Gi").with_driver_limits(mem="1Gi")
    fn.with_executor_requests(cpu="100m", mem="1Gi").with_executor_limits(mem="1Gi")
    return fn


def _pods(tb: TestbedCluster, service: Service, uid: str) -> list[Any]:
    selector = f"{names.RUN_UID}={uid}"
    return list(tb.core.list_namespaced_pod(service.namespace, label_selector=selector).items)


def _applications(tb: TestbedCluster, service: Service, uid: str) -> list[dict[str, Any]]:
    objects = k8s.CustomObjectsApi(tb.api)
    listed = objects.list_namespaced_custom_object(
        GROUP, VERSION, service.namespace, PLURAL, label_selector=f"{names.RUN_UID}={uid}"
    )
    return list(listed["items"])


def _detail(tb: TestbedCluster, service: Service, uid: str) -> str:
    operator: spark_operator.Operator = service.operator  # type: ignore[attr-defined]
    apps = [a.get("status") for a in _applications(tb, service, uid)]
    return f"application status: {apps}\noutput:\n{service.output(uid)[-4000:]}\n{operator.tail()}"


def _await(what: str, check: Any, timeout: float = 120) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.5)
    return found


def test_a_word_count_with_a_driver_and_two_executors_returns_its_result(
    service: Service, testbed_cluster: TestbedCluster, tmp_path: Path
) -> None:
    tb = testbed_cluster
    uid = service.submit(_function(tmp_path), params={"text": TEXT})
    # Both executors exist while the run goes: the driver asked the API server for them.

    def executor_pods() -> list[Any] | None:
        found = [
            p
            for p in _pods(tb, service, uid)
            if (p.metadata.labels or {}).get(names.ROLE) == "executor"
        ]
        return found if len(found) >= 2 else None

    executors = _await("two executor pods", executor_pods, timeout=240)
    run = service.wait(uid, {"completed", "error", "aborted"}, timeout=300)
    assert run["state"] == "completed", _detail(tb, service, uid)
    results = run["results"]
    assert results["counts"] == COUNTS
    assert results["master"].startswith("k8s://")
    # 60% of the executor's 1Gi is Spark's heap, the rest its stated overhead.
    assert (results["executor_memory"], results["executor_overhead"]) == ("614m", "410m")
    executor_names = {p.metadata.name for p in executors}
    assert set(results["hosts"]) <= executor_names, (results["hosts"], executor_names)
    for pod in executors:
        (container,) = [c for c in pod.spec.containers if c.name == "spark-kubernetes-executor"]
        memory = container.resources.limits["memory"]
        assert memory in ("1024Mi", "1Gi"), container.resources
        assert container.resources.requests["cpu"] == "100m"
    output = service.output(uid)
    assert "executors registered: 2" in output
    assert "counted 10 words" in output
    (app,) = _applications(tb, service, uid)
    assert app["spec"]["executor"]["instances"] == 2

    def completed() -> bool:
        (found,) = _applications(tb, service, uid)
        state = (found.get("status") or {}).get("applicationState", {}).get("state")
        return bool(state == "COMPLETED")

    _await("the operator's state COMPLETED", completed, timeout=60)


@pytest.mark.parametrize("how", ["abort", "threshold"])
def test_an_abort_or_a_running_threshold_deletes_the_application_and_leaves_no_pod(
    service: Service, testbed_cluster: TestbedCluster, tmp_path: Path, how: str
) -> None:
    tb = testbed_cluster
    thresholds = {"running": "30s"} if how == "threshold" else {}
    uid = service.submit(
        _function(tmp_path), params={"text": TEXT, "hold": 600}, state_thresholds=thresholds
    )
    service.wait(uid, {"running"}, timeout=240)
    if how == "abort":  # with its executors running
        _await(
            "the executors registered",
            lambda: "executors registered: 2" in service.output(uid),
            timeout=240,
        )
        assert service.http.post(f"{service.url}/runs/{uid}/abort").status_code == 200
    run = service.wait(uid, {"aborted", "error", "completed"}, timeout=120)
    assert run["state"] == "aborted", _detail(tb, service, uid)
    if how == "threshold":
        assert run["reason"] == "ThresholdExceeded", run
    _await("no pod of the run left", lambda: not _pods(tb, service, uid), timeout=120)
    _await("the application deleted", lambda: not _applications(tb, service, uid), timeout=60)


def test_a_cluster_without_the_operator_refuses_a_spark_run_at_submission(
    service: Service, testbed_cluster: TestbedCluster, tmp_path: Path
) -> None:
    """Without the CRD, the run is refused before it exists, naming what to install."""
    extensions = k8s.ApiextensionsV1Api(testbed_cluster.api)
    crd = "sparkapplications.sparkoperator.k8s.io"
    extensions.delete_custom_resource_definition(crd)
    try:

        def gone() -> bool:
            try:
                extensions.read_custom_resource_definition(crd)
            except ApiException as error:
                return error.status == 404
            return False

        def unserved() -> bool:
            """Discovery, which the service asks, forgets the kind a moment after the CRD
            itself is gone: the API server's discovery controller follows the deletion."""
            try:
                found = k8s.CustomObjectsApi(testbed_cluster.api).get_api_resources(GROUP, VERSION)
            except ApiException as error:
                return error.status == 404
            return PLURAL not in {r.name for r in found.resources or []}

        _await("the CRD deleted", gone, timeout=60)
        _await("the kind no longer discovered", unserved, timeout=60)
        listed = service.http.get(f"{service.url}/runs", params={"name": "wordcount"})
        before = len(listed.json())
        answer = service.http.post(
            f"{service.url}/runs",
            json={"function": _function(tmp_path).to_dict(), "params": {"text": TEXT}},
        )
        assert answer.status_code == 422, answer.text
        message = answer.text
        assert "Kubeflow Spark Operator" in message
        assert crd in message
        assert "helm install spark-operator" in message
        assert service.namespace in message
        listed = service.http.get(f"{service.url}/runs", params={"name": "wordcount"})
        assert len(listed.json()) == before, listed.text  # no run was recorded
    finally:
        spark_operator.install_crds(testbed_cluster)
