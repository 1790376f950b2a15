"""Cron schedules: "run now or schedule for later".

A schedule fires at most once per due time, across restarts: the run it starts has a uid
derived from (schedule, due time), so a fire repeated after a crash finds the run already
recorded and does nothing. After downtime a schedule fires once for the latest due time it
missed, not once per missed time.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from sqlalchemy import Engine, select

from runplane.errors import InvalidValueError, NotFoundError, RunplaneError
from runplane.service.db import session_factory
from runplane.service.db.models import Schedule

log = logging.getLogger(__name__)


#: The shorthands of standard cron, and what each means.
ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def check_cron(cron: object, now: float | None = None) -> str:
    """A standard five-field cron expression (or an ``@daily``-style alias) that fires.

    croniter alone would also take six fields (seconds: a run every second) and dates that
    never come (``0 0 31 2 *``); both are refused here, at the call.
    """
    from croniter import CroniterBadDateError, croniter

    allowed = (
        "a schedule is a cron expression of five fields (minute hour day month weekday) or "
        "one of " + ", ".join(ALIASES) + ", and it must name a time that comes"
    )
    example = "'*/5 * * * *' (every five minutes), '0 3 * * *' (03:00 daily), '@hourly'"
    if not isinstance(cron, str) or len(cron) > 128:
        raise InvalidValueError("schedule", cron, allowed, example)
    expression = ALIASES.get(cron.strip(), cron)
    if len(expression.split()) != 5 or not croniter.is_valid(expression):
        raise InvalidValueError("schedule", cron, allowed, example)
    try:
        croniter(expression, time.time() if now is None else now).get_next(float)
    except CroniterBadDateError:
        raise InvalidValueError("schedule", cron, allowed, example) from None
    return cron


def _expression(cron: str) -> str:
    return ALIASES.get(cron.strip(), cron)


def latest_due(cron: str, after: float, now: float) -> float | None:
    """The latest time in (after, now] that ``cron`` names, if any."""
    from croniter import croniter

    iterator = croniter(_expression(cron), after)
    due = None
    while (candidate := iterator.get_next(float)) <= now:
        due = candidate
    return due


def next_fires(cron: str, after: float, count: int) -> list[float]:
    """The next ``count`` times after ``after`` that ``cron`` names ("Schedule for later"
    shows them before it is saved)."""
    from croniter import croniter

    iterator = croniter(_expression(cron), after)
    return [iterator.get_next(float) for _ in range(count)]


def fire_uid(schedule_id: str, due: float) -> str:
    return hashlib.sha256(f"{schedule_id}:{due:.0f}".encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class ScheduleRecord:
    id: str
    project: str
    name: str
    cron: str
    params: dict[str, Any]
    state_thresholds: dict[str, Any]
    created_at: float
    created_by: str
    last_fired_at: float
    function: dict[str, Any]
    role: str


def _record(row: Schedule) -> ScheduleRecord:
    """The record of a row: its columns are named as the record's fields."""
    return ScheduleRecord(
        **{column.name: getattr(row, column.name) for column in fields(ScheduleRecord)}
    )


#: Starts the run of a due schedule with the given uid; returns False if it already exists.
Fire = Callable[[ScheduleRecord, str], bool]


class ScheduleStore:
    def __init__(self, engine: Engine) -> None:
        self._sessions = session_factory(engine)

    def create(
        self,
        *,
        project: str,
        name: str,
        cron: str,
        function: dict[str, Any],
        params: dict[str, Any],
        state_thresholds: dict[str, Any],
        user: str,
        role: str,
    ) -> ScheduleRecord:
        now = time.time()
        row = Schedule(
            id=uuid.uuid4().hex,
            project=project,
            name=name,
            cron=check_cron(cron),
            function=function,
            params=params,
            state_thresholds=state_thresholds,
            created_at=now,
            created_by=user,
            role=role,
            last_fired_at=now,
        )
        with self._sessions.begin() as session:
            session.add(row)
        return _record(row)

    def list_schedules(
        self, project: str | None = None, owner: str | None = None
    ) -> list[ScheduleRecord]:
        query = select(Schedule).order_by(Schedule.created_at)
        if project:
            query = query.where(Schedule.project == project)
        if owner is not None:
            query = query.where(Schedule.created_by == owner)
        with self._sessions() as session:
            return [_record(row) for row in session.scalars(query)]

    def get(self, schedule_id: str) -> ScheduleRecord:
        with self._sessions() as session:
            row = session.get(Schedule, schedule_id)
            if row is None:
                raise NotFoundError(f"schedule {schedule_id!r} does not exist")
            return _record(row)

    def delete(self, schedule_id: str) -> None:
        with self._sessions.begin() as session:
            row = session.get(Schedule, schedule_id)
            if row is None:
                raise NotFoundError(f"schedule {schedule_id!r} does not exist")
            session.delete(row)

    def fire_due(self, now: float, fire: Fire) -> list[str]:
        """Start the runs of every schedule that came due; returns the uids started.

        Each schedule is on its own: one that cannot be computed, or whose run is refused (its
        function no longer passes the policies, say), is logged and passed over for that due
        time, and the others still fire.
        """
        started = []
        for schedule in self.list_schedules():
            try:
                due = latest_due(schedule.cron, schedule.last_fired_at, now)
            except Exception:
                log.exception("schedule %s: cannot compute %r", schedule.id, schedule.cron)
                continue
            if due is None:
                continue
            uid = fire_uid(schedule.id, due)
            try:
                if fire(schedule, uid):
                    started.append(uid)
            except RunplaneError as error:  # refused as a request would be: said, not a crash
                log.warning("schedule %s: its run for %s was refused: %s", schedule.id, due, error)
            except Exception:
                log.exception("schedule %s: its run for %s was refused", schedule.id, due)
            with self._sessions.begin() as session:
                row = session.get(Schedule, schedule.id)
                if row is not None and row.last_fired_at < due:
                    row.last_fired_at = due
        return started
