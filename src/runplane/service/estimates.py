"""What a run is expected to cost before it starts: its requests' hourly rate on the node
group its preemption mode places it on, times the median of what the function's past runs
took.

The rate is the one :mod:`runplane.service.costs` charges a run that ran: the group's hourly
price times the larger share of a node's CPU and memory it requests. The group: the
on-demand group (``service.on_demand_group``) for ``prevent`` and ``none``; for
``constrain``, the group named ``spot`` when it has a price, else the cheapest priced group
other than the on-demand one; ``allow`` may land on either, so it is estimated at the
on-demand price, the most it pays. The duration: the median, over the function's last
:data:`PAST_RUNS` completed runs (same project and name), of the time their attempts ran, lost
attempts included (what a run paid for); with none, the duration is unknown and only the
rate is told.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, select

from runplane.config import NodeGroupPrice, Settings
from runplane.runs import RunState
from runplane.service.costs import configured, hourly_rate, money
from runplane.service.db.models import ATTEMPTS, RUNS
from runplane.spec.scheduling import PreemptionMode

#: Completed runs of a function whose durations the estimate takes the median of.
PAST_RUNS = 20


@dataclass(frozen=True, slots=True)
class Estimate:
    """A run's expected cost; ``hourly`` is ``None`` when its group has no price, ``seconds``
    when no past run tells how long it takes."""

    group: str
    hourly: float | None
    seconds: float | None
    #: The past runs the duration is the median of.
    runs: int = 0
    #: Why the estimate is what it is, where a reader would not guess (allow's price).
    note: str = ""

    @property
    def cost(self) -> float | None:
        if self.hourly is None or self.seconds is None:
            return None
        return self.hourly * self.seconds / 3600

    def describe(self) -> str:
        if not self.group:
            return "no cost to estimate: no node-group prices are configured (service.node_groups)"
        if self.hourly is None:
            return f"no cost to estimate: node group {self.group!r} has no price"
        rate = f"{money(self.hourly)} per hour on {self.group} nodes"
        note = f" ({self.note})" if self.note else ""
        if self.cost is None or self.seconds is None:
            return f"unknown duration (no completed run of this function yet); {rate}{note}"
        return (
            f"expected cost {money(self.cost)}: {rate} x {_span(self.seconds)}, the median of "
            f"{self.runs} past run{'' if self.runs == 1 else 's'}{note}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "hourly": self.hourly,
            "seconds": self.seconds,
            "runs": self.runs,
            "cost": self.cost,
            "text": self.describe(),
        }


def _span(seconds: float) -> str:
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{seconds:.1f}s"


def placement_group(
    mode: PreemptionMode | None, prices: Mapping[str, NodeGroupPrice], on_demand: str
) -> str:
    """The priced group a run of ``mode`` is estimated on (see the module's words)."""
    if mode is PreemptionMode.CONSTRAIN:
        if "spot" in prices:
            return "spot"
        others = sorted(
            (price.hourly_price, name) for name, price in prices.items() if name != on_demand
        )
        if others:
            return others[0][1]
    return on_demand


def estimate(
    requests: Mapping[str, Any],
    mode: PreemptionMode | None,
    settings: Settings,
    durations: Sequence[float],
) -> Estimate:
    """The expected cost of a run asking for ``requests`` in ``mode``, given how long past
    runs of its function took."""
    prices, on_demand = configured(settings)
    if not prices:
        return Estimate("", None, None)
    group = placement_group(mode, prices, on_demand)
    price = prices.get(group)
    hourly = None if price is None else hourly_rate(requests, price)
    seconds = statistics.median(durations) if durations else None
    note = "it may run on spot nodes too, for less" if mode is PreemptionMode.ALLOW else ""
    return Estimate(group, hourly, seconds, len(durations), note)


def past_durations(engine: Engine, project: str, name: str, limit: int = PAST_RUNS) -> list[float]:
    """Seconds each of the function's last ``limit`` completed runs ran, attempts added up."""
    recent = (
        select(RUNS.c.uid)
        .where(
            RUNS.c.project == project,
            RUNS.c.name == name,
            RUNS.c.state == RunState.COMPLETED.value,
        )
        .order_by(RUNS.c.created_at.desc(), RUNS.c.uid.desc())
        .limit(limit)
    )
    query = select(ATTEMPTS.c.run_uid, ATTEMPTS.c.started_at, ATTEMPTS.c.ended_at).where(
        ATTEMPTS.c.run_uid.in_(recent.scalar_subquery()),
        ATTEMPTS.c.started_at.is_not(None),
        ATTEMPTS.c.ended_at.is_not(None),
    )
    seconds: dict[str, float] = defaultdict(float)
    with engine.connect() as connection:
        for uid, started, ended in connection.execute(query):
            seconds[uid] += max(ended - started, 0.0)
    return list(seconds.values())
