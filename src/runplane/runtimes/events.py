"""What a runtime reports about a run, and the channel the reports travel through.

Runtimes observe runs from their own threads (a process supervisor, a watch on the API
server); the service reads their observations as one asynchronous stream, in order. Runtimes
never touch the database: the service turns events into records.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

from runplane.runs import Condition, FailureClass, ResizeRecord, RunState, Usage, classify


@dataclass(frozen=True, slots=True)
class RunEvent:
    """A change in a run's life.

    ``state`` is where the run is now; ``reason`` is a short machine word, a
    :class:`~runplane.runs.Reason` (``Unschedulable``, ``OOMKilled``, ``Error``) or a word the
    runtime passes on; ``message`` is the human text, e.g. the scheduler's
    ``0/1 nodes are available: ...``. ``condition`` is the finer state that state thresholds
    watch, when one applies. ``at`` is when the source says the change happened.
    """

    uid: str
    state: RunState
    condition: Condition | None = None
    reason: str = ""
    message: str = ""
    attempt: int = 1
    node: str = ""
    #: The node's group and whether it is a spot node, where the runtime knows its labels.
    node_group: str = ""
    spot: bool | None = None
    process_id: int | None = None
    exit_code: int | None = None
    usage: Usage | None = None
    results: dict[str, Any] = field(default_factory=dict)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    #: How the run is held where it runs (``cgroup v1, uid 1000000007 (its own)``), when it
    #: starts.
    isolation: str = ""
    at: float = field(default_factory=time.time)
    #: Why the attempt failed, for an event that ends one in a failure: runtimes leave it
    #: unset, and the service sets it once as the event enters it (:meth:`classified`), so
    #: recording and the retry decision read one answer.
    failure: FailureClass | None = None
    #: A change of the running attempt's limits in place (or one refused), to record with the
    #: run; the event's state is then the run's unchanged one.
    resize: ResizeRecord | None = None

    def classified(self) -> RunEvent:
        """This event with its failure class (see :func:`~runplane.runs.classify`): the first
        thing the service does with every event it records, its own included."""
        failure = classify(self.state, self.reason, self.message)
        return self if failure is self.failure else replace(self, failure=failure)


class EventChannel:
    """Events from any thread to one asynchronous reader, in the order they were published.

    Publishing never blocks and never waits for the reader: what arrives before the reader
    starts, or while it is busy, is buffered. Closing ends the reader's iteration once it has
    read everything published before the close.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffer: deque[RunEvent] = deque()
        self._waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[None]] | None = None
        self._closed = False
        self._reading = False

    def publish(self, event: RunEvent) -> None:
        with self._lock:
            if self._closed:
                return
            self._buffer.append(event)
            self._wake()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._wake()

    def _wake(self) -> None:
        """Called with the lock held."""
        if self._waiter is not None:
            loop, future = self._waiter
            self._waiter = None
            with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
                loop.call_soon_threadsafe(_resolve, future)

    async def read(self) -> AsyncIterator[RunEvent]:
        """Every event, until the channel is closed; one reader at a time. A reader that stops
        early (cancelled, or its loop ended) leaves what it did not read for the next one."""
        with self._lock:
            if self._reading:
                raise RuntimeError("a runtime's events have one reader")
            self._reading = True
        loop = asyncio.get_running_loop()
        try:
            while True:
                with self._lock:
                    if self._buffer:
                        event = self._buffer.popleft()
                    elif self._closed:
                        return
                    else:
                        future = loop.create_future()
                        self._waiter = (loop, future)
                        event = None
                if event is None:
                    await future
                else:
                    yield event
        finally:
            with self._lock:
                self._waiter = None
                self._reading = False


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
