"""What runs cost, and what they would have cost on on-demand nodes: realised spot savings.

An attempt pays, for the time it ran, its node group's hourly price times its share of a node
(the larger of the CPU and memory it requests, as a part of the group's node; the whole node
when the configuration does not say how big the group's nodes are). A run pays for every
attempt, lost ones included: that is what spot really cost. What on-demand would have cost is
the attempt that completed, run once on the on-demand group: no preemptions to pay for.

Pure: records and prices in, figures out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runplane.config import NodeGroupPrice, Settings
from runplane.rendering.resources import Quantities
from runplane.runs import AttemptRecord, RunRecord
from runplane.spec.quantity import resource_amount


@dataclass(frozen=True, slots=True)
class Cost:
    """In the configured prices' currency; ``spot`` is the part paid on spot nodes."""

    realised: float
    spot: float
    on_demand_equivalent: float
    #: Attempts that ran on a group with no price (their time is not counted).
    unpriced_attempts: int = 0

    @property
    def savings(self) -> float:
        return self.on_demand_equivalent - self.realised

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.realised + other.realised,
            self.spot + other.spot,
            self.on_demand_equivalent + other.on_demand_equivalent,
            self.unpriced_attempts + other.unpriced_attempts,
        )

    def describe(self) -> str:
        text = f"{money(self.realised)} realised"
        if self.spot:
            text += f" ({money(self.spot)} on spot)"
        text += f", {money(self.on_demand_equivalent)} on on-demand nodes would have cost"
        if self.unpriced_attempts:
            text += f"; {self.unpriced_attempts} attempt(s) on groups with no price"
        return text


def money(amount: float) -> str:
    """Cents for amounts of a unit or more; four significant digits below (a short run)."""
    return f"{amount:.2f}" if abs(amount) >= 1 or amount == 0 else f"{amount:.4g}"


def _share(requests: Mapping[str, Any], price: NodeGroupPrice) -> float:
    asked = Quantities.of({k: v for k, v in requests.items() if k in ("cpu", "memory")})
    shares = []
    for resource, size in (("cpu", price.cpu), ("memory", price.memory)):
        amount = asked.amount(resource)
        if size and amount is not None:
            total = resource_amount(resource, size)
            shares.append(amount / total if total else 1.0)
    return min(max(shares), 1.0) if shares else 1.0


def hourly_rate(requests: Mapping[str, Any], price: NodeGroupPrice) -> float:
    """What a run asking for ``requests`` pays per hour on a node of the group priced so."""
    return price.hourly_price * _share(requests, price)


def _hours(attempt: AttemptRecord) -> float:
    if attempt.started_at is None or attempt.ended_at is None:
        return 0.0
    return max(attempt.ended_at - attempt.started_at, 0.0) / 3600


def run_cost(
    record: RunRecord, prices: Mapping[str, NodeGroupPrice], on_demand_group: str = "on-demand"
) -> Cost | None:
    """The run's cost; ``None`` when no price is configured at all."""
    if not prices:
        return None
    realised = spot = 0.0
    unpriced = 0
    for attempt in record.attempts:
        if attempt.started_at is None:
            continue
        price = prices.get(attempt.node_group)
        if price is None:
            unpriced += 1
            continue
        requests = attempt.requests or record.requests
        paid = _hours(attempt) * price.hourly_price * _share(requests, price)
        realised += paid
        spot += paid if attempt.spot else 0.0
    on_demand = prices.get(on_demand_group)
    done = [a for a in record.attempts if a.ended_at is not None and not a.failure]
    equivalent = 0.0
    if on_demand is not None and done:
        final = done[-1]
        equivalent = (
            _hours(final)
            * on_demand.hourly_price
            * _share(final.requests or record.requests, on_demand)
        )
    return Cost(realised, spot, equivalent, unpriced)


def total_cost(
    records: Iterable[RunRecord],
    prices: Mapping[str, NodeGroupPrice],
    on_demand_group: str = "on-demand",
) -> Cost | None:
    """The runs' costs added up (a project's, say)."""
    costs = [run_cost(record, prices, on_demand_group) for record in records]
    known = [cost for cost in costs if cost is not None]
    if not known:
        return None
    total = known[0]
    for cost in known[1:]:
        total = total + cost
    return total


def configured(settings: Settings) -> tuple[dict[str, NodeGroupPrice], str]:
    """The node-group prices of ``settings`` and the group on-demand runs would use."""
    return dict(settings.service.node_groups), settings.service.on_demand_group
