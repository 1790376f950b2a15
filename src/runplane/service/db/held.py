"""A connection kept between the transactions of a writer that writes all the time: the
group commit of new runs' records, the recorder's bursts of events.

Each ``engine.begin()`` builds a SQLAlchemy connection, checks a driver's connection out of the
pool (its events, its record) and back in (a rollback to reset it): 39 µs of CPU here, against
13 µs for a transaction on a connection kept, two or three of them a run. Only SQLite keeps
one: a PostgreSQL server may close a connection that sat idle, which the pool checks before it
hands one out that sat 10 s or more (``db._ping_if_idle``); a kept one would meet its first
run's record with the error instead.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine


class HeldConnection:
    """``begin()`` as ``engine.begin()``, on a connection kept from one transaction to the
    next (SQLite). Callers at once each have one: the one kept, or one from the pool for the
    second, which goes back to the pool after."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._keeps = engine.dialect.name == "sqlite"
        self._lock = threading.Lock()
        self._kept: Connection | None = None
        #: Counts :meth:`close` calls: a connection taken before one is not kept after it.
        self._closes = 0

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        if not self._keeps:
            with self._engine.begin() as connection:
                yield connection
            return
        with self._lock:
            kept, self._kept = self._kept, None
            closes = self._closes
        connection = kept if kept is not None else self._engine.connect()
        try:
            with connection.begin():
                yield connection
        except BaseException:
            connection.close()  # whatever the failure, the next transaction starts afresh
            raise
        with self._lock:
            if self._kept is None and self._closes == closes:
                self._kept = connection
                return
        connection.close()

    def close(self) -> None:
        """Give the kept connection back to the pool (before the pool is closed); a later
        transaction keeps one again."""
        with self._lock:
            connection, self._kept = self._kept, None
            self._closes += 1
        if connection is not None:
            connection.close()
