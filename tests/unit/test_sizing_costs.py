"""Right-sizing from recorded usage, and realised costs against on-demand, on plain records."""

from __future__ import annotations

from typing import Any

import pytest

from runplane.config import NodeGroupPrice, Settings
from runplane.errors import ConfigError
from runplane.runs import AttemptRecord, RunRecord, RunState
from runplane.service.costs import run_cost, total_cost
from runplane.service.sizing import oversized, suggest

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


def test_usage_suggests_requests_with_headroom() -> None:
    runs = [
        record(attempt(1, peak_memory_bytes=300 * MI, cpu_seconds=0.5 * HOUR)),
        record(attempt(1, peak_memory_bytes=500 * MI, cpu_seconds=0.25 * HOUR)),
        record(attempt(1, started_at=None, ended_at=None)),  # never ran: nothing measured
    ]
    proposal = suggest(runs, {"cpu": "4", "memory": "8Gi"})
    assert proposal is not None
    assert proposal.attempts == 2
    assert (proposal.peak_memory_bytes, proposal.peak_cores) == (500 * MI, 0.5)
    assert proposal.requests == {"cpu": "600m", "memory": "600Mi"}
    assert proposal.limits == {"memory": "600Mi"}
    assert proposal.call == "fn.with_requests(cpu='600m', mem='600Mi').with_limits(mem='600Mi')"
    assert [w.split(":")[0] for w in proposal.warnings] == [
        "oversized-request (memory)",
        "oversized-request (cpu)",
    ]
    assert suggest([record(attempt(1))]) is None  # usage not measured (a cluster without metrics)


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


def test_prices_are_configuration() -> None:
    settings = Settings(service={"node_groups": {"spot": {"hourly_price": 0.1, "cpu": "8"}}})
    assert settings.service.node_groups["spot"].hourly_price == 0.1
    with pytest.raises((ConfigError, ValueError)):
        Settings(service={"node_groups": {"spot": {"hourly_price": -1}}})
