"""``/projects``: project records, created, read, changed and deleted."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import pydantic
from fastapi import APIRouter, Query, Response

from runplane.service.projects import (
    MAX_DESCRIPTION_BYTES,
    MAX_IMAGE_LENGTH,
    DeletionStrategy,
    ProjectRecord,
)
from runplane.service.quotas import project_usage
from runplane.service.routes.context import Service, User
from runplane.service.routes.fields import Name, PathName

router = APIRouter()


class ProjectFormat(StrEnum):
    NAME_ONLY = "name_only"
    FULL = "full"


class ProjectPatch(pydantic.BaseModel):
    """The fields of a project a caller sets; their bounds are checked by the store."""

    model_config = pydantic.ConfigDict(extra="forbid")

    description: str | None = pydantic.Field(default=None, max_length=MAX_DESCRIPTION_BYTES)
    params: dict[str, Any] | None = None
    default_image: str | None = pydantic.Field(default=None, max_length=MAX_IMAGE_LENGTH)
    labels: dict[str, str] | None = None
    #: Terms of the service's retention policy the project overrides (``runs_max_age``,
    #: ``runs_max_count``, ``logs_max_age``); ``{}`` follows the service's again.
    retention: dict[str, Any] | None = None


class ProjectIn(ProjectPatch):
    name: Name


@router.get("/projects")
def projects(
    server: Service, _: User, format: Annotated[ProjectFormat, Query()] = ProjectFormat.NAME_ONLY
) -> list[str] | list[ProjectRecord]:
    """Every project: with a record, or known from its runs, functions or schedules;
    names (``format=name_only``, the default) or records (``format=full``)."""
    if format is ProjectFormat.FULL:
        return server.projects.list_projects()
    return server.projects.names()


@router.get("/projects/{project}")
def get_project(project: PathName, server: Service, _: User) -> ProjectRecord:
    return server.projects.get(project)


@router.post("/projects", status_code=201, responses={200: {"model": ProjectRecord}})
def create_project(
    body: ProjectIn, server: Service, who: User, response: Response
) -> ProjectRecord:
    """Get-or-create: a new record is the caller's (201); an existing one is returned as
    it is (200), whoever owns it."""
    values = body.model_dump(exclude={"name"}, exclude_none=True)
    record, created = server.projects.create(body.name, who.user, values, admin=who.admin)
    if not created:
        response.status_code = 200
    return record


@router.patch("/projects/{project}")
def update_project(
    project: PathName, body: ProjectPatch, server: Service, who: User
) -> ProjectRecord:
    """Change a project's description, parameters, default image or labels: its owner's
    or an admin's to do; its retention policy: an admin's."""
    values = body.model_dump(exclude_unset=True)
    return server.projects.update(project, values, who.user, admin=who.admin)


@router.delete("/projects/{project}", status_code=204)
def delete_project(
    project: PathName,
    server: Service,
    who: User,
    deletion_strategy: Annotated[DeletionStrategy, Query()] = DeletionStrategy.RESTRICTED,
) -> None:
    """Delete a project (owner or admin). ``restricted`` (the default) refuses with 409
    while it has runs, stored functions or schedules; ``cascading`` deletes its stored
    functions and schedules with it and keeps its runs' records."""
    server.projects.delete(project, who.user, admin=who.admin, strategy=deletion_strategy)
    server.runs.quotas.forget(project)
    server.runs.budgets.clear(project)  # a project made again by the name starts with none


@router.get("/projects/{project}/quotas")
def get_quotas(project: PathName, server: Service, _: User) -> dict[str, Any]:
    """The project's quota per flavor and resource (Kueue's nominal quota, borrowing and
    lending limits) with what its runs hold now (``used``): anyone may read it."""
    return project_usage(server.runs.quotas, server.runs.store, project)


@router.put("/projects/{project}/quotas/{flavor}")
def set_quota(
    project: PathName, flavor: str, body: dict[str, Any], server: Service, who: User
) -> dict[str, Any]:
    """Replace the project's quota on ``flavor`` (``on-demand`` or ``spot``) with ``{'cpu':
    '16', 'memory': '64Gi', 'gpus': {'nominal': 2, 'borrowing_limit': 0}}``: admins only."""
    names = server.projects.names
    server.runs.quotas.set_flavor(project, flavor, body, who.user, who.admin, names)
    return project_usage(server.runs.quotas, server.runs.store, project)


@router.delete("/projects/{project}/quotas")
def clear_quotas(project: PathName, server: Service, who: User) -> dict[str, Any]:
    """Drop the project's quotas on every flavor: admins only."""
    server.runs.quotas.clear(project, None, who.user, admin=who.admin)
    return project_usage(server.runs.quotas, server.runs.store, project)


@router.delete("/projects/{project}/quotas/{flavor}")
def clear_quota(project: PathName, flavor: str, server: Service, who: User) -> dict[str, Any]:
    """Drop the project's quota on ``flavor``: admins only."""
    server.runs.quotas.clear(project, flavor, who.user, admin=who.admin)
    return project_usage(server.runs.quotas, server.runs.store, project)
