"""Preemption modes as in the product spec's table, never sticky, checked with placement."""

from __future__ import annotations

import pytest

import runplane
from runplane.config import load_settings
from runplane.errors import ConflictError
from runplane.placement import evaluate
from runplane.rendering import render

from .cluster import GPU_TOLERATION, LIFECYCLE, reference_nodes
from .conftest import assert_valid_manifests

SPOT_TOLERATION = {
    "key": LIFECYCLE,
    "operator": "Equal",
    "value": "preemptible",
    "effect": "NoSchedule",
}
NOT_SPOT = {"key": LIFECYCLE, "operator": "NotIn", "values": ["preemptible"]}
ONLY_SPOT = {"key": LIFECYCLE, "operator": "In", "values": ["preemptible"]}
ZONE_TERM = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
RACK_TERM = {"matchExpressions": [{"key": "rack", "operator": "Exists"}]}
USER_TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}


def pod(fn, settings=None):
    rendered = render(fn, settings or load_settings())
    assert_valid_manifests(rendered.manifests)
    return rendered.pod_spec


def required(spec):
    return spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]


def function(mode=None, **selection):
    fn = runplane.new_function("job").with_requests(cpu=1, mem="1Gi")
    if selection:
        fn.with_node_selection(**selection)
    if mode:
        fn.with_preemption_mode(mode)
    return fn


def test_default_mode_is_prevent():
    spec = pod(function())
    assert required(spec) == [{"matchExpressions": [NOT_SPOT]}]
    assert "tolerations" not in spec


def test_default_mode_can_be_changed_by_environment(monkeypatch):
    monkeypatch.setenv("RUNPLANE_FUNCTION_DEFAULTS__PREEMPTION_MODE", "allow")
    spec = pod(function())
    assert spec["tolerations"] == [SPOT_TOLERATION]
    assert "affinity" not in spec


def test_none_leaves_everything_as_the_user_set_it():
    spec = pod(
        function(
            "none",
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [ZONE_TERM]
                    }
                }
            },
            tolerations=[USER_TOLERATION],
        )
    )
    assert required(spec) == [ZONE_TERM]
    assert spec["tolerations"] == [USER_TOLERATION]


def test_prevent_adds_not_in_to_every_term_and_drops_spot_tolerations():
    spec = pod(
        function(
            "prevent",
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [ZONE_TERM, RACK_TERM]
                    }
                }
            },
            tolerations=[USER_TOLERATION, SPOT_TOLERATION],
        )
    )
    assert required(spec) == [
        {"matchExpressions": [*ZONE_TERM["matchExpressions"], NOT_SPOT]},
        {"matchExpressions": [*RACK_TERM["matchExpressions"], NOT_SPOT]},
    ]
    assert spec["tolerations"] == [USER_TOLERATION]


def test_constrain_ands_each_term_with_the_spot_label_and_tolerates():
    spec = pod(
        function(
            "constrain",
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [ZONE_TERM, RACK_TERM]
                    }
                }
            },
            tolerations=[USER_TOLERATION],
        )
    )
    assert required(spec) == [
        {"matchExpressions": [*ZONE_TERM["matchExpressions"], ONLY_SPOT]},
        {"matchExpressions": [*RACK_TERM["matchExpressions"], ONLY_SPOT]},
    ]
    assert spec["tolerations"] == [USER_TOLERATION, SPOT_TOLERATION]


def test_constrain_makes_one_term_per_term_and_spot_label_pair(monkeypatch):
    settings = load_settings(preemptible_nodes_preset="gke")
    fn = function(
        "constrain",
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [ZONE_TERM]}
            }
        },
    )
    terms = required(pod(fn, settings))
    spot_in = [
        {"key": "cloud.google.com/gke-spot", "operator": "In", "values": ["true"]},
        {"key": "cloud.google.com/gke-preemptible", "operator": "In", "values": ["true"]},
    ]
    assert terms == [{"matchExpressions": [*ZONE_TERM["matchExpressions"], s]} for s in spot_in]
    prevent_terms = required(pod(fn.with_preemption_mode("prevent"), settings))
    assert prevent_terms == [
        {
            "matchExpressions": [
                *ZONE_TERM["matchExpressions"],
                {"key": "cloud.google.com/gke-spot", "operator": "NotIn", "values": ["true"]},
                {
                    "key": "cloud.google.com/gke-preemptible",
                    "operator": "NotIn",
                    "values": ["true"],
                },
            ]
        }
    ]


def test_allow_tolerates_and_keeps_affinity():
    spec = pod(
        function(
            "allow",
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [ZONE_TERM]
                    }
                }
            },
        )
    )
    assert required(spec) == [ZONE_TERM]
    assert spec["tolerations"] == [SPOT_TOLERATION]


def test_preferred_and_pod_affinity_are_kept():
    affinity = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": ZONE_TERM}
            ]
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "x"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        },
    }
    spec = pod(function("prevent", affinity=affinity))
    assert spec["affinity"]["podAntiAffinity"] == affinity["podAntiAffinity"]
    assert (
        spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        == affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    )
    assert required(spec) == [{"matchExpressions": [NOT_SPOT]}]


@pytest.mark.parametrize(
    "order",
    [
        ["prevent", "constrain", "allow", "none", "prevent"],
        ["constrain", "prevent", "constrain"],
        ["allow", "constrain", "none"],
    ],
)
def test_modes_are_not_sticky(order):
    fn = function(
        tolerations=[USER_TOLERATION],
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [ZONE_TERM]}
            }
        },
    )
    before = fn.to_dict()
    for mode in order:
        fresh = function(
            mode,
            tolerations=[USER_TOLERATION],
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [ZONE_TERM]
                    }
                }
            },
        )
        assert pod(fn.with_preemption_mode(mode)) == pod(fresh)
    fn.spec.preemption_mode = None
    assert fn.to_dict() == before  # the spec never received anything from a mode


def test_selector_conflicts_with_mode():
    with pytest.raises(ConflictError) as caught:
        pod(function(node_selector={LIFECYCLE: "preemptible"}))
    assert str(caught.value) == (
        "node_selector: app.iguazio.com/lifecycle=preemptible selects spot nodes, but preemption "
        "mode 'prevent' keeps the function off spot nodes; use with_preemption_mode('constrain') "
        "to run only on spot, or 'allow' to permit it"
    )
    with pytest.raises(
        ConflictError, match="selects non-spot nodes, but preemption mode 'constrain'"
    ):
        pod(function("constrain", node_selector={LIFECYCLE: "non-preemptible"}))
    # the same selectors are fine with the modes that permit them
    pod(function("constrain", node_selector={LIFECYCLE: "preemptible"}))
    pod(function("allow", node_selector={LIFECYCLE: "preemptible"}))
    pod(function("prevent", node_selector={LIFECYCLE: "non-preemptible"}))


CPU_EXPECTED = {
    "none": {"on-demand-1", "plain-1"},
    "prevent": {"on-demand-1", "plain-1"},
    "constrain": {"spot-1"},
    "allow": {"on-demand-1", "plain-1", "spot-1"},
}
GPU_EXPECTED = {
    "none": {"gpu-1"},
    "prevent": {"gpu-1"},
    "constrain": {"spot-gpu-1"},
    "allow": {"gpu-1", "spot-gpu-1"},
}


@pytest.mark.parametrize("mode", list(CPU_EXPECTED))
def test_allowed_nodes_per_mode_cpu_job(mode):
    result = evaluate(pod(function(mode)), reference_nodes())
    assert set(result.fits) == CPU_EXPECTED[mode]


@pytest.mark.parametrize("mode", list(GPU_EXPECTED))
def test_allowed_nodes_per_mode_gpu_job(mode):
    fn = function(mode, tolerations=[GPU_TOLERATION]).with_limits(gpus=1)
    result = evaluate(pod(fn), reference_nodes())
    assert set(result.fits) == GPU_EXPECTED[mode]


@pytest.mark.parametrize("mode", ["none", "prevent", "allow"])  # constrain: a conflict
def test_allowed_nodes_with_an_on_demand_selector(mode):
    fn = function(mode, node_selector={LIFECYCLE: "non-preemptible"})
    result = evaluate(pod(fn), reference_nodes())
    assert set(result.fits) == {"on-demand-1"}


def test_system_nodes_are_never_allowed_for_user_functions():
    for mode in CPU_EXPECTED:
        result = evaluate(pod(function(mode)), reference_nodes())
        assert "system-1" not in result.fits
        assert result.reasons["system-1"] == [
            "node(s) had untolerated taint {runplane.io/node-group: system}"
        ]


def test_constrain_on_a_cluster_without_spot_explains_why():
    nodes = [n for n in reference_nodes() if "spot" not in n.name]
    result = evaluate(pod(function("constrain")), nodes)
    assert result.message == (
        "0/4 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}, "
        "1 node(s) had untolerated taint {runplane.io/node-group: system}, "
        "2 node(s) didn't match Pod's node affinity/selector."
    )
