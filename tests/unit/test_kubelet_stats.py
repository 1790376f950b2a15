"""A pod's usage from its node's kubelet summary: one request per node however many of its
pods are sampled, none to a node without a kubelet API, and a refusing node left alone."""

from __future__ import annotations

from typing import Any

from runplane.runtimes.kubernetes.kubelet_stats import FRESH, REST, KubeletStats, pods_usage

SUMMARY = {
    "node": {"nodeName": "real"},
    "pods": [
        {
            "podRef": {"name": "run-a", "namespace": "runs"},
            "containers": [
                {
                    "cpu": {"usageCoreNanoSeconds": 1_500_000_000},
                    "memory": {"workingSetBytes": 41 << 20},
                },
                {
                    "cpu": {"usageCoreNanoSeconds": 500_000_000},
                    "memory": {"workingSetBytes": 1 << 20},
                },
            ],
        },
        {"podRef": {"name": "run-b", "namespace": "runs"}, "memory": {"workingSetBytes": 7}},
        {
            "podRef": {"name": "run-c", "namespace": "runs"},
            "cpu": {"usageCoreNanoSeconds": 134_000_000},
            "containers": [
                {
                    "cpu": {"usageCoreNanoSeconds": 0},
                    "memory": {"workingSetBytes": 50 << 20},
                }
            ],
        },
    ],
}


def test_a_summary_gives_each_pod_its_working_set_and_cpu_time() -> None:
    found = pods_usage(SUMMARY)
    assert found["runs/run-a"].memory_bytes == 42 << 20
    assert found["runs/run-a"].cpu_seconds == 2.0
    assert found["runs/run-b"].memory_bytes == 7
    # a container whose CPU reads 0 (cgroup v1) takes its pod's
    assert found["runs/run-c"].cpu_seconds == 0.134
    assert found["runs/run-c"].memory_bytes == 50 << 20
    assert pods_usage({}) == {}


class Node:
    def __init__(self) -> None:
        self.asked = 0
        self.refuse = False
        self.now = 100.0

    def ask(self, node: str) -> dict[str, Any]:
        self.asked += 1
        if self.refuse:
            raise RuntimeError("HTTP 503: no kubelet")
        return SUMMARY


def test_a_node_is_asked_once_for_all_its_pods_until_its_answer_is_stale() -> None:
    node = Node()
    stats = KubeletStats(node.ask, lambda name: name == "real", lambda: node.now)
    a = stats.usage("real", "runs", "run-a")
    assert a is not None
    assert a.memory_bytes == 42 << 20
    assert stats.usage("real", "runs", "run-b") is not None
    assert stats.usage("real", "runs", "gone") is None
    assert node.asked == 1
    node.now += FRESH
    stats.usage("real", "runs", "run-a")
    assert node.asked == 2


def test_a_node_without_a_kubelet_api_is_never_asked_and_a_refusing_one_rests() -> None:
    node = Node()
    stats = KubeletStats(node.ask, lambda name: name == "real", lambda: node.now)
    assert stats.usage("kwok-node-0", "runs", "run-a") is None
    assert stats.usage("", "runs", "run-a") is None
    assert node.asked == 0
    node.refuse = True
    assert stats.usage("real", "runs", "run-a") is None
    node.now += REST / 2
    assert stats.usage("real", "runs", "run-a") is None
    assert node.asked == 1
    node.refuse, node.now = False, node.now + REST
    assert stats.usage("real", "runs", "run-a") is not None
    assert node.asked == 2


def test_many_pods_looked_up_at_once_ask_each_node_whether_it_answers_once() -> None:
    node = Node()
    answered: list[str] = []

    def answers(name: str) -> bool:
        answered.append(name)
        return name == "real"

    stats = KubeletStats(node.ask, answers, lambda: node.now)
    placed = [("a", "run-a", "real"), ("b", "run-b", "real"), ("x", "gone", "real")]
    placed += [(f"k{i}", f"run-{i}", f"kwok-{i % 2}") for i in range(100)]
    found = stats.usages("runs", placed)
    assert sorted(found) == ["a", "b"]  # a pod its node does not list, or on a kwok node: left out
    assert found["a"].memory_bytes == 42 << 20
    assert sorted(answered) == ["kwok-0", "kwok-1", "real"]
    assert node.asked == 1
