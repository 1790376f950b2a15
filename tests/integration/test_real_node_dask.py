"""A dask function's rendered ``DaskCluster`` computing on the real node.

What runplane renders goes, unchanged, to the dask-kubernetes operator's own controller (a
process of this test, ``testbed.dask_operator``), which makes the scheduler and worker
Deployments; the real scheduler places their pods on the real node, whose kubelet runs Debian's
dask 2022.12 (``images.DASK_IMAGE``) with the rendered ``dask scheduler`` / ``dask worker``
command lines. Workers find the scheduler by its Service name through the testbed's pod DNS
(``testbed.podns``) and the node's kube-proxy. A client pod on the same node, dialing the same
name, maps work over both workers and sums it. The test process cannot be the client: its
distributed (PyPI's) is years newer than the image's, and dask's wire protocol wants matching
versions.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client

import runplane
from runplane.config import FunctionDefaults, Settings
from runplane.rendering import render
from testbed import dask_operator, images, kube, realnode
from testbed.dask_operator import Operator
from testbed.pytest_plugin import TestbedCluster

pytestmark = pytest.mark.testbed

GROUP, VERSION = dask_operator.GROUP, dask_operator.VERSION
TEST = f"rdask-{uuid.uuid4().hex[:6]}"
WORKER_MEMORY = 512 * 2**20
WORKER_NAME = "DASK_WORKER_NAME"  # the operator's, passed to ``dask worker --name``

#: The client: both workers compute half the squares each (pinned, so neither idles), a task
#: on each reports the pod it ran in, and the sum is computed on the cluster too.
CLIENT = """
import json, platform, sys
from distributed import Client

def square(x):
    return x * x

def where():
    return platform.node()

with Client(sys.argv[1], timeout="60s") as client:
    client.wait_for_workers(2, timeout=120)
    workers = client.scheduler_info()["workers"]
    parts, hosts = [], []
    for i, address in enumerate(sorted(workers)):
        parts += client.map(square, range(i, 100, 2), workers=[address])
        hosts.append(client.submit(where, workers=[address], pure=False).result())
    total = client.submit(sum, parts).result()
    shown = {
        w["name"]: {"memory_limit": w["memory_limit"], "nthreads": w["nthreads"]}
        for w in workers.values()
    }
    print(json.dumps({"total": total, "hosts": sorted(hosts), "workers": shown}))
"""


@pytest.fixture(scope="module")
def operator(testbed_cluster: TestbedCluster, real_node: realnode.RealNode) -> Iterator[Operator]:
    began = time.monotonic()
    real_node.import_image(images.DASK_IMAGE)
    real_node.timings["dask_image_import_s"] = round(time.monotonic() - began, 2)
    with dask_operator.running(testbed_cluster, TEST) as running:
        yield running


def _selector(name: str, component: str) -> str:
    return f"dask.org/cluster-name={name},dask.org/component={component}"


def _running(pods: list[client.V1Pod], count: int, ready: bool = False) -> bool:
    def ok(pod: client.V1Pod) -> bool:
        if kube.pod_status(pod).phase != "Running":
            return False
        condition = kube.pod_condition(pod, "Ready")
        return not ready or (condition is not None and condition.status == "True")

    return len(pods) == count and all(ok(p) for p in pods)


def test_a_rendered_dask_cluster_computes_on_the_real_node(
    operator: Operator, real_node: realnode.RealNode
) -> None:
    tb = operator.tb
    ns = tb.namespace
    name = TEST
    fn = runplane.new_function(name, kind="dask", image=images.DASK_IMAGE)
    fn.spec.replicas = 2
    fn.spec.nthreads = 2
    fn.with_worker_requests(cpu="250m", mem="256Mi").with_worker_limits(cpu="500m", mem="512Mi")
    fn.with_scheduler_requests(cpu="100m", mem="128Mi").with_scheduler_limits(mem="512Mi")
    defaults = FunctionDefaults(
        node_selector=real_node.node_selector, tolerations=[real_node.toleration]
    )
    settings = Settings(namespace=ns, function_defaults=defaults)
    (cluster,) = render(fn, settings).manifests
    objects = client.CustomObjectsApi(tb.api)
    objects.create_namespaced_custom_object(GROUP, VERSION, ns, "daskclusters", cluster)
    client_pod = f"{name}-client"
    try:
        (scheduler,) = operator.pods(
            _selector(name, "scheduler"), lambda p: _running(p, 1, ready=True), timeout=120
        )
        workers = operator.pods(_selector(name, "worker"), lambda p: _running(p, 2), timeout=120)
        for pod in [scheduler, *workers]:
            assert kube.node_name(pod) == real_node.name
        for pod in workers:
            (container,) = pod.spec.containers
            assert container.resources.limits == {"cpu": "500m", "memory": "512Mi"}
            assert container.resources.requests == {"cpu": "250m", "memory": "256Mi"}
            args = container.args
            assert args[args.index("--memory-limit") + 1] == str(WORKER_MEMORY)

        address = f"tcp://{name}-scheduler.{ns}.svc.{realnode.CLUSTER_DOMAIN}:8786"
        tb.core.create_namespaced_pod(
            ns,
            {
                "metadata": {"name": client_pod},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": real_node.node_selector,
                    "tolerations": [real_node.toleration],
                    "containers": [
                        {
                            "name": "client",
                            "image": images.DASK_IMAGE,
                            "imagePullPolicy": "Never",
                            "command": ["python3", "-c", CLIENT, address],
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "128Mi"},
                                "limits": {"memory": "512Mi"},
                            },
                        }
                    ],
                },
            },
        )
        done = tb.wait_pod(
            client_pod,
            lambda p: kube.pod_status(p).phase in ("Succeeded", "Failed"),
            timeout=180,
            what="finished",
        )
        log = tb.core.read_namespaced_pod_log(client_pod, ns)
        assert kube.pod_status(done).phase == "Succeeded", log
        result = json.loads(log.strip().splitlines()[-1])

        assert result["total"] == sum(i * i for i in range(100))
        # each worker pod computed: the tasks pinned to each ran in two different pods
        assert result["hosts"] == sorted(p.metadata.name for p in workers)
        assert sorted(result["workers"]) == sorted(
            e.value
            for p in workers
            for e in p.spec.containers[0].env
            if e.name == "DASK_WORKER_NAME"
        )
        for worker in result["workers"].values():
            # the pod's memory limit is the one dask's own memory manager works with
            assert worker["memory_limit"] == WORKER_MEMORY
            assert worker["nthreads"] == 2

        # the name resolved through the testbed's DNS to the scheduler Service's ClusterIP,
        # which the node's kube-proxy leads to the scheduler pod
        answered = (tb.run_dir / "logs" / "podns.log").read_text()
        assert f"{name}-scheduler.{ns}.svc.{realnode.CLUSTER_DOMAIN}. NOERROR " in answered
        service = tb.core.read_namespaced_service(f"{name}-scheduler", ns).spec
        assert service is not None
        assert f"['{service.cluster_ip}']" in answered
    finally:
        tb.core.delete_namespaced_pod(client_pod, ns, grace_period_seconds=0)
        objects.delete_namespaced_custom_object(GROUP, VERSION, ns, "daskclusters", name)
        operator.pods(f"dask.org/cluster-name={name}", lambda p: not p, timeout=60)
