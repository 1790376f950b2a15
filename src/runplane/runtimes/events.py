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
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, fields, replace
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

    def on_node(self, group: str, spot: bool | None) -> RunEvent:
        """This event with its node's group and whether it is spot, as a runtime that knows
        its nodes publishes it: copied field by field, in half the time of
        ``dataclasses.replace``, which looks the fields up again on every call (most pod
        events pass here)."""
        copy = object.__new__(RunEvent)
        for name in _FIELDS:
            _set(copy, name, getattr(self, name))
        _set(copy, "node_group", group)
        _set(copy, "spot", spot)
        return copy


#: What :meth:`RunEvent.on_node` copies, and how it sets a field of a frozen dataclass.
_FIELDS = tuple(f.name for f in fields(RunEvent))
_set = object.__setattr__


class EventChannel:
    """Events from any thread to one asynchronous reader, in the order they were published.

    Publishing never blocks and never waits for the reader: what arrives before the reader
    starts, or while it is busy, is buffered. The reader waits for events (:meth:`wait`) and
    takes what came (:meth:`take`), or reads them one by one (``async for``). Each wake of
    the reader's thread by a publisher costs more than taking the event it brings, so a busy
    reader may wait a moment for more without being woken by each one that arrives, only by
    one that ends a run (whoever waits for a run's end is never held back). Closing ends the
    reader's iteration once it has read everything published before the close.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffer: deque[RunEvent] = deque()
        #: How many of the buffered events end a run.
        self._ends = 0
        #: The reader's wait, and whether only a run's end (or the close) ends it.
        self._waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[None], bool] | None = None
        self._closed = False
        self._reading = False

    def publish(self, event: RunEvent) -> None:
        with self._lock:
            if self._closed:
                return
            self._buffer.append(event)
            end = event.state.terminal
            self._ends += end
            if self._waiter is not None and (end or not self._waiter[2]):
                self._wake()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._wake()

    def _wake(self) -> None:
        """Called with the lock held."""
        if self._waiter is not None:
            loop, future, _ = self._waiter
            self._waiter = None
            with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
                loop.call_soon_threadsafe(_resolve, future)

    @property
    def drained(self) -> bool:
        """Closed, and every event taken."""
        with self._lock:
            return self._closed and not self._buffer

    async def wait(self, timeout: float | None = None, *, ends_only: bool = False) -> None:
        """Return once an event is here to take (``ends_only``: one that ends a run), the
        channel is closed, or ``timeout`` seconds passed."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed or (self._ends if ends_only else self._buffer):
                return
            future = loop.create_future()
            self._waiter = (loop, future, ends_only)
        try:
            if timeout is None:
                await future
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(future, timeout)
        finally:
            with self._lock:
                if self._waiter is not None and self._waiter[1] is future:
                    self._waiter = None

    def take(self, limit: int) -> list[RunEvent]:
        """The first ``limit`` events not taken yet, in order (none if none came)."""
        with self._lock:
            taken = [self._buffer.popleft() for _ in range(min(limit, len(self._buffer)))]
            self._ends -= sum(event.state.terminal for event in taken)
            return taken

    @contextlib.contextmanager
    def reader(self) -> Iterator[EventChannel]:
        """Hold the channel's one reader's place while reading."""
        with self._lock:
            if self._reading:
                raise RuntimeError("a runtime's events have one reader")
            self._reading = True
        try:
            yield self
        finally:
            with self._lock:
                self._waiter = None
                self._reading = False

    def __aiter__(self) -> AsyncIterator[RunEvent]:
        return self.read()

    async def read(self) -> AsyncIterator[RunEvent]:
        """Every event, one by one, until the channel is closed; one reader at a time. A
        reader that stops early (cancelled, or its loop ended) leaves what it did not read
        for the next one."""
        with self.reader():
            while True:
                taken = self.take(1)
                if taken:
                    yield taken[0]
                elif self.drained:
                    return
                else:
                    await self.wait()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
