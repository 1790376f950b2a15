"""Project quotas: checked input, Kueue's names, and what a run lacks to fit, borrowing."""

from __future__ import annotations

import ast
import dataclasses

import pytest

from runplane.errors import InvalidValueError
from runplane.placement.quotas import (
    MOST_AHEAD_SAID,
    ProjectQuota,
    ResourceQuota,
    borrows,
    shortfall,
    waiting_text,
)

CORE = 1000


def quota(**flavors: dict[str, object]) -> ProjectQuota:
    return ProjectQuota(
        {
            flavor.replace("_", "-"): ProjectQuota.flavor_of(flavor, v)
            for flavor, v in flavors.items()
        }
    )


def test_a_quota_is_kueues_fields_and_names() -> None:
    team = quota(
        on_demand={"cpu": "16", "memory": "64Gi", "gpus": {"nominal": 2, "borrowing_limit": 0}}
    )
    assert team.kueue() == {"on-demand": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2"}}
    assert team.flavors["on-demand"]["gpus"] == ResourceQuota("2", "0", None)
    assert ProjectQuota.from_json(team.to_json()) == team


@pytest.mark.parametrize(
    ("values", "field", "said"),
    [
        ({"cpu": "١٦"}, "on_demand.cpu.nominal", "ASCII digits"),
        ({"cpu": "-1"}, "on_demand.cpu.nominal", "non-negative"),
        ({"gpus": "1.5"}, "on_demand.gpus.nominal", "counted whole"),
        ({"memory": "1g"}, "on_demand.memory.nominal", "Kubernetes suffix"),
        ({"disk": "1"}, "on_demand", "cpu, memory, gpus"),
        ({"cpu": {"nominal": "2", "lending_limit": "3"}}, "on_demand.cpu.lending_limit", "at most"),
        ({"cpu": {"borrow": "2"}}, "on_demand.cpu.borrow", "nominal (required)"),
        ({}, "on_demand", "maps cpu"),
    ],
)
def test_bad_quotas_are_refused_naming_field_value_and_example(
    values: dict[str, object], field: str, said: str
) -> None:
    with pytest.raises(InvalidValueError) as refused:
        ProjectQuota.flavor_of("on_demand", values)
    assert refused.value.field == field
    assert said in str(refused.value)
    assert refused.value.example


def test_a_run_within_quota_fits_and_one_beyond_lacks_the_difference() -> None:
    table = {"a": quota(on_demand={"cpu": {"nominal": "4", "borrowing_limit": "0"}})}
    usage = {("a", "on-demand"): {"cpu": 2 * CORE}}
    assert shortfall(table, usage, "a", "on-demand", {"cpu": 2 * CORE}) == {}
    assert shortfall(table, usage, "a", "on-demand", {"cpu": 6 * CORE}) == {"cpu": 4 * CORE}
    # no quota on spot, no quota for project b: not limited
    assert shortfall(table, usage, "a", "spot", {"cpu": 64 * CORE}) == {}
    assert shortfall(table, usage, "b", "on-demand", {"cpu": 64 * CORE}) == {}


def test_idle_quota_of_the_cohort_is_borrowed_within_the_limits() -> None:
    table = {
        "a": quota(on_demand={"cpu": "4"}),
        "b": quota(on_demand={"cpu": {"nominal": "4", "lending_limit": "2"}}),
    }
    idle: dict[tuple[str, str], dict[str, int]] = {}
    # a may take its 4 and b's lendable 2, not b's own 2
    assert shortfall(table, idle, "a", "on-demand", {"cpu": 6 * CORE}) == {}
    assert borrows(table, idle, "a", "on-demand", {"cpu": 6 * CORE})
    assert not borrows(table, idle, "a", "on-demand", {"cpu": 4 * CORE})
    assert shortfall(table, idle, "a", "on-demand", {"cpu": 7 * CORE}) == {"cpu": 1 * CORE}
    # b uses 3 of its own: only 1 is left to lend
    busy = {("b", "on-demand"): {"cpu": 3 * CORE}}
    assert shortfall(table, busy, "a", "on-demand", {"cpu": 6 * CORE}) == {"cpu": 1 * CORE}
    # a borrowing limit caps borrowing
    capped = {**table, "a": quota(on_demand={"cpu": {"nominal": "4", "borrowing_limit": "1"}})}
    assert shortfall(capped, idle, "a", "on-demand", {"cpu": 6 * CORE}) == {"cpu": 1 * CORE}


def test_a_quota_wait_says_who_needs_what_more_where_and_how_many_are_ahead() -> None:
    assert waiting_text("team-a", "on-demand", {"cpu": 4000}, 2) == (
        "waiting for quota: project team-a needs 4 CPUs more on on-demand; 2 runs ahead of it"
    )
    assert waiting_text("t", "spot", {"nvidia.com/gpu": 1, "memory": 2**31}, 0) == (
        "waiting for quota: project t needs 2Gi of memory and 1 GPU more on spot; no run "
        "ahead of it"
    )


def test_the_runs_ahead_are_counted_up_to_a_cap_then_said_as_more_than_it() -> None:
    """Far back in a long queue the text stays the same as the queue moves."""
    assert MOST_AHEAD_SAID == 20
    said = {n: waiting_text("t", "spot", {"cpu": 1000}, n).split("; ")[1] for n in (20, 21, 500)}
    assert said == {
        20: "20 runs ahead of it",
        21: "more than 20 runs ahead of it",
        500: "more than 20 runs ahead of it",
    }


def test_a_mapping_with_an_unknown_term_is_refused_with_a_mapping_to_copy() -> None:
    with pytest.raises(InvalidValueError) as refused:
        ProjectQuota.flavor_of("on_demand", {"cpu": {"nominal": "4", "foo": 1}})
    assert ast.literal_eval(str(refused.value.example)) == {"nominal": "16", "borrowing_limit": 0}


def test_a_run_resized_in_place_holds_its_grown_requests_against_the_quota() -> None:
    from runplane.runs import ResizeRecord, RunState
    from runplane.service.quotas import usage_view
    from tests.unit.test_sizing_costs import attempt, record

    mib = 2**20
    resized = dataclasses.replace(
        record(attempt(1)),
        project="team-a",
        state=RunState.RUNNING,
        requests={"cpu": "100m", "memory": "64Mi"},
        limits={"cpu": "500m", "memory": "128Mi"},
        ended_at=None,
        resizes=[
            ResizeRecord(1.0, 1, 128 * mib, 256 * mib, 500, 1500, "asked", "manual", "bob"),
            ResizeRecord(2.0, 1, 256 * mib, 1024 * mib, None, None, "no room", outcome="refused"),
        ],
    )
    view = usage_view(quota(on_demand={"cpu": "1"}), [resized])["on-demand"]
    assert view["cpu"]["used"] == "1.1"
    assert view["memory"]["used"] == "192Mi"
