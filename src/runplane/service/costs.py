"""What runs cost, and what they would have cost on on-demand nodes: realised spot savings.

An attempt pays, for the time it ran, its node group's hourly price times its share of a node
(the larger of the CPU and memory it requests, as a part of the group's node; the whole node
when the configuration does not say how big the group's nodes are). An attempt resized in place
pays piecewise: each interval between its resizes at the requests in force during it (a resize
grows the requests by as much as the limits, as both runtimes grant it), so a run grown by hand
or by right-sizing pays for what it was given. A run pays for every attempt, lost ones
included: that is what spot really cost. What on-demand would have cost is the attempt that
completed, run once on the on-demand group: no preemptions to pay for.

:func:`attempt_cost` is the one place an attempt's cost is worked out; a run's cost here, a
project's spend against its budget (:mod:`runplane.service.budgets`) and ``runplane cost`` all
use it. Pure: records and prices in, figures out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runplane.config import NodeGroupPrice, Settings
from runplane.rendering.resources import Quantities
from runplane.runs import AttemptRecord, ResizeRecord, RunRecord
from runplane.spec.quantity import resource_amount

#: The resources a node's share is priced by.
PRICED = ("cpu", "memory")


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


def _amounts(requests: Mapping[str, Any]) -> dict[str, int]:
    """The priced requests as numbers (millicores, bytes)."""
    asked = Quantities.of({k: v for k, v in requests.items() if k in PRICED})
    return {name: amount for name in PRICED if (amount := asked.amount(name)) is not None}


def _share(amounts: Mapping[str, int], price: NodeGroupPrice) -> float:
    shares = []
    for resource, size in (("cpu", price.cpu), ("memory", price.memory)):
        amount = amounts.get(resource)
        if size and amount is not None:
            total = resource_amount(resource, size)
            shares.append(amount / total if total else 1.0)
    return min(max(shares), 1.0) if shares else 1.0


def hourly_rate(requests: Mapping[str, Any], price: NodeGroupPrice) -> float:
    """What a run asking for ``requests`` pays per hour on a node of the group priced so."""
    return price.hourly_price * _share(_amounts(requests), price)


def _grown(amounts: Mapping[str, int], resize: ResizeRecord) -> dict[str, int]:
    """The requests in force after ``resize``: grown (or shrunk) by as much as its limits,
    never above the new limit, as the runtimes grant a resize."""
    grown = dict(amounts)
    for name, before, after in (
        ("memory", resize.memory_from, resize.memory_to),
        ("cpu", resize.cpu_from, resize.cpu_to),
    ):
        asked = grown.get(name)
        if asked is not None and before is not None and after is not None and after != before:
            grown[name] = max(min(asked + after - before, after), 1)
    return grown


def attempt_cost(
    price: NodeGroupPrice,
    requests: Mapping[str, Any],
    began: float,
    ended: float,
    resizes: Iterable[ResizeRecord] = (),
    since: float = -math.inf,
    until: float = math.inf,
) -> float:
    """What an attempt that ran from ``began`` to ``ended`` on a node priced ``price``, asking
    for ``requests`` when it started, paid between ``since`` and ``until``: each interval at
    the requests in force during it. ``resizes``: the attempt's own (those of other attempts,
    and refused ones, are the caller's to leave out or are skipped here by outcome)."""
    start, stop = max(began, since), min(ended, until)
    if stop <= start:
        return 0.0
    amounts = _amounts(requests)
    paid, mark = 0.0, began
    for resize in sorted((r for r in resizes if r.applied), key=lambda r: r.at):
        at = min(max(resize.at, began), ended)
        paid += _span(mark, at, start, stop) * _share(amounts, price)
        amounts, mark = _grown(amounts, resize), at
    paid += _span(mark, ended, start, stop) * _share(amounts, price)
    return paid * price.hourly_price


def _span(begin: float, end: float, since: float, until: float) -> float:
    """Hours of ``[begin, end)`` inside ``[since, until)``."""
    return max(min(end, until) - max(begin, since), 0.0) / 3600


def _paid(attempt: AttemptRecord, record: RunRecord, price: NodeGroupPrice) -> float:
    if attempt.started_at is None or attempt.ended_at is None:
        return 0.0
    own = (r for r in record.resizes if r.attempt == attempt.number)
    return attempt_cost(
        price, attempt.requests or record.requests, attempt.started_at, attempt.ended_at, own
    )


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
        paid = _paid(attempt, record, price)
        realised += paid
        spot += paid if attempt.spot else 0.0
    on_demand = prices.get(on_demand_group)
    done = [a for a in record.attempts if a.ended_at is not None and not a.failure]
    equivalent = 0.0
    if on_demand is not None and done:
        equivalent = _paid(done[-1], record, on_demand)
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
