"""``/runs``: submitting runs, listing and reading them, their events, output and usage, and
aborting them. A user sees their own runs; an admin everyone's."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import pydantic
from fastapi import APIRouter, Query, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from runplane.runs import MAX_LISTED, ResizeRecord, RunRecord, RunState, TransitionRecord
from runplane.service.access import check_owner
from runplane.service.auth import Principal
from runplane.service.guard import PRINCIPAL, Lane, Message, Scope, Send
from runplane.service.handoff import Threads
from runplane.service.routes.context import Service, User
from runplane.service.routes.errors import refusal
from runplane.service.routes.fields import Name, Uid
from runplane.service.routes.submissions import FunctionsRead, RunSubmission
from runplane.service.server import Server
from runplane.service.usage_samples import encode
from runplane.service.wire import LOGS_REMOVED, NEXT_CURSOR, NEXT_OFFSET

router = APIRouter()


def run_of(server: Server, uid: str, who: Principal) -> RunRecord:
    """The run ``uid`` (or a unique prefix) names, if the caller may see it. A refusal
    repeats only what the caller gave: not the rest of another user's uid, nor its owner."""
    record = server.runs.get(uid)
    check_owner(who, record.owner, f"run {uid}")
    return record


#: A record as JSON, written directly: the routes every run passes return records they just
#: built, which FastAPI would otherwise validate again, on a worker thread, before writing.
_RECORD = TypeAdapter(RunRecord)
_RECORDS = TypeAdapter(list[RunRecord])


def record_answer(record: RunRecord, status: int = 200) -> Response:
    return Response(_RECORD.dump_json(record), status, media_type="application/json")


#: Submissions run on threads of their own: every run is submitted here, and handing a call
#: to one of these costs a fraction of what the framework's hand-off to its worker threads does
#: (a task group's cancel scope, a capacity limiter and a condition), or asyncio's executor's:
#: 110-200 and 40-45 µs of CPU here, against 15 (docs/decisions.md).
_SUBMITTING = Threads(16, "runplane-submit")


@router.post("/runs", status_code=201, response_model=RunRecord)
async def submit_run(body: RunSubmission, server: Service, who: User) -> Response:
    """Taken at the gate (:func:`submission_lane`) when its body is JSON, as every client
    sends it; declared here for the API's description and for any other body."""
    return await _SUBMITTING.call(_submitted, server, body, who)


#: Every run's submission reads its function here.
_FUNCTIONS = FunctionsRead()


def _submitted(server: Server, body: RunSubmission, who: Principal) -> Response:
    read = _FUNCTIONS(server, body, who.user)
    return record_answer(server.submit(read.function, who, body, read.recorded), 201)


def submission_lane(server: Server) -> Lane:
    """``POST /runs`` answered at the gate, with the body it parsed and the caller it found:
    the same submission and answers as :func:`submit_run`, and the same refusals (the body's
    validation errors located in it as FastAPI locates them), without the framework's
    middleware, routing, dependencies and second reading of the body, which cost more of the
    event loop per run than the rest of its answer (docs/benchmarks.md, "Scale")."""

    async def lane(scope: Scope, body: Any, send: Send) -> bool:
        if not isinstance(body, dict):
            return False  # the route says what a body of another shape is not
        try:
            submission = RunSubmission.model_validate(body)
        except pydantic.ValidationError as error:
            located = [{**e, "loc": ("body", *e["loc"])} for e in error.errors(include_url=False)]
            answer: Response = refusal(RequestValidationError(located))
        else:
            try:
                answer = await _SUBMITTING.call(_submitted, server, submission, scope[PRINCIPAL])
            except Exception as error:
                answer = refusal(error)
        await answer(scope, _no_body, send)
        return True

    return lane


async def _no_body() -> Message:
    """What an answer reads of a request it does not read: its end."""
    return {"type": "http.disconnect"}


Owner = Annotated[str | None, Query(max_length=253, pattern=r"^[^\x00]*$")]
#: A time: seconds since the epoch (as exact as a run's own times), or ISO 8601 (UTC when
#: it names no zone).
Time = Annotated[float | datetime | None, Query()]


def _seconds(at: float | datetime | None) -> float | None:
    if at is None or isinstance(at, float):
        return at
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()


_PAGED: dict[int | str, dict[str, Any]] = {
    200: {
        "headers": {
            NEXT_CURSOR: {
                "description": "the cursor of the next page; absent after the last",
                "schema": {"type": "string"},
            }
        }
    }
}


@router.get("/runs", response_model=list[RunRecord], responses=_PAGED)
def list_runs(
    server: Service,
    who: User,
    project: Annotated[Name | None, Query()] = None,
    state: Annotated[list[str] | None, Query(max_length=len(RunState))] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LISTED)] = 50,
    owner: Owner = None,
    name: Annotated[str | None, Query(max_length=63)] = None,
    label: Annotated[list[str] | None, Query(max_length=16)] = None,
    created_since: Time = None,
    created_until: Time = None,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
    updated_since: Time = None,
) -> Response:
    """Runs, newest first: a user's own; an admin's choice of owner, or everyone's.

    A page at a time: when more runs follow, the ``X-Runplane-Next-Cursor`` header holds the
    ``cursor`` of the next page (the same filters go with it). With ``updated_since``, the
    runs changed since then (inclusive), the latest change first: what a watch asks for,
    with the newest ``updated_at`` it has seen."""
    if not who.admin:
        owner = who.user
    runs, after = server.runs.page(
        limit=limit,
        project=project,
        states=state or (),
        owner=owner,
        name=name,
        labels=label or (),
        created_since=_seconds(created_since),
        created_until=_seconds(created_until),
        after=cursor,
        updated_since=_seconds(updated_since),
    )
    answer = Response(_RECORDS.dump_json(runs), media_type="application/json")
    if after is not None:
        answer.headers[NEXT_CURSOR] = after
    return answer


@router.get("/runs/counts")
def count_runs(
    server: Service, who: User, project: Annotated[Name | None, Query()] = None, owner: Owner = None
) -> dict[str, Any]:
    """How many runs there are in each state (a user's own; an admin's choice of owner, or
    everyone's), read from counts kept as runs change, never by counting runs."""
    if not who.admin:
        owner = who.user
    states = server.runs.state_counts(project=project, owner=owner)
    return {"total": sum(states.values()), "states": states}


@router.get("/runs/{uid}", response_model=RunRecord)
def get_run(uid: Uid, server: Service, who: User) -> Response:
    return record_answer(run_of(server, uid, who))


@router.post("/runs/{uid}/abort")
def abort_run(uid: Uid, server: Service, who: User) -> RunRecord:
    return server.runs.abort(run_of(server, uid, who).uid)


class ResizeBody(BaseModel):
    """New limits for a running run: a memory quantity, a CPU quantity, or both."""

    model_config = ConfigDict(extra="forbid")

    mem: str | int | float | None = Field(default=None)
    cpu: str | int | float | None = Field(default=None)


@router.post("/runs/{uid}/resize")
def resize_run(uid: Uid, body: ResizeBody, server: Service, who: User) -> ResizeRecord:
    """Resize a running job in place (its owner or an admin); ``409`` with the reason where
    its state, kind or node cannot."""
    return server.runs.resize(run_of(server, uid, who).uid, body.mem, body.cpu, who.user)


@router.get("/runs/{uid}/events")
def run_events(uid: Uid, server: Service, who: User) -> list[TransitionRecord]:
    return run_of(server, uid, who).transitions


@router.get(
    "/runs/{uid}/logs",
    response_class=Response,
    responses={200: {"content": {"application/octet-stream": {}}}},
)
def run_logs(
    uid: Uid, server: Service, who: User, offset: Annotated[int, Query(ge=0, le=2**53)] = 0
) -> Response:
    """The run's output from byte ``offset``, in chunks: the next read starts at the
    offset in the ``X-Runplane-Next-Offset`` header. Once retention removed it, a line
    saying so stands in for it, and ``X-Runplane-Logs-Removed`` says when."""
    record = run_of(server, uid, who)
    chunk, next_offset = server.runs.logs(record.uid, offset)
    headers = {NEXT_OFFSET: str(next_offset)}
    if record.logs_removed_at is not None:
        headers[LOGS_REMOVED] = str(record.logs_removed_at)
    return Response(chunk, media_type="application/octet-stream", headers=headers)


@router.get("/runs/{uid}/usage")
def run_usage(uid: Uid, server: Service, who: User) -> dict[str, int | float]:
    """What the run used: so far while it runs, in all once it ended. The memory it holds
    now is left out: it moves while the run runs, and the samples carry it; clients of an
    earlier version read exactly these two fields."""
    usage = server.runs.usage(run_of(server, uid, who).uid)
    return {"peak_memory_bytes": usage.peak_memory_bytes, "cpu_seconds": usage.cpu_seconds}


@router.get("/runs/{uid}/usage/samples")
def run_usage_samples(uid: Uid, server: Service, who: User) -> dict[str, Any]:
    """The run's memory and CPU over time, as sampled while it ran: ``[at, memory bytes,
    CPU seconds so far]`` each, oldest first, at most a bounded number (a long run's are
    coarser)."""
    return {"samples": encode(server.runs.samples(run_of(server, uid, who).uid))}
