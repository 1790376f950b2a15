"""``/functions`` and a project's ``/functions``: stored functions and their versions."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from runplane.errors import NotFoundError
from runplane.runs import MAX_LISTED
from runplane.service.catalog import StoredFunction
from runplane.service.routes.context import Service, User
from runplane.service.routes.fields import PathName
from runplane.service.routes.submissions import RunSubmission, function_of
from runplane.service.sizing import suggest, suggestion_json

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


@router.get("/projects/{project}/functions/{name}/suggestion")
def function_suggestion(
    project: PathName,
    name: PathName,
    server: Service,
    who: User,
    runs: Annotated[int, Query(ge=1, le=MAX_LISTED)] = 100,
) -> dict[str, Any]:
    """The requests and limits the function's last ``runs`` runs (the caller's own; an
    admin's, everyone's) suggest, what they rest on (how many measured attempts, their spread),
    or why there is no suggestion yet (fewer than 3 measured attempts)."""
    records = server.runs.list_runs(
        limit=runs, project=project, name=name, owner=who.owner_filter(), brief=True
    )
    if not records:
        raise NotFoundError(f"no runs of {project}/{name} among the last {runs}")
    return suggestion_json(suggest(records, records[0].requests))
