"""How many replicas a serving function wants: the HorizontalPodAutoscaler's rule, here.

A deployment on this machine scales as the ``autoscaling/v2`` HorizontalPodAutoscaler it
renders for a cluster would: on the replicas' CPU use as a percentage of their CPU request,
against ``target_cpu_percent``.

    desired = ceil(current * utilisation / target)

unchanged while ``utilisation / target`` is within 10 % of 1, at most double the current
count (and at least 4 more) per step up, clamped to ``[min_replicas, max_replicas]``. A step
down takes the highest recommendation of the last ``scale_down_delay`` seconds, so a short lull
does not drop replicas that the next burst needs. Without a CPU request there is nothing to
measure against and the count stays where it is, as on a cluster (the render lint says so).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

#: Within this ratio of the target nothing changes (the autoscaler's ``tolerance``).
TOLERANCE = 0.1


@dataclass(frozen=True, slots=True)
class Decision:
    """One evaluation: the count wanted, and the figures it came from, for the status."""

    current: int
    desired: int
    utilisation: float | None
    reason: str


@dataclass(slots=True)
class Autoscaler:
    """The replica count of one deployment between ``minimum`` and ``maximum``."""

    minimum: int
    maximum: int
    target_percent: int
    scale_down_delay: float
    _recommendations: deque[tuple[float, int]] = field(default_factory=deque)

    def clamp(self, count: int) -> int:
        return min(max(count, self.minimum), self.maximum)

    def decide(self, now: float, current: int, utilisation: float | None) -> Decision:
        """The count for ``current`` replicas whose average CPU use is ``utilisation``
        percent of their request (``None``: no CPU request, or nothing measured yet)."""
        if utilisation is None:
            desired = self.clamp(current)
            return Decision(current, desired, None, "no CPU request to measure utilisation against")
        ratio = utilisation / self.target_percent
        raw = current if abs(ratio - 1.0) <= TOLERANCE else math.ceil(current * ratio)
        raw = min(raw, max(2 * current, current + 4))
        recommendation = self.clamp(raw)
        self._recommendations.append((now, recommendation))
        while self._recommendations and self._recommendations[0][0] < now - self.scale_down_delay:
            self._recommendations.popleft()
        desired = recommendation
        if recommendation < current:  # down only as far as the whole window agrees
            desired = min(current, max(r for _, r in self._recommendations))
        reason = (
            f"CPU {utilisation:.0f}% of request against a target of {self.target_percent}%: "
            f"{current} -> {desired} replica(s)"
        )
        return Decision(current, desired, utilisation, reason)
