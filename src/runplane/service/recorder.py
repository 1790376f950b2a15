"""The recorder: a runtime's events become run records, a burst per transaction.

Every event enters the service here, the runtime's and the ends the service decides itself,
and is classified once. A failed attempt's retry decision is recorded with its end, in the
same transaction; then the run's clocks start or stop, a decided attempt waits to be due, and
whoever waits for the run's end wakes.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import replace

from runplane.runs import RETRYABLE, TERMINAL, Reason
from runplane.runtimes.events import RunEvent
from runplane.service import retries
from runplane.service.retries import RetryDecision
from runplane.service.shared import Shared

log = logging.getLogger(__name__)

#: Events written in one transaction at most.
_BATCH = 256

#: Events arriving faster than this (per second, over the last :data:`_RATE_WINDOW`) make
#: the recorder wait :data:`_LINGER` seconds before it takes a burst, to take a larger one.
_BUSY_RATE = 400.0
_RATE_WINDOW = 40
_LINGER = 0.002


async def _bursts(events: AsyncIterator[RunEvent], limit: int) -> AsyncIterator[list[RunEvent]]:
    """Events grouped as they arrive: each burst is what came while the previous one was
    being handled (a watch delivers them in bursts; one transaction each is far cheaper).

    While events pour in (hundreds of runs a second), a burst waits a moment for more first:
    each is a transaction that holds the write lock submissions also need, and a few larger
    ones cost less than many small ones (measured: a queue of no-op runs goes 10% faster). A
    lone run's events are recorded at once: the wait is for throughput, never on a quiet path.
    """
    queue: asyncio.Queue[RunEvent | None] = asyncio.Queue()
    arrivals: deque[float] = deque(maxlen=_RATE_WINDOW)

    async def pump() -> None:
        try:
            async for event in events:
                queue.put_nowait(event)
        finally:
            queue.put_nowait(None)

    task = asyncio.create_task(pump())
    ended = False
    while not ended:
        first = await queue.get()
        if first is None:
            break
        now = time.monotonic()
        busy = len(arrivals) == _RATE_WINDOW and now - arrivals[0] < _RATE_WINDOW / _BUSY_RATE
        if busy and queue.qsize() < limit:
            await asyncio.sleep(_LINGER)
        burst = [first]
        while len(burst) < limit and not queue.empty():
            item = queue.get_nowait()
            if item is None:
                ended = True
                break
            burst.append(item)
        arrivals.extend([now] * len(burst))
        yield burst
    await task


class Recorder:
    def __init__(self, shared: Shared) -> None:
        self.shared = shared

    async def run(self) -> None:
        """Write the runtime's events in order, a burst per transaction, until it closes."""
        async for burst in _bursts(self.shared.runtime.events(), _BATCH):
            try:
                self.write(burst)
            except Exception:  # the recorder must outlive any one burst
                log.exception("recording a burst of %d events failed", len(burst))

    def write(self, events: list[RunEvent]) -> None:
        """Record events (with the retry decisions of failed attempts), then start or stop
        their threshold clocks, schedule decided attempts and wake waiters.

        Every event of the runtime, and every end the service itself decides, enters here
        and is classified here, once (a run's executor that is gone is settled by the store,
        which classifies its end the same way).
        """
        events, decided = self._decisions([event.classified() for event in events])
        try:
            applied = self.shared.store.apply_many(events, decided)
        except Exception:  # keep recording; a broken burst is retried one event at a time
            log.exception("recording %d events failed; recording them one by one", len(events))
            applied = [
                self._apply_alone(event, decided.get(index)) for index, event in enumerate(events)
            ]
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
            if self.shared.live.closed or event.state.terminal:
                continue
            if self.shared.store.state_of(uid) in TERMINAL:
                # Something of a run that has ended says it is alive (a pod made by a launch
                # that timed out after the API server took it): it goes, as the record says.
                self.shared.aborts.submit(
                    self.shared.runtime.abort, uid, Reason.ENDED, "the run had ended"
                )

    def _apply_alone(self, event: RunEvent, retry: RetryDecision | None) -> RunEvent | None:
        try:
            return self.shared.store.apply(event, retry)
        except Exception:
            log.exception("the event of run %s was not recorded: %s", event.uid, event)
            return None

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
