"""Counting units of work: totals over labels, and which resource a request path names."""

from __future__ import annotations

import threading

import pytest

from runplane import meters
from runplane.runtimes.kubernetes.api.rest import resource_of, verb_of


def total(meter: str, **labels: str) -> int:
    wanted = set(labels.items())
    counted = meters.counts().items()
    return sum(n for (name, have), n in counted if name == meter and wanted <= set(have))


def test_counts_add_up_by_meter_and_labels():
    before_get = total("kube_requests", method="GET")
    before_all = total("kube_requests")
    meters.count("kube_requests", (("method", "GET"), ("resource", "pods")))
    meters.count("kube_requests", (("method", "POST"), ("resource", "pods")), units=2)
    assert total("kube_requests", method="GET") == before_get + 1
    assert total("kube_requests") == before_all + 3
    assert all(name in meters.METERS for name, _ in meters.counts())


def test_threads_count_apart_and_every_count_adds_up_also_after_its_thread_ended():
    before = total("placement_evaluations", rule="threads")
    labels = (("rule", "threads"),)

    def counting() -> None:
        for _ in range(1000):
            meters.count("placement_evaluations", labels)

    workers = [threading.Thread(target=counting) for _ in range(8)]
    for worker in workers:
        worker.start()
    while any(worker.is_alive() for worker in workers):
        assert before <= total("placement_evaluations", rule="threads") <= before + 8000
    assert total("placement_evaluations", rule="threads") == before + 8000


@pytest.mark.parametrize(
    ("path", "resource"),
    [
        ("/api/v1/namespaces/runs/pods", "pods"),
        ("/api/v1/namespaces/runs/pods/train-1/log", "pods/log"),
        ("/api/v1/pods", "pods"),
        ("/api/v1/nodes", "nodes"),
        ("/api/v1/namespaces/runs", "namespaces"),
        ("/apis/apps/v1/namespaces/runs/deployments/web", "deployments"),
        ("/apis/kubeflow.org/v2beta1", "discovery"),
    ],
)
def test_a_request_is_counted_by_the_resource_its_path_names(path, resource):
    assert resource_of(path) == resource


@pytest.mark.parametrize(
    ("method", "path", "query", "verb"),
    [
        ("GET", "/api/v1/namespaces/runs/pods", {"labelSelector": "a=b"}, "LIST"),
        ("GET", "/api/v1/namespaces/runs/pods", {"watch": "true"}, "WATCH"),
        ("GET", "/api/v1/namespaces/runs/pods/train-1", None, "GET"),
        ("GET", "/api/v1/namespaces/runs/pods/train-1/log", None, "GET"),
        ("GET", "/api/v1/nodes", None, "LIST"),
        ("GET", "/api/v1/namespaces/runs", None, "GET"),
        ("GET", "/apis/kubeflow.org/v2beta1", None, "GET"),
        ("GET", "/apis/kubeflow.org/v2beta1/namespaces/runs/mpijobs", None, "LIST"),
        ("POST", "/api/v1/namespaces/runs/pods", None, "POST"),
        ("DELETE", "/api/v1/namespaces/runs/pods/train-1", None, "DELETE"),
    ],
)
def test_a_read_of_a_collection_is_counted_as_a_list(method, path, query, verb):
    assert verb_of(method, path, query) == verb
