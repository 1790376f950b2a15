"""Right-sizing from recorded usage, and realised costs against on-demand, on plain records."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from runplane.config import NodeGroupPrice, Settings
from runplane.errors import ConfigError
from runplane.runs import AttemptRecord, ResizeRecord, RunRecord, RunState
from runplane.service.costs import attempt_cost, run_cost, total_cost
from runplane.service.sizing import MEMORY_FLOOR, oversized, suggest, suggestion_json
from runplane.spec.quantity import mebibytes

MI = 2**20
HOUR = 3600.0


def attempt(number: int, **fields: Any) -> AttemptRecord:
    values: dict[str, Any] = {
        "number": number,
        "node": "n",
        "process_id": None,
        "started_at": 0.0,
        "ended_at": HOUR,
        "exit_code": 0,
        "reason": "Completed",
        "requests": {"cpu": "2", "memory": "8Gi"},
        "limits": {},
    }
    return AttemptRecord(**{**values, **fields})


def record(*attempts: AttemptRecord) -> RunRecord:
    return RunRecord(
        uid="a" * 32,
        project="p",
        name="f",
        runtime="kubernetes",
        state=RunState.COMPLETED,
        reason="Completed",
        status_text="",
        params={},
        inputs={},
        thresholds={},
        priority_class="medium",
        requests={"cpu": "2", "memory": "8Gi"},
        limits={},
        results={},
        peak_memory_bytes=0,
        cpu_seconds=0.0,
        created_at=0.0,
        updated_at=0.0,
        state_since=0.0,
        started_at=0.0,
        ended_at=HOUR,
        function={},
        attempts=list(attempts),
        attempt=len(attempts),
    )


def test_usage_suggests_the_p95_with_a_margin() -> None:
    runs = [
        record(attempt(1, peak_memory_bytes=300 * MI, cpu_seconds=0.5 * HOUR)),
        record(attempt(1, peak_memory_bytes=500 * MI, cpu_seconds=0.25 * HOUR)),
        record(attempt(1, peak_memory_bytes=400 * MI, cpu_seconds=0.4 * HOUR)),
        record(attempt(1, started_at=None, ended_at=None)),  # never ran: nothing measured
    ]
    proposal = suggest(runs, {"cpu": "4", "memory": "8Gi"})
    assert proposal is not None
    assert proposal.attempts == 3
    assert proposal.enough
    assert (proposal.peak_memory_bytes, proposal.peak_cores) == (500 * MI, 0.5)
    # The p95 of three is the highest: 500 MiB x 1.15, 0.5 cores x 1.15.
    assert proposal.requests == {"cpu": "580m", "memory": "575Mi"}
    assert proposal.limits == {"memory": "575Mi"}
    assert proposal.call == "fn.with_requests(cpu='580m', mem='575Mi').with_limits(mem='575Mi')"
    assert proposal.basis == (
        "3 measured attempt(s); peak memory 300Mi to 500Mi (median 400Mi, p95 500Mi); average "
        "cpu 0.25 to 0.50 cores (median 0.40, p95 0.50) over 3 attempt(s) of 1 s or more"
    )
    assert proposal.notes == []
    assert [w.split(":")[0] for w in proposal.warnings] == [
        "oversized-request (memory)",
        "oversized-request (cpu)",
    ]
    assert suggest([record(attempt(1))]) is None  # usage not measured (a cluster without metrics)
    assert suggestion_json(None)["verdict"] == "too few runs: 0 of 3 measured attempts needed"


def test_too_few_runs_suggest_nothing_and_say_so() -> None:
    proposal = suggest([record(attempt(1, peak_memory_bytes=50 * MI, cpu_seconds=600.0))])
    assert proposal is not None
    assert not proposal.enough
    assert (proposal.requests, proposal.limits, proposal.call) == ({}, {}, "")
    assert proposal.verdict == (
        "too few runs: 1 of 3 measured attempts needed before a suggestion is made"
    )
    assert proposal.basis.startswith("1 measured attempt(s); peak memory 50Mi to 50Mi")
    answer = suggestion_json(proposal)
    assert (answer["attempts"], answer["needed"], answer["enough"]) == (1, 3, False)


def test_one_unusual_run_neither_sets_nor_escapes_the_suggestion() -> None:
    peaks = [100 + n for n in range(20)] + [1000]  # MiB; one run of 21 took ten times more
    proposal = suggest([record(attempt(1, peak_memory_bytes=p * MI)) for p in peaks])
    assert proposal is not None
    assert proposal.memory.count == 21
    assert (proposal.memory.low, proposal.memory.high) == (100 * MI, 1000 * MI)
    assert proposal.memory.median == 110 * MI
    assert proposal.memory.high_percentile == 119 * MI  # the 20th of 21
    assert proposal.limits == {"memory": "137Mi"}  # 119 MiB x 1.15, rounded up
    assert "peak memory 100Mi to 1000Mi (median 110Mi, p95 119Mi)" in proposal.basis


def test_memory_never_goes_below_what_the_interpreter_needs_in_a_pod() -> None:
    proposal = suggest([record(attempt(1, peak_memory_bytes=2 * MI)) for _ in range(3)])
    assert proposal is not None
    assert proposal.limits == {"memory": mebibytes(MEMORY_FLOOR)} == {"memory": "32Mi"}


def test_cpu_of_runs_too_short_to_measure_is_left_out() -> None:
    short = {"started_at": 0.0, "ended_at": 0.2, "cpu_seconds": 0.164}  # "820m"
    runs = [record(attempt(1, peak_memory_bytes=64 * MI, **short)) for _ in range(3)]
    proposal = suggest(runs)
    assert proposal is not None
    assert proposal.cores is None
    assert proposal.requests == {"memory": "74Mi"}
    assert proposal.notes == [
        "cpu: 3 attempt(s) ran under 1 s, too short to measure CPU use; they are left out, so "
        "no CPU request is suggested"
    ]
    long = record(attempt(1, peak_memory_bytes=64 * MI, cpu_seconds=0.3 * HOUR))
    proposal = suggest([*runs, long])
    assert proposal is not None
    assert proposal.cores is not None
    assert proposal.cores.count == 1
    assert proposal.requests["cpu"] == "350m"  # 0.3 x 1.15: the short runs' 0.82 left out
    assert proposal.notes[0].startswith("cpu: 3 attempt(s) ran under 1 s")


def test_gpus_are_suggested_as_given_and_their_use_is_said_unknown() -> None:
    given = {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2"}}
    runs = [record(attempt(1, peak_memory_bytes=900 * MI, **given)) for _ in range(3)]
    proposal = suggest(runs)
    assert proposal is not None
    assert proposal.gpus == 2
    assert proposal.limits == {"memory": "1035Mi", "nvidia.com/gpu": "2"}
    assert proposal.call.endswith(".with_limits(mem='1035Mi', gpus=2)")
    assert (
        "gpus: the runs were given up to 2; how much of them they used is not measured, so the "
        "suggestion keeps what they were given"
    ) in proposal.notes
    plain = suggest([record(attempt(1, peak_memory_bytes=900 * MI)) for _ in range(3)])
    assert plain is not None
    assert plain.gpus == 0
    assert "nvidia.com/gpu" not in plain.limits


def test_a_request_within_four_times_the_peak_is_fine() -> None:
    assert oversized({"memory": "1Gi", "cpu": "1"}, 300 * MI, 0.3) == []
    assert oversized({"memory": "2Gi"}, 300 * MI, 0.0) != []


SPOT = NodeGroupPrice(hourly_price=0.12, cpu="8", memory="32Gi")
ON_DEMAND = NodeGroupPrice(hourly_price=0.40, cpu="8", memory="32Gi")
PRICES = {"spot": SPOT, "on-demand": ON_DEMAND}


def test_a_run_pays_every_attempt_and_compares_with_one_on_demand_run() -> None:
    lost = attempt(1, node_group="spot", spot=True, failure="node_lost", ended_at=0.5 * HOUR)
    done = attempt(2, node_group="spot", spot=True, started_at=HOUR, ended_at=2 * HOUR)
    cost = run_cost(record(lost, done), PRICES)
    assert cost is not None
    share = 0.25  # 2 of 8 CPUs, 8 of 32 Gi
    assert cost.realised == pytest.approx(1.5 * 0.12 * share)
    assert cost.spot == cost.realised
    assert cost.on_demand_equivalent == pytest.approx(1.0 * 0.40 * share)
    assert cost.savings == pytest.approx((0.40 - 0.18) * share)
    assert "realised" in cost.describe()
    assert run_cost(record(done), {}) is None  # no prices, no costs


def test_unpriced_groups_and_whole_nodes() -> None:
    whole = {"spot": NodeGroupPrice(hourly_price=1.0)}
    cost = run_cost(
        record(attempt(1, node_group="spot", spot=True), attempt(2, node_group="gpu")), whole
    )
    assert cost is not None
    assert cost.realised == pytest.approx(1.0)
    assert cost.unpriced_attempts == 1
    total = total_cost([record(attempt(1, node_group="spot"))] * 3, whole)
    assert total is not None
    assert total.realised == pytest.approx(3.0)


def grow(at: float, number: int = 1, outcome: str = "applied") -> ResizeRecord:
    """Memory 16Gi -> 24Gi limit at ``at``: the 8Gi request grows to 16Gi (half a node)."""
    return ResizeRecord(
        at=at,
        attempt=number,
        memory_from=16 * 1024 * MI,
        memory_to=24 * 1024 * MI,
        cpu_from=None,
        cpu_to=None,
        why="by hand",
        mode="manual",
        outcome=outcome,
    )


def test_a_resized_attempt_pays_each_interval_at_the_requests_in_force() -> None:
    done = attempt(1, node_group="on-demand", started_at=0.0, ended_at=2 * HOUR)
    plain = run_cost(record(done), PRICES)
    resized = run_cost(dataclasses.replace(record(done), resizes=[grow(HOUR)]), PRICES)
    assert plain is not None
    assert resized is not None
    # one hour at a quarter of a node (8 of 32 Gi), one at half of it (16 of 32 Gi)
    assert plain.realised == pytest.approx(2 * 0.40 * 0.25)
    assert resized.realised == pytest.approx(0.40 * 0.25 + 0.40 * 0.5)
    assert resized.on_demand_equivalent == pytest.approx(resized.realised)
    # a refused resize, or one of another attempt, changes nothing
    others = [grow(HOUR, outcome="refused"), grow(HOUR, number=2)]
    unchanged = run_cost(dataclasses.replace(record(done), resizes=others), PRICES)
    assert unchanged is not None
    assert unchanged.realised == pytest.approx(plain.realised)


def test_an_attempts_cost_inside_a_window_takes_the_part_of_each_interval_inside_it() -> None:
    requests = {"cpu": "2", "memory": "8Gi"}
    resizes = [grow(HOUR)]
    whole = attempt_cost(ON_DEMAND, requests, 0.0, 2 * HOUR, resizes)
    before = attempt_cost(ON_DEMAND, requests, 0.0, 2 * HOUR, resizes, until=HOUR)
    after = attempt_cost(ON_DEMAND, requests, 0.0, 2 * HOUR, resizes, since=HOUR)
    assert before == pytest.approx(0.40 * 0.25)
    assert after == pytest.approx(0.40 * 0.5)
    assert before + after == pytest.approx(whole)
    # a resize recorded outside the attempt's time is taken at its edge
    assert attempt_cost(ON_DEMAND, requests, HOUR, 2 * HOUR, [grow(0.0)]) == pytest.approx(0.2)


def test_prices_are_configuration() -> None:
    settings = Settings(service={"node_groups": {"spot": {"hourly_price": 0.1, "cpu": "8"}}})
    assert settings.service.node_groups["spot"].hourly_price == 0.1
    with pytest.raises((ConfigError, ValueError)):
        Settings(service={"node_groups": {"spot": {"hourly_price": -1}}})
