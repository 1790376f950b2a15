"""``/functions`` and a project's ``/functions``: stored functions and their versions."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from runplane.service.catalog import StoredFunction
from runplane.service.routes.context import Service, User
from runplane.service.routes.fields import PathName
from runplane.service.routes.submissions import RunSubmission, function_of

router = APIRouter()


@router.post("/functions", status_code=201)
def store_function(body: dict[str, Any], server: Service, who: User) -> StoredFunction:
    """Store a version; a name belongs to the user who stored it first (admins: any)."""
    fn = function_of(server, RunSubmission(function=body))
    return server.catalog.store(fn, who.user, admin=who.admin)


@router.get("/projects/{project}/functions")
def list_functions(project: PathName, server: Service, _: User) -> list[StoredFunction]:
    return server.catalog.latest(project)


@router.get("/projects/{project}/functions/{name}")
def get_function(
    project: PathName,
    name: PathName,
    server: Service,
    _: User,
    version: Annotated[str | None, Query(max_length=64)] = None,
) -> StoredFunction:
    return server.catalog.get(project, name, version)


@router.delete("/projects/{project}/functions/{name}", status_code=204)
def delete_function(project: PathName, name: PathName, server: Service, who: User) -> None:
    """Delete a function with all its versions: its owner's or an admin's to do."""
    server.catalog.delete(project, name, who.user, admin=who.admin)


@router.get("/projects/{project}/functions/{name}/versions")
def function_versions(
    project: PathName, name: PathName, server: Service, _: User
) -> list[StoredFunction]:
    return server.catalog.versions(project, name)
