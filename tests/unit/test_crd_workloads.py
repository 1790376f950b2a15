"""MPIJob, DaskCluster and SparkApplication as rendered, validated against the operators' own
CRD schemas (testbed/crds), with resources, placement and priority where each operator reads
them."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

import runplane
from runplane import names
from runplane.config import Settings
from runplane.errors import ConflictError, InvalidValueError
from runplane.rendering.mpijob import LAUNCHER_PROGRAM
from runplane.runtimes.request import build_request

CRDS = Path(__file__).parents[2] / "testbed" / "crds"
SPOT = {"key": "app.iguazio.com/lifecycle", "operator": "NotIn", "values": ["preemptible"]}
TOLERATION = {
    "key": "app.iguazio.com/lifecycle",
    "operator": "Equal",
    "value": "preemptible",
    "effect": "NoSchedule",
}


@functools.cache
def _schema(file: str, version: str) -> dict[str, Any]:
    crd = yaml.safe_load((CRDS / file).read_text())
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema: dict[str, Any] = served["schema"]["openAPIV3Schema"]
    return schema


def valid(manifest: dict[str, Any], file: str) -> dict[str, Any]:
    """``manifest``, after checking it against its CRD's schema (a failure names the path)."""
    version = manifest["apiVersion"].split("/")[1]
    jsonschema.validate(manifest, _schema(file, version))
    return manifest


@pytest.fixture
def code(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text("def train(context, epochs: int = 1):\n    return {'epochs': epochs}\n")
    return path


def _mpijob(code: Path) -> runplane.Function:
    fn = runplane.code_to_function("trainer", filename=str(code), kind="mpijob", handler="train")
    fn.spec.replicas = 2
    fn.with_requests(mem="1G", cpu=1).with_limits(mem="2G", cpu=2, gpus=1)
    fn.with_node_selection(node_selector={"zone": "a"})
    return fn.with_priority_class("high")


@pytest.mark.parametrize(
    ("version", "worker_command"),
    [
        ("kubeflow.org/v2beta1", ["sh", "-c", "mkdir -p /run/sshd && exec /usr/sbin/sshd -De"]),
        ("kubeflow.org/v1", ["sleep", "infinity"]),
    ],
)
def test_an_mpijob_renders_a_valid_mpijob_of_either_version(code, version, worker_command):
    settings = Settings(mpijob_api_version=version)
    request = build_request(_mpijob(code), settings, uid="u" * 32)
    job, *rest = request.manifests
    assert [m["kind"] for m in rest] == ["ConfigMap"]
    file = f"kubeflow.org_mpijobs.{version.split('/')[1]}.yaml"
    valid(job, file)
    assert job["metadata"]["name"] == "trainer-uuuuuuuuuuuuuuuu-1"
    assert job["metadata"]["labels"][names.RUN_UID] == "u" * 32
    replicas = job["spec"]["mpiReplicaSpecs"]
    worker, launcher = replicas["Worker"], replicas["Launcher"]
    assert (worker["replicas"], launcher["replicas"]) == (2, 1)
    w, lch = worker["template"]["spec"], launcher["template"]["spec"]
    # Workers carry the resources, GPUs too; the launcher only starts ranks.
    assert w["containers"][0]["resources"] == {
        "requests": {"memory": "1G", "cpu": "1", "nvidia.com/gpu": "1"},
        "limits": {"memory": "2G", "cpu": "2", "nvidia.com/gpu": "1"},
    }
    assert "resources" not in lch["containers"][0] or not lch["containers"][0]["resources"]
    for pod in (w, lch):  # placement and priority on both
        assert pod["nodeSelector"] == {"zone": "a"}
        assert pod["priorityClassName"] == "high"
        assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ] == [{"matchExpressions": [SPOT]}]
        assert worker["template"]["metadata"]["labels"][names.RUN_UID] == "u" * 32
    assert worker["template"]["metadata"]["labels"][names.ROLE] == "worker"
    assert launcher["template"]["metadata"]["labels"][names.ROLE] == "launcher"
    assert w["containers"][0]["command"] == worker_command
    python, flag, program, *mpirun = lch["containers"][0]["command"]
    # mpirun through runplane's launcher, which reports the run at the end of its output
    assert (python, flag, program) == ("python3", "-c", LAUNCHER_PROGRAM)
    assert "from runplane_bootstrap.launcher import launch" in program
    assert mpirun[:4] == ["mpirun", "--allow-run-as-root", "-np", "2"]
    assert mpirun[-2:] == list(names.BOOTSTRAP_COMMAND)
    assert mpirun[mpirun.index("RUNPLANE_EXEC_CODE") - 1] == "-x"
    env = {e["name"]: e.get("value") for e in w["containers"][0]["env"]}
    assert env["RUNPLANE_RUN_UID"] == "u" * 32  # the invocation reaches every rank
    if version == "kubeflow.org/v2beta1":
        # the operator mounts its ssh keys for root's sshd, and starts the launcher once
        # every worker's sshd answers
        assert job["spec"]["sshAuthMountPath"] == "/root/.ssh"
        assert job["spec"]["launcherCreationPolicy"] == "WaitForWorkersReady"
        assert job["spec"]["slotsPerWorker"] == 1
        assert w["containers"][0]["readinessProbe"]["tcpSocket"] == {"port": 22}
    else:
        assert "readinessProbe" not in w["containers"][0]
    assert job["spec"]["runPolicy"]["schedulingPolicy"] == {
        "minAvailable": 3,
        "priorityClass": "high",
    }
    # On this machine the run is 2 ranks of the worker's pod, each running the bootstrap.
    assert request.replicas == 2
    local = request.pod_spec["containers"][0]
    assert local["command"] == list(names.BOOTSTRAP_COMMAND)
    assert local["resources"] == w["containers"][0]["resources"]


def test_an_mpijob_on_spot_tolerates_spot_in_every_pod(code):
    fn = _mpijob(code).with_preemption_mode("constrain")
    job = runplane.render(fn, Settings()).manifests[0]
    valid(job, "kubeflow.org_mpijobs.v2beta1.yaml")
    for role in ("Launcher", "Worker"):
        pod = job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]
        assert TOLERATION in pod["tolerations"]


def test_a_dask_function_renders_a_valid_daskcluster_and_autoscaler(tmp_path):
    fn = runplane.new_function("cluster", kind="dask", image="ghcr.io/dask/dask:2024.8.0")
    fn.spec.min_replicas, fn.spec.max_replicas = 1, 4
    fn.spec.nthreads = 2
    fn.with_worker_requests(mem="1Gi", cpu="500m").with_worker_limits(mem="2Gi", cpu=1)
    fn.with_scheduler_requests(mem="256Mi", cpu="250m")
    fn.with_preemption_mode("allow").with_priority_class("low")
    cluster, autoscaler = runplane.render(fn, Settings()).manifests
    valid(cluster, "kubernetes.dask.org_daskclusters.yaml")
    valid(autoscaler, "kubernetes.dask.org_daskautoscalers.yaml")
    assert autoscaler == {
        "apiVersion": "kubernetes.dask.org/v1",
        "kind": "DaskAutoscaler",
        "metadata": cluster["metadata"],
        "spec": {"cluster": "cluster", "minimum": 1, "maximum": 4},
    }
    worker = cluster["spec"]["worker"]
    scheduler = cluster["spec"]["scheduler"]
    assert worker["replicas"] == 1
    (w,) = worker["spec"]["containers"]
    assert w["resources"] == {
        "requests": {"memory": "1Gi", "cpu": "500m"},
        "limits": {"memory": "2Gi", "cpu": "1"},
    }
    assert w["args"][-4:] == ["--nthreads", "2", "--memory-limit", str(2 * 2**30)]
    assert w["image"] == "ghcr.io/dask/dask:2024.8.0"
    (s,) = scheduler["spec"]["containers"]
    assert s["resources"] == {"requests": {"memory": "256Mi", "cpu": "250m"}}
    for pod in (worker["spec"], scheduler["spec"]):
        assert TOLERATION in pod["tolerations"]
        assert pod["priorityClassName"] == "low"
        assert "volumes" not in pod  # dask pods run dask, not runplane's bootstrap
    with pytest.raises(InvalidValueError, match="use fn.client"):
        build_request(fn, Settings(), uid="x" * 32)


def test_a_spark_function_renders_a_valid_sparkapplication(code):
    fn = runplane.code_to_function("wc", filename=str(code), kind="spark", handler="train")
    fn.spec.replicas = 2
    fn.with_driver_requests(mem="1Gi", cpu=1).with_driver_limits(mem="2Gi", cpu=1)
    fn.with_executor_requests(mem="512Mi", cpu=1).with_executor_limits(mem="1Gi", cpu=2, gpus=1)
    fn.with_node_selection(node_selector={"zone": "b"}).with_priority_class("high")
    request = build_request(fn, Settings(), uid="s" * 32)
    app = valid(request.manifests[0], "sparkoperator.k8s.io_sparkapplications.yaml")
    spec = app["spec"]
    assert spec["mainApplicationFile"] == "local:///runplane/bootstrap/__main__.py"
    assert spec["executor"]["instances"] == 2
    driver, executor = spec["driver"], spec["executor"]
    # Spark's pod memory (request and limit) is heap + overhead: the role's limit, 60% heap.
    assert (driver["cores"], driver["coreLimit"]) == (1, "1")
    assert (driver["memory"], driver["memoryOverhead"]) == ("1228m", "820m")
    assert (executor["cores"], executor["coreLimit"]) == (1, "2")
    assert (executor["memory"], executor["memoryOverhead"]) == ("614m", "410m")
    assert executor["gpu"] == {"name": "nvidia.com/gpu", "quantity": 1}
    for role in (driver, executor):
        assert role["nodeSelector"] == {"zone": "b"}
        assert role["priorityClassName"] == "high"
        assert {"name": "RUNPLANE_RUN_UID", "value": "s" * 32} in role["env"]
    assert spec["volumes"][0]["configMap"]["name"].startswith("runplane-bootstrap-")
    # The pod templates carry the pods' fields to spark-submit, without the operator's webhook;
    # the command and resources are Spark's to set.
    containers = ("spark-kubernetes-driver", "spark-kubernetes-executor")
    for role, name in zip((driver, executor), containers, strict=True):
        pod = role["template"]["spec"]
        (container,) = pod["containers"]
        assert container["name"] == name
        assert not {"command", "args", "resources", "image"} & set(container)
        assert {"name": "RUNPLANE_RUN_UID", "value": "s" * 32} in container["env"]
        assert (pod["nodeSelector"], pod["priorityClassName"]) == ({"zone": "b"}, "high")
        assert pod["volumes"][0]["configMap"]["name"].startswith("runplane-bootstrap-")
        assert role["template"]["metadata"]["labels"] == role["labels"]
    # Here: one driver process whose local mode holds both executors.
    local = request.pod_spec["containers"][0]
    assert local["resources"]["limits"] == {"memory": str(4 * 2**30), "cpu": "5000m"}
    # What the run is recorded with is the executors' part; its process gets the total.
    assert request.resources.limits.written == {"memory": "1Gi", "cpu": "2", "nvidia.com/gpu": "1"}
    assert (request.process_resources.limits.memory, request.process_resources.limits.cpu) == (
        4 * 2**30,
        5000,
    )
    env = {e["name"]: e["value"] for e in local["env"]}
    assert env["PYSPARK_SUBMIT_ARGS"] == (
        "--master local[2] --driver-memory 2457m --conf spark.executor.instances=2 "
        "--conf spark.ui.showConsoleProgress=false pyspark-shell"
    )


def test_roles_and_replicas_belong_to_their_kinds(code):
    job = runplane.code_to_function("j", filename=str(code), handler="train")
    with pytest.raises(ConflictError, match="workers belong to dask functions"):
        job.with_worker_limits(mem="1G")
    with pytest.raises(ConflictError, match="drivers belong to spark functions"):
        job.with_driver_requests(cpu=1)
    mpi = _mpijob(code)
    mpi.spec.min_replicas = 1
    with pytest.raises(ConflictError, match="a mpijob takes replicas, not min_replicas"):
        runplane.render(mpi, Settings())
    dask = runplane.new_function("d", kind="dask")
    with pytest.raises(ConflictError, match="do not apply to dask functions"):
        dask.set_state_thresholds({"running": "1h"})
