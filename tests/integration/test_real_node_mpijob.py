"""mpijob runs under the real Kubeflow MPI Operator on the testbed's real node.

``runplane serve`` submits each run's MPIJob (``kubeflow.org/v2beta1``); the operator
(``testbed.mpi_operator``, built from its Go module, watching the service's namespace) makes
the workers, their headless Service, hostfile and ssh keys, and the launcher once every
worker's sshd answers. The launcher's ``mpirun`` reaches the workers over ssh by the names the
testbed's pod DNS answers, and each rank runs runplane's bootstrap with mpi4py from the
testbed's MPI image (Debian's Open MPI and OpenSSH, ``testbed/images.py``). Before the
operator's CRD is installed, a submission is refused at once, naming the operator.
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
from testbed import build, images, mpi_operator
from testbed.mpi_operator import Operator
from testbed.pytest_plugin import TestbedCluster
from testbed.realnode import RealNode
from tests.integration.test_real_node_runs import Service, pods_of, real_node_service

pytestmark = [pytest.mark.testbed, pytest.mark.testbed_tool("mpi-operator")]

TEST = f"mpi-{uuid.uuid4().hex[:6]}"

ALLREDUCE = """
import socket, time
from mpi4py import MPI

def handler(context, fail_rank: int = -1, hold: float = 0):
    comm = MPI.COMM_WORLD
    total = comm.allreduce(comm.rank + 1, op=MPI.SUM)
    hosts = comm.gather(socket.gethostname(), root=0)
    print(f"rank {comm.rank} of {comm.size} on {socket.gethostname()}: total {total}", flush=True)
    if comm.rank == fail_rank:
        raise ValueError(f"rank {comm.rank} has no data")
    if hold:
        print("holding", flush=True)
        time.sleep(hold)
    return {"total": total, "size": comm.size, "hosts": hosts}
"""


def _delete_crd(api: k8s.ApiClient, timeout: float = 60) -> None:
    """No MPIJob CRD on the cluster (another module may have installed one)."""
    extensions = k8s.ApiextensionsV1Api(api)
    try:
        extensions.delete_custom_resource_definition(mpi_operator.CRD_NAME)
    except ApiException as error:
        if error.status != 404:
            raise
    deadline = time.monotonic() + timeout
    while True:
        try:
            extensions.read_custom_resource_definition(mpi_operator.CRD_NAME)
        except ApiException as error:
            if error.status == 404:
                return
            raise
        assert time.monotonic() < deadline, "the MPIJob CRD was not deleted"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def service(
    testbed_cluster: TestbedCluster, real_node: RealNode, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    """The service on the real node, every function in the MPI image; no MPIJob CRD yet."""
    began = time.monotonic()
    real_node.import_archive(build.build_mpi_image())
    real_node.timings["mpi_image_import_s"] = round(time.monotonic() - began, 2)
    _delete_crd(testbed_cluster.api)
    home = tmp_path_factory.mktemp("mpi-service")
    with real_node_service(testbed_cluster, real_node, home, "mpi") as running:
        yield running


@pytest.fixture(scope="module")
def operator(testbed_cluster: TestbedCluster, service: Service) -> Iterator[Operator]:
    with mpi_operator.running(testbed_cluster, service.namespace, TEST) as running:
        yield running


def _mpijob(tmp_path: Path, name: str = "allreduce") -> runplane.Function:
    source = tmp_path / f"{name}.py"
    source.write_text(ALLREDUCE)
    fn = runplane.code_to_function(
        name, filename=str(source), kind="mpijob", handler="handler", image=images.MPI_IMAGE
    )
    fn.spec.replicas = 2
    return fn.with_requests(cpu="100m", mem="64Mi").with_limits(mem="256Mi")


def _job(tb: TestbedCluster, namespace: str, uid: str, name: str = "allreduce") -> dict[str, Any]:
    objects = k8s.CustomObjectsApi(tb.api)
    found: dict[str, Any] = objects.get_namespaced_custom_object(
        mpi_operator.GROUP,
        mpi_operator.VERSION,
        namespace,
        mpi_operator.PLURAL,
        f"{name}-{uid[:16]}-1",
    )
    return found


def _conditions(job: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (job.get("status") or {}).get("conditions") or []}


def _no_pods_left(core: k8s.CoreV1Api, service: Service, uid: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while left := pods_of(core, service, uid):
        names = [p.metadata.name for p in left]
        assert time.monotonic() < deadline, f"pods of run {uid} left: {names}"
        time.sleep(0.2)


def test_without_the_operator_an_mpijob_is_refused_at_submission(service, tmp_path):
    fn = _mpijob(tmp_path, "refused")
    answer = service.http.post(f"{service.url}/runs", json={"function": fn.to_dict()})
    assert answer.status_code in (400, 422), answer.text
    text = answer.text
    assert "the Kubeflow MPI Operator" in text
    assert "mpijobs.kubeflow.org" in text
    assert "mpi-operator.yaml" in text  # how to install it
    listed = service.http.get(f"{service.url}/runs", params={"name": "refused"})
    assert listed.status_code == 200, listed.text
    assert "refused" not in listed.text  # no run was left behind


def test_an_allreduce_across_two_worker_pods_returns_its_result(
    service, operator, testbed_cluster, real_node, tmp_path
):
    began = time.monotonic()
    uid = service.submit(_mpijob(tmp_path))
    running = service.wait(uid, {"running", "completed", "error"}, timeout=180)
    assert running["state"] in ("running", "completed"), running
    run = service.wait(uid, {"completed", "error", "aborted"}, timeout=180)
    took = time.monotonic() - began
    assert run["state"] == "completed", (run, operator.tail())
    results = run["results"]
    assert (results["total"], results["size"]) == (3, 2)  # ranks 0 and 1: 1 + 2
    job_name = f"allreduce-{uid[:16]}-1"
    assert sorted(results["hosts"]) == [f"{job_name}-worker-0", f"{job_name}-worker-1"]
    output = service.output(uid)  # the launcher's output: every rank's, through mpirun
    assert "rank 0 of 2" in output, output
    assert "rank 1 of 2" in output, output
    assert "runplane-results" not in output  # the report is not output
    # the run ended because the operator said so: its condition is there already
    conditions = _conditions(_job(testbed_cluster, service.namespace, uid))
    assert conditions.get("Succeeded") == "True", conditions
    assert conditions.get("Created") == "True", conditions
    real_node.timings["mpijob_allreduce_s"] = round(took, 1)


def test_a_rank_that_raises_ends_the_run_error_naming_the_rank(
    service, operator, testbed_cluster, tmp_path
):
    uid = service.submit(_mpijob(tmp_path), params={"fail_rank": 1})
    run = service.wait(uid, {"completed", "error", "aborted"}, timeout=180)
    assert run["state"] == "error", run
    assert "rank 1: ValueError: rank 1 has no data" in run["status_text"], run
    assert "Traceback" in service.output(uid)
    # the end is the operator's: its Failed condition's reason and message are the run's
    job = _job(testbed_cluster, service.namespace, uid)
    (failed,) = [c for c in job["status"]["conditions"] if c["type"] == "Failed"]
    assert failed["status"] == "True", job["status"]
    assert run["reason"] == failed["reason"].rstrip("/"), (run, failed)
    assert f"the MPI Operator: {failed['message'].strip()}" in run["status_text"], (run, failed)


@pytest.mark.parametrize("how", ["abort", "threshold"])
def test_an_aborted_mpijob_leaves_no_pod_and_no_mpijob(
    service, operator, testbed_cluster, tmp_path, how
):
    thresholds = {"running": "5s"} if how == "threshold" else {}
    uid = service.submit(_mpijob(tmp_path), params={"hold": 600}, state_thresholds=thresholds)
    service.wait(uid, {"running"}, timeout=180)
    if how == "abort":
        assert service.http.post(f"{service.url}/runs/{uid}/abort").status_code == 200
    run = service.wait(uid, {"aborted", "error", "completed"}, timeout=120)
    assert run["state"] == "aborted", run
    if how == "threshold":
        assert run["reason"] == "ThresholdExceeded", run
    _no_pods_left(k8s.CoreV1Api(testbed_cluster.api), service, uid)
    with pytest.raises(ApiException) as gone:
        _job(testbed_cluster, service.namespace, uid)
    assert gone.value.status == 404
