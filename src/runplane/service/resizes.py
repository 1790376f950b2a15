"""A run's resizes as stored: each in-place change of a running attempt's limits (or one
refused) is a row of ``run_resizes``, written in the transaction that records its event and
read with the run's record (``RunRecord.resizes``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select, update

from runplane.runs import ResizeRecord
from runplane.runtimes.events import RunEvent
from runplane.service.db.models import RESIZES, RUNS

_INSERT = insert(RESIZES)
_COUNT = update(RUNS).where(RUNS.c.uid == bindparam("_uid")).values(resized=RUNS.c.resized + 1)
READ = select(RESIZES).where(RESIZES.c.run_uid == bindparam("uid")).order_by(RESIZES.c.id)


def write(connection: Connection, events: Sequence[RunEvent]) -> None:
    """Store the resizes ``events`` carry, in the caller's transaction."""
    rows = [_row(event.uid, event.resize) for event in events if event.resize is not None]
    if rows:
        connection.execute(_INSERT, rows)
        connection.execute(_COUNT, [{"_uid": row["run_uid"]} for row in rows])


def _row(uid: str, record: ResizeRecord) -> dict[str, Any]:
    return {
        "run_uid": uid,
        "at": record.at,
        "attempt": record.attempt,
        "memory_from": record.memory_from,
        "memory_to": record.memory_to,
        "cpu_from": record.cpu_from,
        "cpu_to": record.cpu_to,
        "why": record.why,
        "mode": record.mode,
        "by": record.by,
        "outcome": record.outcome,
    }


def records(rows: Iterable[Any]) -> list[ResizeRecord]:
    return [
        ResizeRecord(
            at=row.at,
            attempt=row.attempt,
            memory_from=row.memory_from,
            memory_to=row.memory_to,
            cpu_from=row.cpu_from,
            cpu_to=row.cpu_to,
            why=row.why,
            mode=row.mode,
            by=row.by,
            outcome=row.outcome,
        )
        for row in rows
    ]
