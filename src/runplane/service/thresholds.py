"""State-threshold clocks: abort a run that stays too long in one condition.

The clock of a condition starts when the run enters it (not at submission) and is dropped
when the run leaves it; deadlines sit in a heap, so waiting costs nothing between them.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass

from runplane.runs import THRESHOLD_TEXT, Condition
from runplane.runtimes.events import RunEvent


def breach_text(condition: Condition, last_message: str) -> str:
    """The status text of a run aborted by a threshold, with the last scheduler/kubelet reason."""
    text = f"{THRESHOLD_TEXT}{condition}"
    return f"{text} (last reason: {last_message})" if last_message else text


@dataclass(frozen=True, slots=True)
class Breach:
    uid: str
    condition: Condition
    last_message: str

    @property
    def text(self) -> str:
        return breach_text(self.condition, self.last_message)


class ThresholdClocks:
    """Deadlines of the runs a service watches. Not thread-safe: callers hold their own lock."""

    def __init__(self) -> None:
        self._limits: dict[str, Mapping[str, float]] = {}
        self._current: dict[str, tuple[Condition | None, float]] = {}
        self._last_message: dict[str, str] = {}
        self._heap: list[tuple[float, str, Condition, float]] = []

    def track(self, uid: str, seconds: Mapping[str, float]) -> None:
        """Watch ``uid`` with these limits per condition (negative: never)."""
        self._limits[uid] = dict(seconds)

    def observe(self, event: RunEvent) -> None:
        if event.uid not in self._limits:
            return
        if event.message:
            self._last_message[event.uid] = event.message
        if event.state.terminal:
            self.forget(event.uid)
            return
        current = self._current.get(event.uid)
        if current is not None and current[0] == event.condition:
            return  # same condition: its clock keeps running from when it was entered
        self._current[event.uid] = (event.condition, event.at)
        if event.condition is None:
            return
        limit = self._limits[event.uid].get(event.condition, -1)
        if limit >= 0:
            heapq.heappush(self._heap, (event.at + limit, event.uid, event.condition, event.at))

    def next_deadline(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def due(self, now: float) -> list[Breach]:
        """Runs past their deadline and still in the condition the deadline was set for."""
        breaches = []
        while self._heap and self._heap[0][0] <= now:
            _, uid, condition, since = heapq.heappop(self._heap)
            if self._current.get(uid) == (condition, since):
                breaches.append(Breach(uid, condition, self._last_message.get(uid, "")))
        return breaches

    def forget(self, uid: str) -> None:
        self._limits.pop(uid, None)
        self._current.pop(uid, None)
        self._last_message.pop(uid, None)
