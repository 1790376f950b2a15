"""The HTTP API of ``runplane serve``: thin handlers over the server, errors as 4xx with the
same message the SDK and CLI give.

Authentication is a bearer token per user, checked at the boundary before a body is read
(:mod:`runplane.service.guard`); a token's role decides what it may do: ``user`` runs functions
within the policies, ``admin`` also changes service defaults and acts on everyone's runs,
schedules and functions. A token also lists the Secrets its runs may reference.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from enum import StrEnum
from importlib.metadata import version
from typing import Annotated, Any

import pydantic
from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from runplane.errors import InvalidValueError, RunplaneError, shown
from runplane.placement import NodeSummary
from runplane.runs import MAX_LISTED, RunRecord, RunState, TransitionRecord, Usage
from runplane.runtimes.contract import Call, Capabilities
from runplane.service.access import admin_only, check_owner
from runplane.service.auth import Principal
from runplane.service.catalog import StoredFunction
from runplane.service.defaults import policies_view
from runplane.service.guard import PRINCIPAL, Gate
from runplane.service.projects import (
    MAX_DESCRIPTION_BYTES,
    MAX_IMAGE_LENGTH,
    DeletionStrategy,
    ProjectRecord,
)
from runplane.service.schedules import ScheduleRecord
from runplane.service.server import Server
from runplane.service.wire import API, FUNCTION_STATUS, INVOKE_TIMEOUT, NEXT_OFFSET
from runplane.spec.bounds import MAX_DEPTH, check_json
from runplane.spec.function import Function

#: A function (or a defaults patch) sent inline, as JSON; its code is bounded on its own.
MAX_FUNCTION_BYTES = 2 << 20

_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
Name = Annotated[str, pydantic.StringConstraints(pattern=_NAME, max_length=63)]
PathName = Annotated[str, Path(pattern=_NAME, max_length=63)]
Uid = Annotated[str, Path(min_length=6, max_length=32, pattern=r"^[0-9a-f]+$")]
ScheduleId = Annotated[str, Path(min_length=1, max_length=32)]
#: A node's name: a DNS subdomain, as Kubernetes names nodes.
_SUBDOMAIN = _NAME[:-1] + r"(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
NodeName = Annotated[str, Path(max_length=253, pattern=_SUBDOMAIN)]


class RunSubmission(pydantic.BaseModel):
    """A run of an inline function, or of a stored one by name (and version)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    function: dict[str, Any] | None = None
    project: Name | None = None
    name: Name | None = None
    version: str | None = pydantic.Field(default=None, max_length=64)
    params: dict[str, Any] = pydantic.Field(default_factory=dict)
    inputs: dict[str, str] = pydantic.Field(default_factory=dict)
    state_thresholds: dict[str, Any] = pydantic.Field(default_factory=dict)


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


class ProjectIn(ProjectPatch):
    name: Name


class ScheduleSubmission(RunSubmission):
    schedule: str = pydantic.Field(max_length=128)


class ClusterOut(pydantic.BaseModel):
    runtime: str
    capabilities: Capabilities
    #: Whether runs can start: some node takes new pods. ``message`` says how many, and why
    #: the others do not.
    ready: bool
    message: str
    nodes: list[NodeSummary]


class NodeChange(pydantic.BaseModel):
    """Labels to set, and ``null`` for those to remove (a JSON merge patch of the labels)."""

    model_config = pydantic.ConfigDict(extra="forbid")

    labels: dict[str, str | None] = pydantic.Field(max_length=64)


class NodeLabelsOut(pydantic.BaseModel):
    name: str
    labels: dict[str, str]


class ErrorOut(pydantic.BaseModel):
    error: str
    message: str
    field: str | None = None


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut} for status in (400, 401, 403, 404, 409, 422)
}


#: Declares the bearer scheme in the API's description; the gate has checked the token.
_bearer = HTTPBearer(auto_error=False)
#: What answers without a token: liveness and the API's own description.
PUBLIC = (f"{API}/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc")


def principal(
    request: Request,
    _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Who is calling: found by the gate from the bearer token, before the body was read."""
    who = request.scope.get(PRINCIPAL)
    if not isinstance(who, Principal):  # a public path's route asked for a caller
        raise HTTPException(
            401, "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"}
        )
    return who


def admin(who: Annotated[Principal, Depends(principal)]) -> Principal:
    if not who.admin:
        raise HTTPException(403, admin_only(who))
    return who


User = Annotated[Principal, Depends(principal)]
Admin = Annotated[Principal, Depends(admin)]


#: The longest a deployed function's answer is awaited, in seconds.
MAX_INVOKE_TIMEOUT = 600.0


def _invoke_timeout(given: str | None) -> float:
    """The caller's timeout for an invoke (its header), 60 s when not given."""
    if given is None:
        return 60.0
    try:
        timeout = float(given)
    except ValueError:
        timeout = -1.0
    if not 0 < timeout <= MAX_INVOKE_TIMEOUT:
        raise InvalidValueError(
            INVOKE_TIMEOUT, given, f"seconds, more than 0 and at most {MAX_INVOKE_TIMEOUT:g}", "60"
        )
    return timeout


def _error(error: str, message: str, status: int, field: str | None = None) -> JSONResponse:
    """Every 4xx has this one shape: what kind of error, the message, the field."""
    body = ErrorOut(error=error, message=message, field=field)
    return JSONResponse(body.model_dump(), status_code=status)


def create_app(server: Server, shutdown_grace: float | None = None) -> FastAPI:
    """The API of ``server``. With ``shutdown_grace``, the app closes the server when it shuts
    down (SIGTERM), giving runs under way that many seconds."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        if shutdown_grace is not None:
            await asyncio.to_thread(server.close, shutdown_grace)

    app = FastAPI(
        title="runplane", version=version("runplane"), responses=ERRORS, lifespan=lifespan
    )
    app.add_middleware(
        Gate,
        max_bytes=server.base_settings.service.max_request_bytes,
        tokens=server.tokens,
        api=API,
        public=PUBLIC,
    )

    @app.exception_handler(RunplaneError)
    async def runplane_error(_: Request, error: RunplaneError) -> JSONResponse:
        return _error(
            type(error).__name__, str(error), error.http_status, getattr(error, "field", None)
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, error: StarletteHTTPException) -> JSONResponse:
        response = _error("HTTPError", str(error.detail), error.status_code)
        response.headers.update(error.headers or {})
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0]
        where = [str(part) for part in first.get("loc", ()) if part not in ("body", "query")]
        field = ".".join(where) or "request"
        if first.get("type") == "json_invalid":
            detail = first.get("ctx", {}).get("error", "")
            return _error("InvalidValueError", f"the body is not valid JSON ({detail})", 422)
        value = first.get("input")
        message = f"{field}: {shown(value)} is not valid; {first.get('msg', 'invalid')}"
        return _error("InvalidValueError", message, 422, field)

    @app.exception_handler(RecursionError)
    async def too_deep(_: Request, error: RecursionError) -> JSONResponse:
        return _error("InvalidValueError", f"the body nests deeper than {MAX_DEPTH} levels", 422)

    def function_of(submission: RunSubmission) -> Function:
        if submission.function is not None:
            if not isinstance(submission.function.get("metadata"), dict):
                raise InvalidValueError(
                    "function",
                    submission.function,
                    "a function has kind, metadata and spec",
                    "the output of fn.to_dict()",
                )
            check_json("function", submission.function, MAX_FUNCTION_BYTES, "fn.to_dict()")
            return Function.from_dict(submission.function)
        if submission.project and submission.name:
            stored = server.catalog.get(submission.project, submission.name, submission.version)
            return Function.from_dict(stored.function)
        raise InvalidValueError(
            "function",
            None,
            "give an inline function, or the project and name of a stored one",
            '{"project": "default", "name": "training"}',
        )

    def run_of(uid: str, who: Principal) -> RunRecord:
        """The run ``uid`` (or a unique prefix) names, if the caller may see it. A refusal
        repeats only what the caller gave: not the rest of another user's uid, nor its owner."""
        record = server.runs.get(uid)
        check_owner(who, record.owner, f"run {uid}")
        return record

    @app.get(f"{API}/health")
    def health() -> dict[str, str]:
        return {"status": "ok", "version": app.version}

    @app.get(f"{API}/projects")
    def projects(
        _: User, format: Annotated[ProjectFormat, Query()] = ProjectFormat.NAME_ONLY
    ) -> list[str] | list[ProjectRecord]:
        """Every project: with a record, or known from its runs, functions or schedules;
        names (``format=name_only``, the default) or records (``format=full``)."""
        if format is ProjectFormat.FULL:
            return server.projects.list_projects()
        return server.projects.names()

    @app.get(f"{API}/projects/{{project}}")
    def get_project(project: PathName, _: User) -> ProjectRecord:
        return server.projects.get(project)

    @app.post(f"{API}/projects", status_code=201, responses={200: {"model": ProjectRecord}})
    def create_project(body: ProjectIn, who: User, response: Response) -> ProjectRecord:
        """Get-or-create: a new record is the caller's (201); an existing one is returned as
        it is (200), whoever owns it."""
        values = body.model_dump(exclude={"name"}, exclude_none=True)
        record, created = server.projects.create(body.name, who.user, values)
        if not created:
            response.status_code = 200
        return record

    @app.patch(f"{API}/projects/{{project}}")
    def update_project(project: PathName, body: ProjectPatch, who: User) -> ProjectRecord:
        """Change a project's description, parameters, default image or labels: its
        owner's or an admin's to do."""
        values = body.model_dump(exclude_unset=True)
        return server.projects.update(project, values, who.user, admin=who.admin)

    @app.delete(f"{API}/projects/{{project}}", status_code=204)
    def delete_project(
        project: PathName,
        who: User,
        deletion_strategy: Annotated[DeletionStrategy, Query()] = DeletionStrategy.RESTRICTED,
    ) -> None:
        """Delete a project (owner or admin). ``restricted`` (the default) refuses with 409
        while it has runs, stored functions or schedules; ``cascading`` deletes its stored
        functions and schedules with it and keeps its runs' records."""
        server.projects.delete(project, who.user, admin=who.admin, strategy=deletion_strategy)

    @app.post(f"{API}/functions", status_code=201)
    def store_function(body: dict[str, Any], who: User) -> StoredFunction:
        """Store a version; a name belongs to the user who stored it first (admins: any)."""
        fn = function_of(RunSubmission(function=body))
        return server.catalog.store(fn, who.user, admin=who.admin)

    @app.get(f"{API}/projects/{{project}}/functions")
    def list_functions(project: PathName, _: User) -> list[StoredFunction]:
        return server.catalog.latest(project)

    @app.get(f"{API}/projects/{{project}}/functions/{{name}}")
    def get_function(
        project: PathName,
        name: PathName,
        _: User,
        version: Annotated[str | None, Query(max_length=64)] = None,
    ) -> StoredFunction:
        return server.catalog.get(project, name, version)

    @app.delete(f"{API}/projects/{{project}}/functions/{{name}}", status_code=204)
    def delete_function(project: PathName, name: PathName, who: User) -> None:
        """Delete a function with all its versions: its owner's or an admin's to do."""
        server.catalog.delete(project, name, who.user, admin=who.admin)

    @app.get(f"{API}/projects/{{project}}/functions/{{name}}/versions")
    def function_versions(project: PathName, name: PathName, _: User) -> list[StoredFunction]:
        return server.catalog.versions(project, name)

    @app.post(f"{API}/runs", status_code=201)
    def submit_run(body: RunSubmission, who: User) -> RunRecord:
        return server.submit(
            function_of(body),
            who,
            params=body.params,
            inputs=body.inputs,
            state_thresholds=body.state_thresholds,
        )

    @app.get(f"{API}/runs")
    def list_runs(
        who: User,
        project: Annotated[Name | None, Query()] = None,
        state: Annotated[list[str] | None, Query(max_length=len(RunState))] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_LISTED)] = 50,
        owner: Annotated[str | None, Query(max_length=253, pattern=r"^[^\x00]*$")] = None,
    ) -> list[RunRecord]:
        """Runs, newest first: a user's own; an admin's choice of owner, or everyone's."""
        if not who.admin:
            owner = who.user
        return server.runs.list_runs(project=project, states=state or (), limit=limit, owner=owner)

    @app.get(f"{API}/runs/{{uid}}")
    def get_run(uid: Uid, who: User) -> RunRecord:
        return run_of(uid, who)

    @app.post(f"{API}/runs/{{uid}}/abort")
    def abort_run(uid: Uid, who: User) -> RunRecord:
        return server.runs.abort(run_of(uid, who).uid)

    @app.get(f"{API}/runs/{{uid}}/events")
    def run_events(uid: Uid, who: User) -> list[TransitionRecord]:
        return run_of(uid, who).transitions

    @app.get(
        f"{API}/runs/{{uid}}/logs",
        response_class=Response,
        responses={200: {"content": {"application/octet-stream": {}}}},
    )
    def run_logs(
        uid: Uid, who: User, offset: Annotated[int, Query(ge=0, le=2**53)] = 0
    ) -> Response:
        """The run's output from byte ``offset``, in chunks: the next read starts at the
        offset in the ``X-Runplane-Next-Offset`` header."""
        chunk, next_offset = server.runs.logs(run_of(uid, who).uid, offset)
        return Response(
            chunk, media_type="application/octet-stream", headers={NEXT_OFFSET: str(next_offset)}
        )

    @app.get(f"{API}/runs/{{uid}}/usage")
    def run_usage(uid: Uid, who: User) -> Usage:
        """What the run used: so far while it runs, in all once it ended."""
        return server.runs.usage(run_of(uid, who).uid)

    @app.post(f"{API}/deployments", status_code=201)
    def deploy(body: RunSubmission, who: User) -> dict[str, Any]:
        fn = function_of(body)
        return {
            "name": fn.metadata.name,
            "namespace": server.settings.namespace,
            "applied": server.deploy(fn, who),
        }

    @app.get(f"{API}/deployments")
    def list_deployments(
        who: User, project: Annotated[Name | None, Query()] = None
    ) -> list[dict[str, Any]]:
        """Serving deployments: a user's own (those they deployed), everyone's for an admin."""
        return server.deployments(who, project)

    @app.get(f"{API}/deployments/{{project}}/{{name}}")
    def get_deployment(project: PathName, name: PathName, who: User) -> dict[str, Any]:
        return server.deployment(project, name, who)

    @app.delete(f"{API}/deployments/{{project}}/{{name}}")
    def delete_deployment(project: PathName, name: PathName, who: User) -> dict[str, str]:
        return {"deleted": server.delete_deployment(project, name, who)}

    async def invoke_deployment(
        project: PathName, name: PathName, path: str, request: Request, who: User
    ) -> Response:
        """The request sent on to the deployment (its path, query, body and content type);
        the answer is the function's body, its status in ``X-Runplane-Function-Status``, so a
        function's 404 is not mistaken for the API's."""
        if len(path) > 2048:
            raise InvalidValueError(
                "path", path[:64] + "...", "at most 2048 characters", "/predict"
            )
        query = request.url.query
        headers = {
            key: value
            for key, value in request.headers.items()
            if key.lower() in ("content-type", "accept")
        }
        call = Call(
            method=request.method,
            path=path + (f"?{query}" if query else ""),
            body=await request.body(),
            headers=headers,
            timeout=_invoke_timeout(request.headers.get(INVOKE_TIMEOUT)),
        )
        answer = await asyncio.to_thread(server.invoke, project, name, call, who)
        return Response(
            answer.body,
            media_type=answer.content_type or None,
            headers={FUNCTION_STATUS: str(answer.status)},
        )

    # One route per method, each with its own operation id in the OpenAPI document.
    for method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
        app.add_api_route(
            f"{API}/deployments/{{project}}/{{name}}/invoke/{{path:path}}",
            invoke_deployment,
            methods=[method],
            response_class=Response,
            operation_id=f"invoke_deployment_{method.lower()}",
        )

    @app.post(f"{API}/schedules", status_code=201)
    def create_schedule(body: ScheduleSubmission, who: User) -> ScheduleRecord:
        return server.schedule(
            function_of(body), body.schedule, body.params, body.state_thresholds, who
        )

    @app.get(f"{API}/schedules")
    def list_schedules(
        who: User, project: Annotated[Name | None, Query()] = None
    ) -> list[ScheduleRecord]:
        """Schedules: a user's own, or everyone's for an admin."""
        return server.schedules.list_schedules(project, owner=who.owner_filter())

    @app.delete(f"{API}/schedules/{{schedule_id}}", status_code=204)
    def delete_schedule(schedule_id: ScheduleId, who: User) -> None:
        schedule = server.schedules.get(schedule_id)
        check_owner(who, schedule.created_by, f"schedule {schedule_id}")
        server.schedules.delete(schedule_id)

    def defaults_out() -> dict[str, Any]:
        settings = server.settings
        return {
            **settings.function_defaults.model_dump(mode="json"),
            "policies": policies_view(settings),
        }

    @app.get(f"{API}/defaults")
    def get_defaults(_: User) -> dict[str, Any]:
        """The function defaults, and under ``policies`` the policies in force."""
        return defaults_out()

    @app.get(f"{API}/cluster")
    def cluster(_: User) -> ClusterOut:
        runtime = server.runs.runtime
        nodes = server.nodes()
        ready = [node for node in nodes if node.ready]
        message = f"{len(ready)} of {len(nodes)} nodes take new pods" + "".join(
            f"; {node.name}: {node.condition}" for node in nodes if not node.ready
        )
        return ClusterOut(
            runtime=runtime.name,
            capabilities=runtime.capabilities,
            ready=bool(ready),
            message=message,
            nodes=nodes,
        )

    @app.patch(f"{API}/defaults")
    def change_defaults(body: dict[str, Any], who: Admin) -> dict[str, Any]:
        """Merge ``body`` into the defaults (``null`` removes a key, back to the configured
        value); refused whole if the result would not render a function."""
        check_json("defaults", body, MAX_FUNCTION_BYTES, "{'priority_class': 'low'}")
        server.update_defaults(body, who.user)
        return defaults_out()

    @app.patch(f"{API}/cluster/nodes/{{name}}")
    def label_node(name: NodeName, body: NodeChange, who: User) -> NodeLabelsOut:
        """Set a node's labels and remove those given ``null`` (admins): on a cluster the Node
        object's, on the embedded default this machine's (kept by the service's home)."""
        if not who.admin:
            raise HTTPException(403, f"user {who.user!r} may not label nodes; only admins may")
        return NodeLabelsOut(name=name, labels=server.label_node(name, body.labels))

    return app
