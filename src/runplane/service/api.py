"""The HTTP API of ``runplane serve``: thin handlers over the server, errors as 4xx with the
same message the SDK and CLI give.

Authentication is a bearer token per user; a token's role decides what it may do: ``user``
runs functions within the policies, ``admin`` also changes service defaults.
"""

from __future__ import annotations

import dataclasses
import secrets
from importlib.metadata import version
from typing import Annotated, Any, Literal

import pydantic
from fastapi import Depends, FastAPI, HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from runplane.errors import InvalidValueError, RunplaneError
from runplane.placement import NodeSummary
from runplane.rendering import render
from runplane.runs import RunRecord, TransitionRecord, Usage
from runplane.runtimes.contract import Capabilities
from runplane.service.catalog import StoredFunction
from runplane.service.schedules import ScheduleRecord
from runplane.service.server import Server
from runplane.service.wire import API, NEXT_OFFSET
from runplane.spec.function import Function

_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
Name = Annotated[str, pydantic.StringConstraints(pattern=_NAME, max_length=63)]
PathName = Annotated[str, Path(pattern=_NAME, max_length=63)]
Uid = Annotated[str, Path(min_length=6, max_length=32, pattern=r"^[0-9a-f]+$")]
ScheduleId = Annotated[str, Path(min_length=1, max_length=32)]


@dataclasses.dataclass(frozen=True, slots=True)
class Principal:
    user: str
    role: Literal["admin", "user"]


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


class ScheduleSubmission(RunSubmission):
    schedule: str = pydantic.Field(max_length=128)


class ClusterOut(pydantic.BaseModel):
    runtime: str
    capabilities: Capabilities
    nodes: list[NodeSummary]


class ErrorOut(pydantic.BaseModel):
    error: str
    message: str
    field: str | None = None


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut} for status in (400, 401, 403, 404, 409, 422)
}


_bearer = HTTPBearer(auto_error=False)


def principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Who is calling, from the bearer token (compared in constant time)."""
    token = credentials.credentials if credentials else ""
    for known, who in request.app.state.tokens.items():
        if secrets.compare_digest(known.encode(), token.encode()):
            return who  # type: ignore[no-any-return]
    raise HTTPException(
        401, "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"}
    )


def admin(who: Annotated[Principal, Depends(principal)]) -> Principal:
    if who.role != "admin":
        raise HTTPException(
            403, f"user {who.user!r} may not change service defaults; only admins may"
        )
    return who


User = Annotated[Principal, Depends(principal)]
Admin = Annotated[Principal, Depends(admin)]


def create_app(server: Server) -> FastAPI:
    app = FastAPI(title="runplane", version=version("runplane"), responses=ERRORS)
    app.state.tokens = {
        t.token.get_secret_value(): Principal(t.user, t.role)
        for t in server.base_settings.service.tokens
    }

    @app.exception_handler(RunplaneError)
    async def runplane_error(_: Request, error: RunplaneError) -> JSONResponse:
        body = ErrorOut(
            error=type(error).__name__, message=str(error), field=getattr(error, "field", None)
        )
        return JSONResponse(body.model_dump(), status_code=error.http_status)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, error: HTTPException) -> JSONResponse:
        body = ErrorOut(error="HTTPError", message=str(error.detail))
        return JSONResponse(body.model_dump(), status_code=error.status_code, headers=error.headers)

    def function_of(submission: RunSubmission) -> Function:
        if submission.function is not None:
            if not isinstance(submission.function.get("metadata"), dict):
                raise InvalidValueError(
                    "function",
                    submission.function,
                    "a function has kind, metadata and spec",
                    "the output of fn.to_dict()",
                )
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

    @app.get(f"{API}/health")
    def health() -> dict[str, str]:
        return {"status": "ok", "version": app.version}

    @app.get(f"{API}/projects")
    def projects(_: User) -> list[str]:
        return server.catalog.projects()

    @app.post(f"{API}/functions", status_code=201)
    def store_function(body: dict[str, Any], who: User) -> StoredFunction:
        stored = server.catalog.store(function_of(RunSubmission(function=body)), who.user)
        return stored

    @app.get(f"{API}/projects/{{project}}/functions")
    def list_functions(project: PathName, _: User) -> list[StoredFunction]:
        return [f for f in server.catalog.latest(project)]

    @app.get(f"{API}/projects/{{project}}/functions/{{name}}")
    def get_function(
        project: PathName,
        name: PathName,
        _: User,
        version: Annotated[str | None, Query(max_length=64)] = None,
    ) -> StoredFunction:
        stored = server.catalog.get(project, name, version)
        return stored

    @app.get(f"{API}/projects/{{project}}/functions/{{name}}/versions")
    def function_versions(project: PathName, name: PathName, _: User) -> list[StoredFunction]:
        return [f for f in server.catalog.versions(project, name)]

    @app.post(f"{API}/runs", status_code=201)
    def submit_run(body: RunSubmission, who: User) -> RunRecord:
        return server.runs.submit(
            function_of(body),
            params=body.params,
            inputs=body.inputs,
            state_thresholds=body.state_thresholds,
            role=who.role,
        )

    @app.get(f"{API}/runs")
    def list_runs(
        _: User,
        project: Annotated[Name | None, Query()] = None,
        state: Annotated[list[str] | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    ) -> list[RunRecord]:
        return server.runs.list_runs(project=project, states=state or (), limit=limit)

    @app.get(f"{API}/runs/{{uid}}")
    def get_run(uid: Uid, _: User) -> RunRecord:
        return server.runs.get(uid)

    @app.post(f"{API}/runs/{{uid}}/abort")
    def abort_run(uid: Uid, _: User) -> RunRecord:
        return server.runs.abort(uid)

    @app.get(f"{API}/runs/{{uid}}/events")
    def run_events(uid: Uid, _: User) -> list[TransitionRecord]:
        return server.runs.get(uid).transitions

    @app.get(
        f"{API}/runs/{{uid}}/logs",
        response_class=Response,
        responses={200: {"content": {"application/octet-stream": {}}}},
    )
    def run_logs(uid: Uid, _: User, offset: Annotated[int, Query(ge=0, le=2**53)] = 0) -> Response:
        """The run's output from byte ``offset``, in chunks: the next read starts at the
        offset in the ``X-Runplane-Next-Offset`` header."""
        chunk, next_offset = server.runs.logs(uid, offset)
        return Response(
            chunk, media_type="application/octet-stream", headers={NEXT_OFFSET: str(next_offset)}
        )

    @app.get(f"{API}/runs/{{uid}}/usage")
    def run_usage(uid: Uid, _: User) -> Usage:
        """What the run used: so far while it runs, in all once it ended."""
        return server.runs.usage(uid)

    @app.post(f"{API}/deployments", status_code=201)
    def deploy(body: RunSubmission, who: User) -> dict[str, Any]:
        fn = function_of(body)
        return {
            "name": fn.metadata.name,
            "namespace": server.settings.namespace,
            "applied": server.deploy(fn, role=who.role),
        }

    @app.post(f"{API}/schedules", status_code=201)
    def create_schedule(body: ScheduleSubmission, who: User) -> ScheduleRecord:
        fn = function_of(body)
        render(fn, server.settings, role=who.role)  # refuse now what would fail at each fire
        record = server.schedules.create(
            project=fn.metadata.project,
            name=fn.metadata.name,
            cron=body.schedule,
            function=fn.to_dict(),
            params=body.params,
            state_thresholds=body.state_thresholds,
            user=who.user,
            role=who.role,
        )
        return record

    @app.get(f"{API}/schedules")
    def list_schedules(
        _: User,
        project: Annotated[Name | None, Query()] = None,
    ) -> list[ScheduleRecord]:
        return [r for r in server.schedules.list_schedules(project)]

    @app.delete(f"{API}/schedules/{{schedule_id}}", status_code=204)
    def delete_schedule(schedule_id: ScheduleId, _: User) -> None:
        server.schedules.delete(schedule_id)

    @app.get(f"{API}/defaults")
    def get_defaults(_: User) -> dict[str, Any]:
        return server.settings.function_defaults.model_dump(mode="json")

    @app.patch(f"{API}/defaults")
    def change_defaults(body: dict[str, Any], who: Admin) -> dict[str, Any]:
        return server.update_defaults(body, who.user).function_defaults.model_dump(mode="json")

    @app.get(f"{API}/cluster")
    def cluster(_: User) -> ClusterOut:
        runtime = server.runs.runtime
        return ClusterOut(
            runtime=runtime.name, capabilities=runtime.capabilities, nodes=server.nodes()
        )

    return app
