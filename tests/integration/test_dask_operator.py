"""A dask function's ``DaskCluster`` handed to the dask-kubernetes operator's own controller.

The controller is the one the ``dask-kubernetes`` package ships (``dask_kubernetes.operator.
controller``, kopf-based), run as a process of this test against the testbed's API server and
watching only the runs namespace. What runplane renders is what it receives: it makes the
scheduler Deployment and Service and the worker group, the worker group's Deployments make the
pods, and the real scheduler places them on the kwok nodes. The kwok nodes run no containers,
so nothing here computes and the operator's adaptive autoscaler, which asks the dask scheduler
for its target, cannot reach one: scaling is shown as the operator does it for a changed
``spec.worker.replicas``, the field its autoscaler and ``DaskCluster.scale`` both move.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client, watch

import runplane
from runplane.config import Settings
from runplane.rendering import render
from testbed import dask_operator, kube, topology
from testbed.dask_operator import Operator
from testbed.pytest_plugin import TestbedCluster

pytestmark = pytest.mark.testbed

GROUP, VERSION = dask_operator.GROUP, dask_operator.VERSION
TEST = f"dask-{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="module")
def operator(testbed_cluster: TestbedCluster) -> Iterator[Operator]:
    with dask_operator.running(testbed_cluster, TEST) as running:
        yield running


def _cluster_pods(name: str, component: str) -> str:
    return f"dask.org/cluster-name={name},dask.org/component={component}"


def _placed(pods: list[client.V1Pod], count: int) -> bool:
    return len(pods) == count and all(kube.node_name(p) for p in pods)


def _node_of(tb: TestbedCluster, pod: client.V1Pod) -> dict[str, str]:
    node = tb.core.read_node(kube.node_name(pod))
    return dict((node.metadata.labels if node.metadata else None) or {})


def test_the_operator_makes_and_scales_a_rendered_cluster_where_runplane_placed_it(
    operator: Operator,
) -> None:
    tb = operator.tb
    name = TEST
    fn = runplane.new_function(name, kind="dask")
    fn.spec.min_replicas, fn.spec.max_replicas = 2, 4
    fn.spec.nthreads = 2
    fn.with_worker_requests(cpu=1, mem="1Gi").with_worker_limits(cpu=2, mem="2Gi")
    fn.with_scheduler_requests(cpu="250m", mem="256Mi").with_scheduler_limits(mem="512Mi")
    fn.with_preemption_mode("constrain").with_priority_class("high")
    fn.with_node_selection(node_selector={"topology.kubernetes.io/zone": topology.ZONES[1]})
    cluster, autoscaler = render(fn, Settings(namespace=tb.namespace)).manifests
    objects = client.CustomObjectsApi(tb.api)
    ns = tb.namespace
    objects.create_namespaced_custom_object(GROUP, VERSION, ns, "daskclusters", cluster)
    objects.create_namespaced_custom_object(GROUP, VERSION, ns, "daskautoscalers", autoscaler)
    try:
        workers = operator.pods(_cluster_pods(name, "worker"), lambda p: _placed(p, 2))
        (scheduler,) = operator.pods(_cluster_pods(name, "scheduler"), lambda p: _placed(p, 1))

        for pod in [*workers, scheduler]:
            # constrain: spot nodes only; the node selector: the one in zone-b.
            labels = _node_of(tb, pod)
            assert labels[topology.GROUP_LABEL] == "spot", kube.node_name(pod)
            assert labels["topology.kubernetes.io/zone"] == topology.ZONES[1]
            assert pod.spec.priority_class_name == "high"
            assert pod.spec.node_selector == {"topology.kubernetes.io/zone": topology.ZONES[1]}
            assert any(
                t.key == "app.iguazio.com/lifecycle" and t.value == "preemptible"
                for t in pod.spec.tolerations
            )
            required = pod.spec.affinity.node_affinity
            assert required.required_during_scheduling_ignored_during_execution.node_selector_terms
        for pod in workers:
            (container,) = pod.spec.containers
            assert container.resources.requests == {"cpu": "1", "memory": "1Gi"}
            assert container.resources.limits == {"cpu": "2", "memory": "2Gi"}
            assert container.args[:2] == ["dask", "worker"]
            assert container.args[container.args.index("--nthreads") + 1] == "2"
            assert container.args[container.args.index("--memory-limit") + 1] == str(2 * 2**30)
            env = {e.name: e.value for e in container.env}
            assert env["DASK_WORKER_NAME"].startswith(f"{name}-default-worker-")
            assert env["DASK_SCHEDULER_ADDRESS"] == (
                f"tcp://{name}-scheduler.{ns}.svc.cluster.local:8786"
            )
        (container,) = scheduler.spec.containers
        assert container.resources.requests == {"cpu": "250m", "memory": "256Mi"}
        assert container.resources.limits == {"memory": "512Mi"}
        assert tb.core.read_namespaced_service(f"{name}-scheduler", ns).spec.ports[0].port == 8786

        # The autoscaler is the cluster's: the operator adopts it, for cascade deletion.
        _wait_object(
            objects,
            ns,
            "daskautoscalers",
            autoscaler["metadata"]["name"],
            lambda a: (
                [o["kind"] for o in a["metadata"].get("ownerReferences", [])] == ["DaskCluster"]
            ),
        )

        # min -> max: the worker count the autoscaler would move, moved; more pods, same rules.
        objects.patch_namespaced_custom_object(
            GROUP, VERSION, ns, "daskclusters", name, {"spec": {"worker": {"replicas": 4}}}
        )
        workers = operator.pods(_cluster_pods(name, "worker"), lambda p: _placed(p, 4))
        group = objects.get_namespaced_custom_object(
            GROUP, VERSION, ns, "daskworkergroups", f"{name}-default"
        )
        assert group["spec"]["worker"]["replicas"] == 4
        for pod in workers:
            assert _node_of(tb, pod)[topology.GROUP_LABEL] == "spot"
            assert pod.spec.priority_class_name == "high"
            assert pod.spec.containers[0].resources.limits == {"cpu": "2", "memory": "2Gi"}
    finally:
        objects.delete_namespaced_custom_object(GROUP, VERSION, ns, "daskclusters", name)
        # The operator's objects are the cluster's (owner references): the garbage collector
        # removes them; the pods go with their Deployments.
        operator.pods(f"dask.org/cluster-name={name}", lambda p: not p, timeout=60)


def _wait_object(
    objects: client.CustomObjectsApi, ns: str, plural: str, name: str, test: Callable[[Any], bool]
) -> dict[str, Any]:
    """The custom object once ``test`` holds for it, awaited on a watch."""
    deadline = time.monotonic() + 30
    while True:
        listed = objects.list_namespaced_custom_object(
            GROUP, VERSION, ns, plural, field_selector=f"metadata.name={name}"
        )
        for item in listed["items"]:
            if test(item):
                return dict(item)
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"{plural}/{name} never passed {test}: {listed['items']}"
        stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
            objects.list_namespaced_custom_object,
            GROUP,
            VERSION,
            ns,
            plural,
            field_selector=f"metadata.name={name}",
            resource_version=listed["metadata"]["resourceVersion"],
            timeout_seconds=max(1, int(remaining)),
        )
        for event in stream:
            if event["type"] != "DELETED" and test(event["object"]):
                return dict(event["object"])
