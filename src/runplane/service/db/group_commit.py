"""Writes of many threads committed together: one transaction for the records that arrive
while another transaction is being written.

Each submission records its run in a transaction of its own, and on a busy service sixteen
threads queue for the database's one writer: each transaction pays its begin, its commit (on
SQLite a lock handed from thread to thread and the WAL's frames for every page it touched; on
PostgreSQL a round trip and a flush of the server's log) for a few rows. Here the first thread
to arrive writes its record; the ones that arrive meanwhile wait, and the next of them writes
all of theirs in one transaction (at most :data:`MOST` records), as a database's own group
commit does with its log. Each caller returns once its record is committed, as before.

At the rate a busy service records runs (a few dozen a second or more), few arrive while
another's transaction is written: it takes well under a millisecond, and they come every ten or
so. So while they come that fast from several callers at once, the writer of a batch first
waits for more, up to :data:`LINGER` seconds or until :data:`MOST` are waiting, as the recorder
does with events. At the scale benchmark's load (80 runs a second from 8 clients) a transaction
then held three to four runs instead of one; the statements a run costs fell from 5.1 to 2.0,
and the service's CPU per run by 5-8 % (docs/decisions.md, "New runs' records wait for each
other"). A submission's answer comes up to that much later, against the hundred
milliseconds it takes at that load. Callers that are several show themselves: some of their
records arrive while another is being written. A lone caller, however fast (a loop submitting
runs one after another), waits for each record before it sends the next, never finds one being
written, and so never waits for company that cannot come.

A batch refused for one of its records (an integrity error: a uid already recorded) is
written again one record at a time, each in its own transaction, so that the record fails
alone and the others are written. Any other failure (an outage, a commit whose outcome is not
known) is every record's: each caller gets that error, as it would have alone, and nothing is
tried again (a retry after a commit that did happen would call its runs already recorded).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import IntegrityError

from runplane.service.db.held import HeldConnection

T = TypeVar("T")

#: The most records in one transaction: a batch is written in a few milliseconds, and the
#: callers it holds wait for it.
MOST = 64
#: Records arriving at this rate or more (per second, over the last :data:`WINDOW`), some of
#: them while another was written, make the writer of a batch wait up to :data:`LINGER`
#: seconds for more.
BUSY_RATE = 40.0
WINDOW = 20
LINGER = 0.015


class _Waiting(Generic[T]):
    """One caller's record, and what became of it."""

    __slots__ = ("done", "error", "item", "woken", "written")

    def __init__(self, item: T) -> None:
        self.item = item
        self.done = False
        self.written = False
        self.error: BaseException | None = None
        #: Set once the record is written (``done``), or when this caller is to write the
        #: next batch.
        self.woken = threading.Event()


class GroupCommit(Generic[T]):
    """``write(connection, items)`` writes items in the caller's transaction; :meth:`commit`
    returns once its item is committed, or raises what writing it raised."""

    def __init__(
        self,
        engine: Engine,
        write: Callable[[Connection, Sequence[T]], None],
        busy_rate: float = BUSY_RATE,
        window: int = WINDOW,
        linger: float = LINGER,
    ) -> None:
        self._connection = HeldConnection(engine)
        self._write = write
        self._lock = threading.Lock()
        #: Notified when :data:`MOST` records wait: a lingering writer waits no longer.
        self._full = threading.Condition(self._lock)
        #: The records not written yet; the first is the writer's, or its successor's.
        self._pending: list[_Waiting[T]] = []
        self._writing = False
        #: When the last ``window`` records arrived, each with whether it found another being
        #: written; and the rate that makes a writer linger.
        self._arrivals: deque[tuple[float, bool]] = deque(maxlen=window)
        self._busy_span = window / busy_rate
        self._linger_s = linger

    def close(self) -> None:
        """Give back the connection kept for writing (a later commit keeps one again)."""
        self._connection.close()

    def commit(self, item: T) -> None:
        me = _Waiting(item)
        arrived = time.monotonic()
        with self._lock:
            self._arrivals.append((arrived, self._writing))
            self._pending.append(me)
            writes = not self._writing
            self._writing = True
            if len(self._pending) == MOST:
                self._full.notify()
        if not writes:
            try:
                me.woken.wait()  # written by another, or handed the next batch
            except BaseException:  # interrupted (a signal, in the main thread)
                self._withdraw(me)
                raise
        if not me.done:
            try:
                self._linger()
            except BaseException:  # interrupted while it waited for company
                self._withdraw(me, writes=True)
                raise
            self._write_batch()
        if me.error is not None:
            raise me.error

    def _linger(self) -> None:
        """While records come fast from several callers, wait up to ``linger`` seconds for
        more, or until a whole batch waits."""
        with self._lock:
            if self._busy():
                self._full.wait_for(lambda: len(self._pending) >= MOST, self._linger_s)

    def _withdraw(self, me: _Waiting[T], writes: bool = False) -> None:
        """``me`` no longer waits: off the queue if it is still there, and the next batch
        handed on if it was ``me``'s to write (``writes``: it arrived first; or it was handed
        to it), or the others would wait for it forever."""
        with self._lock:
            if me not in self._pending:
                return  # in a batch being written: its record may yet be committed
            handed = self._pending[0] is me and (writes or me.woken.is_set())
            self._pending.remove(me)
            if handed:
                if self._pending:
                    self._pending[0].woken.set()
                else:
                    self._writing = False

    def _write_batch(self) -> None:
        """Write the pending records (the caller's first among them: it was the first to
        arrive, or was handed this batch), then hand the next batch to the first caller
        waiting, if any."""
        with self._lock:
            batch, self._pending = self._pending[:MOST], self._pending[MOST:]
        try:
            self._written(batch)
        except BaseException as error:  # interrupted: what is not known written is not
            for waiting in batch[1:]:
                if not waiting.written and waiting.error is None:
                    waiting.error = RuntimeError("writing the batch this record was in stopped")
                    waiting.error.__cause__ = error
            raise
        finally:
            for waiting in batch:
                waiting.done = True
            with self._lock:
                if self._pending:
                    self._pending[0].woken.set()  # not done: it writes the next batch
                else:
                    self._writing = False
            for waiting in batch[1:]:
                waiting.woken.set()

    def _busy(self) -> bool:
        """Whether records arrive fast enough, and from callers enough, to wait for more
        (lock held)."""
        arrivals = self._arrivals
        return (
            len(arrivals) == arrivals.maxlen
            and arrivals[-1][0] - arrivals[0][0] < self._busy_span
            and any(queued for _, queued in arrivals)
        )

    def _written(self, batch: list[_Waiting[T]]) -> None:
        """Each record's outcome: all written in one transaction; or, where one record was
        refused, each alone; or every record failed as the batch did."""
        try:
            self._write_alone(batch)
            return
        except IntegrityError as error:
            if len(batch) == 1:
                batch[0].error = error
                return
        except Exception as error:
            for waiting in batch:
                waiting.error = error
            return
        for waiting in batch:
            try:
                self._write_alone([waiting])
            except Exception as error:
                waiting.error = error

    def _write_alone(self, batch: list[_Waiting[T]]) -> None:
        """``batch`` written in a transaction of its own."""
        with self._connection.begin() as connection:
            self._write(connection, [waiting.item for waiting in batch])
        for waiting in batch:
            waiting.written = True
