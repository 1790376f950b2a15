"""The recorder: a runtime's events become run records, a burst per transaction.

Every event enters the service here, the runtime's and the ends the service decides itself,
and is classified once. A failed attempt's retry decision is recorded with its end, in the
same transaction; then the run's clocks start or stop, a decided attempt waits to be due, and
whoever waits for the run's end wakes.

Events the store cannot take now (a full disk, a database busy or unreachable: see
:mod:`.outage`) are held, in order, and written again with the next burst or after a back-off
that grows to :data:`_RETRY_MOST` seconds, so a run's record reaches its end at most that long
after the storage takes writes again. A run's later events wait behind its held ones.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import replace

from runplane.runs import RETRYABLE, TERMINAL, Reason
from runplane.runtimes.events import EventChannel, RunEvent
from runplane.service import retries
from runplane.service.outage import outage
from runplane.service.retries import RetryDecision
from runplane.service.shared import Shared

log = logging.getLogger(__name__)

#: Events written in one transaction at most.
_BATCH = 256

#: Events arriving faster than this (per second, over the last :data:`_RATE_WINDOW`) make
#: the recorder wait up to :data:`_LINGER` seconds before it takes a burst, to take a larger
#: one. At a few dozen events a second (a dozen runs a second on a cluster, each three or four
#: pod events) a transaction per event costs more than the events' own rows: on SQLite a
#: burst of four events costs a third of what four bursts of one cost; at the scale
#: benchmark's load, waiting 100 ms instead of 50 took a thirtieth off the service's CPU per
#: run (docs/decisions.md). A record is then up to 100 ms behind its pod, a fraction of a
#: pod's start; an event that ends a run cuts the wait short, and thresholds count from the
#: event's own time, not the record's.
_BUSY_RATE = 40.0
_RATE_WINDOW = 20
_LINGER = 0.1

#: Seconds before held events are written again: the first wait, doubled after each failed
#: try up to the last.
_RETRY_FIRST = 0.05
_RETRY_MOST = 2.0
#: Events held at most; beyond, the oldest are dropped (logged), and their runs are settled
#: from what they left behind when the service starts again.
_HELD_MOST = 100_000


async def _bursts(
    events: EventChannel,
    limit: int,
    patience: Callable[[], float | None] = lambda: None,
) -> AsyncIterator[list[RunEvent]]:
    """Events grouped as they arrive: each burst is what came while the previous one was
    being handled (a watch delivers them in bursts; one transaction each is far cheaper).

    While events pour in (a few dozen a second or more), a burst waits a moment for more
    first: each is a transaction that holds the write lock submissions also need, and a few
    larger ones cost less than many small ones. Meanwhile an event that arrives does not wake
    the recorder (a wake cost more than the event's share of the burst); a run's end does, and
    ends the wait (:func:`_linger`): whoever waits for a run is never held back by it, and a
    lone run's events are recorded at once: the wait is for throughput, never on a quiet
    path.

    A burst is empty when nothing came for ``patience()`` seconds (``None``: however long
    it takes): the turn to write again what the store refused.
    """
    arrivals: deque[float] = deque(maxlen=_RATE_WINDOW)
    with events.reader():
        while True:
            await events.wait(patience())
            burst = events.take(limit)
            if not burst:
                if events.drained:
                    return
                yield []
                continue
            now = time.monotonic()
            busy = len(arrivals) == _RATE_WINDOW and now - arrivals[0] < _RATE_WINDOW / _BUSY_RATE
            if busy and len(burst) < limit and not any(e.state in TERMINAL for e in burst):
                await _linger(events, _LINGER)
                burst += events.take(limit - len(burst))
            arrivals.extend([now] * len(burst))
            yield burst


async def _linger(events: EventChannel, seconds: float) -> None:
    """Wait ``seconds`` for more events, or until one that ends a run arrives."""
    await events.wait(seconds, ends_only=True)


class Recorder:
    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        #: Events the store refused in an outage, oldest first, as they came (unclassified).
        self._held: list[RunEvent] = []
        self._holding = threading.Lock()
        #: The outage that holds them (``None``: none), and the wait before the next try.
        self._outage: str | None = None
        self._retry = _RETRY_FIRST

    async def run(self) -> None:
        """Write the runtime's events in order, a burst per transaction, until it closes;
        then a last try at what is held."""
        async for burst in _bursts(self.shared.runtime.events(), _BATCH, self._patience):
            try:
                self.write(burst)
            except Exception:  # the recorder must outlive any one burst
                log.exception("recording a burst of %d events failed", len(burst))
        try:
            self.write([])
        except Exception:
            log.exception("recording the held events failed")
        with self._holding:
            if self._held:
                log.error(
                    "%d events were not recorded (%s); their runs are settled from what they "
                    "left behind when the service starts again",
                    len(self._held),
                    self._outage,
                )

    @property
    def held(self) -> int:
        """How many events wait for the store to take them."""
        with self._holding:
            return len(self._held)

    def _patience(self) -> float:
        with self._holding:
            return self._retry if self._held else _RETRY_MOST

    def _hold(self, events: list[RunEvent], reason: str) -> None:
        """Keep ``events`` (refused for ``reason``) to write again, before any held since."""
        if not events:
            return
        with self._holding:
            if self._outage is None:
                log.warning(
                    "the store cannot take events now (%s); %d held, written again as soon "
                    "as it can",
                    reason,
                    len(events),
                )
                self._retry = _RETRY_FIRST
            else:
                self._retry = min(self._retry * 2, _RETRY_MOST)
            self._outage = reason
            self._held[:0] = events
            dropped = len(self._held) - _HELD_MOST
            if dropped > 0:
                log.error("%d held events dropped: %s", dropped, self._held[:dropped])
                del self._held[:dropped]

    def write(self, events: list[RunEvent]) -> None:
        """Record events (with the retry decisions of failed attempts), then start or stop
        their threshold clocks, schedule decided attempts and wake waiters.

        Every event of the runtime, and every end the service itself decides, enters here
        and is classified here, once (a run's executor that is gone is settled by the store,
        which classifies its end the same way).
        """
        with self._holding:  # what waits goes first: a run's events in order
            given, self._held = [*self._held, *events], []
        if not given:
            return
        events, decided = self._decisions([event.classified() for event in given])
        held: set[str] = set()
        try:
            applied = self.shared.store.apply_many(events, decided)
        except Exception as error:  # keep recording; a broken burst is retried one at a time
            reason = outage(error)
            if reason is not None:
                self._hold(given, reason)
                return
            log.exception("recording %d events failed; recording them one by one", len(events))
            applied = self._one_by_one(given, events, decided, held)
        with self._holding:
            if not self._held and self._outage is not None:
                log.warning("the store takes events again (after: %s)", self._outage)
                self._outage, self._retry = None, _RETRY_FIRST
        with self.shared.live.lock:
            deadline = self.shared.live.next_deadline()
            for index, (event, recorded) in enumerate(zip(events, applied, strict=True)):
                if recorded is None:
                    continue
                self.shared.live.clocks.observe(recorded)
                self.shared.live.spot_clocks.observe(recorded)
                decision = decided.get(index)
                if decision is not None and recorded.attempt == decision.attempt:
                    heapq.heappush(
                        self.shared.live.due, (decision.due_at, recorded.uid, decision.attempt)
                    )
                elif recorded.state.terminal:
                    self.shared.live.ended(event.uid)
            sooner = self.shared.live.next_deadline()
            if sooner is not None and (deadline is None or sooner < deadline):
                self.shared.live.lock.notify()  # the monitor sleeps until the deadline it knew
        self.shared.feed.publish(
            event.uid for event, recorded in zip(events, applied, strict=True) if recorded
        )
        refused = {
            event.uid: event for event, ok in zip(events, applied, strict=True) if ok is None
        }
        for uid, event in refused.items():
            if self.shared.live.closed or event.state.terminal or uid in held:
                continue
            if self.shared.store.state_of(uid) in TERMINAL:
                # Something of a run that has ended says it is alive (a pod made by a launch
                # that timed out after the API server took it): it goes, as the record says.
                self.shared.aborts.submit(
                    self.shared.runtime.abort, uid, Reason.ENDED, "the run had ended"
                )

    def _one_by_one(
        self,
        given: list[RunEvent],
        events: list[RunEvent],
        decided: dict[int, RetryDecision],
        held: set[str],
    ) -> list[RunEvent | None]:
        """Each event recorded alone (``given``: as it came, ``events``: classified); one
        the store cannot take now is held, with its run's later ones (their uids added to
        ``held``), and one that fails otherwise is dropped, logged."""
        applied: list[RunEvent | None] = []
        again: list[RunEvent] = []
        why = ""
        for index, event in enumerate(events):
            if event.uid not in held:
                try:
                    applied.append(self.shared.store.apply(event, decided.get(index)))
                    continue
                except Exception as error:
                    reason = outage(error)
                    if reason is None:
                        log.exception("the event of run %s was not recorded: %s", event.uid, event)
                        applied.append(None)
                        continue
                    why = reason
            held.add(event.uid)  # its later events wait behind it
            again.append(given[index])
            applied.append(None)
        self._hold(again, why)
        return applied

    def _decisions(self, events: list[RunEvent]) -> tuple[list[RunEvent], dict[int, RetryDecision]]:
        """For each event that ends an attempt in a failure, whether it gets another (see
        :func:`retries.decide`); an end that is not retried says why, when retries were asked
        for."""
        decided: dict[int, RetryDecision] = {}
        out = list(events)
        for index, event in enumerate(events):
            if event.failure not in RETRYABLE:
                continue
            try:
                record = self.shared.store.get(event.uid)
            except Exception:
                continue
            if record.finished or record.attempt != event.attempt:
                continue
            try:
                decision, why = retries.decide(
                    record, event, self.shared.settings, time.time(), self._largest_memory
                )
            except Exception:  # a bad policy must not keep the run from ending
                log.exception("run %s: the retry decision failed", event.uid)
                continue
            if decision is not None:
                decided[index] = decision
            elif why:
                out[index] = replace(
                    event, message=f"{event.message} ({why})" if event.message else why
                )
        return out, decided

    def _largest_memory(self) -> int | None:
        """The largest node's allocatable memory, in bytes (asked after an OOM kill)."""
        try:
            sizes = [node.allocatable.get("memory", 0) for node in self.shared.runtime.nodes()]
        except Exception:
            log.warning("the nodes could not be read for the OOM memory cap", exc_info=True)
            return None
        return max(sizes, default=0) or None
