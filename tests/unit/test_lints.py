"""QoS class and the best-practice warnings, one rule at a time."""

from __future__ import annotations

import pytest

import runplane
from runplane.config import load_settings
from runplane.rendering import render
from runplane.spec import QoSClass, qos_class

from .conftest import assert_valid_manifests


def codes(fn, settings=None):
    result = render(fn, settings or load_settings())
    assert_valid_manifests(result.manifests)
    return [lint.code for lint in result.lints]


@pytest.mark.parametrize(
    ("requests", "limits", "expected"),
    [
        ({}, {}, QoSClass.BEST_EFFORT),
        ({"cpu": 1, "memory": "1G"}, {"cpu": "1000m", "memory": "1000M"}, QoSClass.GUARANTEED),
        ({}, {"cpu": 1, "memory": "1G"}, QoSClass.GUARANTEED),  # requests default to limits
        ({"cpu": 1}, {"cpu": 2, "memory": "1G"}, QoSClass.BURSTABLE),
        ({"cpu": 1, "memory": "1G"}, {}, QoSClass.BURSTABLE),
        ({"cpu": 1}, {"cpu": 1}, QoSClass.BURSTABLE),  # memory has no limit
        ({"cpu": 0}, {}, QoSClass.BEST_EFFORT),  # zero counts as unset
        ({}, {"nvidia.com/gpu": 1}, QoSClass.BEST_EFFORT),  # only cpu/memory decide QoS
    ],
)
def test_qos_class_as_the_kubelet_computes_it(requests, limits, expected):
    assert qos_class(requests, limits) is expected


def test_rendered_qos_includes_defaults():
    settings = load_settings(
        function_defaults={"resources": {"limits": {"cpu": 1, "memory": "1G"}}}
    )
    assert render(runplane.new_function("t"), settings).qos is QoSClass.GUARANTEED
    assert render(runplane.new_function("t"), load_settings()).qos is QoSClass.BEST_EFFORT


def test_no_requests():
    assert codes(runplane.new_function("t")) == ["no-requests"]
    assert codes(runplane.new_function("t").with_requests(cpu=1)) == []


def test_memory_limit_above_request():
    fn = runplane.new_function("t").with_requests(mem="1G", cpu=1).with_limits(mem="2G")
    lint = render(fn, load_settings()).lints[0]
    assert lint.code == "memory-limit-above-request"
    assert "may be evicted under node memory pressure" in lint.message
    assert "autoscaler may not add nodes" in lint.message
    assert codes(fn.with_limits(mem="1G")) == []


def test_gpu_without_cpu_or_memory_requests():
    fn = runplane.new_function("t").with_limits(gpus=1)
    assert "gpu-without-requests" in codes(fn)
    fn.with_requests(cpu=4)
    lint = next(x for x in render(fn, load_settings()).lints if x.code == "gpu-without-requests")
    assert "without a memory request" in lint.message
    assert codes(fn.with_requests(cpu=4, mem="16G")) == []


@pytest.mark.parametrize(
    ("mode", "warned"), [("allow", True), ("constrain", True), ("prevent", False), ("none", False)]
)
def test_stateful_job_allowed_on_spot(mode, warned):
    fn = runplane.new_function("t").with_requests(cpu=1, mem="1G").with_preemption_mode(mode)
    assert ("stateful-job-on-spot" in codes(fn)) is warned
    fn.spec.retries = 3
    assert "stateful-job-on-spot" not in codes(fn)


def test_serving_gpus_differ_from_workers():
    serve = runplane.new_function("s", kind="serving").with_requests(cpu=1, mem="1G").gpus(2)
    assert "gpus-differ-from-workers" in codes(serve)
    assert "gpus-differ-from-workers" not in codes(serve.with_http(workers=2))


def test_autoscaling_without_cpu_request():
    serve = runplane.new_function("s", kind="serving").with_requests(mem="1G")
    serve.spec.max_replicas = 3
    assert codes(serve) == ["autoscaling-without-cpu-request"]


def test_autoscaled_limit_above_request():
    serve = runplane.new_function("s", kind="serving").with_requests(cpu=1, mem="1G")
    serve.with_limits(cpu=2, mem="1G")
    serve.spec.max_replicas = 3
    assert "autoscaled-limit-above-request" in codes(serve)
    assert "autoscaled-limit-above-request" not in codes(serve.with_limits(cpu=1, mem="1G"))
    dask = runplane.new_function("d", kind="dask").with_worker_requests(cpu=1, mem="1G")
    dask.with_worker_limits(cpu=1, mem="2G")
    dask.spec.min_replicas, dask.spec.max_replicas = 1, 4
    lints = [lint.code for lint in render(dask, load_settings()).lints]
    assert "autoscaled-limit-above-request" in lints
