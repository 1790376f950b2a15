"""What the service holds in memory of the runs it watches, under one lock.

The recorder, the launcher and the monitor all read and change it: threshold clocks start and
stop as events are recorded, decided attempts wait here until due, and callers of ``wait``
sleep on a run's end. One lock (a condition the monitor sleeps on) keeps them consistent.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Mapping

from runplane.runs import Condition
from runplane.service.thresholds import Breach, ThresholdClocks


class LiveRuns:
    def __init__(self) -> None:
        #: Held for every change below; notified when the monitor's next deadline moves up.
        self.lock = threading.Condition()
        self.clocks = ThresholdClocks()
        #: How long attempts that may run only on spot wait for a node (the spot fallback).
        self.spot_clocks = ThresholdClocks()
        #: Attempts decided and not yet launched: (due time, uid, attempt), soonest first.
        self.due: list[tuple[float, str, int]] = []
        #: Runs being launched now: at most one launch of a run at a time.
        self.launching: set[str] = set()
        self.finished: dict[str, threading.Event] = {}
        self.closed = False

    def hold(self, uid: str, thresholds: Mapping[str, float]) -> None:
        """Watch ``uid``'s thresholds and let callers wait for its end."""
        with self.lock:
            self.clocks.track(uid, thresholds)
            self.finished[uid] = threading.Event()

    def schedule(self, uid: str, attempt: int, due: float) -> None:
        with self.lock:
            heapq.heappush(self.due, (due, uid, attempt))
            self.lock.notify()

    def wait_for_spot(self, uid: str, pending: float | None) -> None:
        """Start (``pending`` seconds) or stop the clock of an attempt waiting for a spot node."""
        with self.lock:
            if pending is not None:
                self.spot_clocks.track(uid, {Condition.PENDING_NOT_SCHEDULED.value: pending})
            else:
                self.spot_clocks.forget(uid)

    def ended(self, uid: str) -> None:
        """Wake whoever waits for ``uid`` (called holding the lock)."""
        finished = self.finished.pop(uid, None)
        if finished is not None:
            finished.set()

    def watched(self) -> list[str]:
        """The runs watched here until they end (those whose usage is worth a look)."""
        with self.lock:
            return list(self.finished)

    def waiter(self, uid: str) -> threading.Event | None:
        with self.lock:
            return self.finished.get(uid)

    def next_deadline(self) -> float | None:
        """When the monitor next has something to do: a threshold, a spot wait or a retry
        due (called holding the lock)."""
        deadlines = [
            d
            for d in (
                self.clocks.next_deadline(),
                self.spot_clocks.next_deadline(),
                self.due[0][0] if self.due else None,
            )
            if d is not None
        ]
        return min(deadlines, default=None)

    def take_due(self, now: float) -> tuple[list[Breach], list[Breach], list[tuple[str, int]]]:
        """Thresholds breached, spot waits run out and attempts due by ``now``, each taken
        once (called holding the lock)."""
        breaches = self.clocks.due(now)
        spot_waits = self.spot_clocks.due(now)
        due = []
        while self.due and self.due[0][0] <= now:
            _, uid, attempt = heapq.heappop(self.due)
            due.append((uid, attempt))
        return breaches, spot_waits, due

    def close(self) -> None:
        with self.lock:
            self.closed = True
            self.lock.notify_all()
