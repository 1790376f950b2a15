"""Placement rules against hand-built nodes, with kube-scheduler's reason strings."""

from __future__ import annotations

import pytest

from runplane.placement import Node, PodRequirements, Taint, evaluate, pod_requests

from .cluster import reference_nodes


def spec(requests=None, limits=None, **extra):
    resources = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"containers": [{"name": "main", "image": "x", "resources": resources}], **extra}


def test_insufficient_resources_counted_per_reason():
    result = evaluate(spec({"cpu": "12", "memory": "40Gi"}), reference_nodes())
    assert result.reasons["on-demand-1"] == ["Insufficient cpu", "Insufficient memory"]
    assert result.reasons["gpu-1"] == ["node(s) had untolerated taint {nvidia.com/gpu: present}"]
    assert result.message == (
        "0/6 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}, "
        "1 node(s) had untolerated taint {runplane.io/node-group: system}, 2 Insufficient cpu, "
        "2 Insufficient memory, 2 node(s) had untolerated taint "
        "{app.iguazio.com/lifecycle: preemptible}."
    )


def test_summary_matches_the_scheduler_format():
    nodes = [
        Node.create("a", cpu="1", memory="1Gi"),
        Node.create(
            "b",
            labels={"app.iguazio.com/lifecycle": "preemptible"},
            taints=[Taint("app.iguazio.com/lifecycle", "preemptible")],
        ),
        Node.create(
            "c",
            labels={"app.iguazio.com/lifecycle": "preemptible"},
            taints=[Taint("app.iguazio.com/lifecycle", "preemptible")],
        ),
    ]
    result = evaluate(spec({"memory": "2Gi"}), nodes)
    assert not result.schedulable
    assert result.message == (
        "0/3 nodes are available: 1 Insufficient memory, 2 node(s) had untolerated taint "
        "{app.iguazio.com/lifecycle: preemptible}."
    )


def test_selector_mismatch_on_one_node():
    result = evaluate(spec(nodeSelector={"disk": "ssd"}), [Node.create("only")])
    assert result.message == (
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
    )


def test_requests_default_to_limits_and_reserve():
    node = Node.create("n", cpu="2", memory="4Gi")
    pod = PodRequirements.from_pod_spec(spec(limits={"cpu": "1500m", "memory": "3Gi"}))
    assert pod.requests == {"cpu": 1500, "memory": 3 * 2**30}
    assert evaluate(pod, [node]).fits == ["n"]
    node.reserve(pod.requests)
    assert evaluate(pod, [node]).reasons["n"] == ["Insufficient cpu", "Insufficient memory"]
    node.release(pod.requests)
    assert evaluate(pod, [node]).schedulable


def test_pod_count_limit():
    node = Node.create("n", pods=1)
    node.reserve({})
    assert evaluate(spec(), [node]).reasons["n"] == ["Too many pods"]


def test_extended_resources_missing_on_a_node():
    result = evaluate(spec(limits={"nvidia.com/gpu": "1"}), [Node.create("cpu-only")])
    assert result.reasons["cpu-only"] == ["Insufficient nvidia.com/gpu"]


def test_node_name_and_unschedulable():
    nodes = [Node.create("a"), Node(name="b", allocatable={"pods": 10}, unschedulable=True)]
    assert evaluate(spec(nodeName="b"), nodes).reasons == {
        "a": ["node(s) didn't match the requested node name"],
        "b": ["node(s) were unschedulable"],
    }
    tolerant = spec(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}])
    assert evaluate(tolerant, nodes).fits == ["a", "b"]


def test_toleration_semantics():
    node = Node.create(
        "n", taints=[Taint("k", "v", "NoExecute"), Taint("soft", "x", "PreferNoSchedule")]
    )
    assert not evaluate(spec(), [node]).schedulable
    for toleration in (
        {"key": "k", "operator": "Equal", "value": "v"},
        {"key": "k", "operator": "Exists", "effect": "NoExecute"},
        {"operator": "Exists"},
    ):
        assert evaluate(spec(tolerations=[toleration]), [node]).schedulable, toleration
    for toleration in (
        {"key": "k", "operator": "Equal", "value": "other"},
        {"key": "k", "operator": "Exists", "effect": "NoSchedule"},
    ):
        assert not evaluate(spec(tolerations=[toleration]), [node]).schedulable, toleration


def test_affinity_operators():
    node = Node.create("n", labels={"zone": "a", "gen": "5"})

    def fits(*expressions):
        affinity = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]
                }
            }
        }
        return evaluate(spec(affinity=affinity), [node]).schedulable

    assert fits({"key": "zone", "operator": "In", "values": ["a", "b"]})
    assert not fits({"key": "zone", "operator": "NotIn", "values": ["a"]})
    assert fits({"key": "missing", "operator": "NotIn", "values": ["a"]})
    assert fits({"key": "zone", "operator": "Exists"})
    assert fits({"key": "missing", "operator": "DoesNotExist"})
    assert fits({"key": "gen", "operator": "Gt", "values": ["4"]})
    assert not fits({"key": "gen", "operator": "Lt", "values": ["5"]})
    assert not fits({"key": "zone", "operator": "Gt", "values": ["1"]})
    assert not fits()  # an empty term selects nothing


def test_terms_are_ored_and_match_fields():
    nodes = [Node.create("a", labels={"zone": "a"}), Node.create("b")]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]},
                ]
            }
        }
    }
    assert evaluate(spec(affinity=affinity), nodes).fits == ["a", "b"]


def test_node_from_kubernetes_object():
    node = Node.from_kubernetes(
        {
            "metadata": {"name": "gpu-7", "labels": {"zone": "a"}},
            "spec": {
                "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
            },
            "status": {
                "allocatable": {
                    "cpu": "15500m",
                    "memory": "62Gi",
                    "nvidia.com/gpu": "4",
                    "pods": "110",
                }
            },
        }
    )
    assert node.allocatable == {
        "cpu": 15500,
        "memory": 62 * 2**30,
        "nvidia.com/gpu": 4,
        "pods": 110,
    }
    assert node.taints == [Taint("nvidia.com/gpu", "present", "NoSchedule")]
    assert node.summary().condition == "not ready: the node has reported no Ready condition yet"


@pytest.mark.parametrize(
    ("spec", "ready", "condition"),
    [
        ({}, {"status": "True"}, ""),
        (
            {},
            {"status": "False", "reason": "KubeletNotReady", "message": "PLEG is not healthy"},
            "not ready: KubeletNotReady: PLEG is not healthy",
        ),
        ({"unschedulable": True}, {"status": "True"}, "cordoned (spec.unschedulable)"),
    ],
)
def test_a_node_says_why_it_takes_no_pods(spec, ready, condition):
    node = Node.from_kubernetes(
        {
            "metadata": {"name": "n"},
            "spec": spec,
            "status": {"conditions": [{"type": "Ready", **ready}], "allocatable": {"cpu": "1"}},
        }
    )
    assert (node.summary().ready, node.summary().condition) == (not condition, condition)


def test_pod_requests_with_init_containers_and_overhead():
    requests = pod_requests(
        {
            "containers": [
                {"resources": {"requests": {"cpu": "1"}}},
                {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
            ],
            "initContainers": [{"resources": {"requests": {"cpu": "2"}}}],
            "overhead": {"cpu": "100m"},
        }
    )
    assert requests == {"cpu": 2100, "memory": 2**30}
