"""``/schedules``: cron schedules of runs, created, listed and deleted. A user sees their own
schedules; an admin everyone's."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from runplane.service.access import check_owner
from runplane.service.routes.context import Service, User
from runplane.service.routes.fields import Name, ScheduleId
from runplane.service.routes.submissions import ScheduleSubmission, function_of
from runplane.service.schedules import ScheduleRecord

router = APIRouter()


@router.post("/schedules", status_code=201)
def create_schedule(body: ScheduleSubmission, server: Service, who: User) -> ScheduleRecord:
    return server.schedule(function_of(server, body), body.schedule, body, who)


@router.get("/schedules")
def list_schedules(
    server: Service, who: User, project: Annotated[Name | None, Query()] = None
) -> list[ScheduleRecord]:
    """Schedules: a user's own, or everyone's for an admin."""
    return server.schedules.list_schedules(project, owner=who.owner_filter())


@router.delete("/schedules/{schedule_id}", status_code=204)
def delete_schedule(schedule_id: ScheduleId, server: Service, who: User) -> None:
    schedule = server.schedules.get(schedule_id)
    check_owner(who, schedule.created_by, f"schedule {schedule_id}")
    server.schedules.delete(schedule_id)
