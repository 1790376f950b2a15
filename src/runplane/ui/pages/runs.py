"""Projects, a project's **Jobs and Workflows** (the runs list) and a run's own page.

Lists are pages of :data:`PAGE_SIZE` runs, newest first, each read from the cursor the last
page ended at (never by an offset), its total from the counts kept as runs change; users see
their own runs, admins everyone's. Both pages stay current without a reload
through :mod:`runplane.ui.live`.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): FastAPI reads the
# routes' parameters, whose dependency is made inside router().

import math
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from runplane.errors import InvalidValueError, RunplaneError
from runplane.rendering import RunRef, render
from runplane.rendering.summary import Elided, elided_yaml, summary
from runplane.runs import RunRecord, RunState
from runplane.service.projects import ProjectRecord
from runplane.service.records import RunListing
from runplane.spec.function import Function
from runplane.ui.charts import Chart, usage_charts
from runplane.ui.sessions import Session
from runplane.ui.web import ROOT, UI, in_page

PAGE_SIZE = 50
#: The most of a run's output a page shows before its live stream continues.
LOG_CHUNK = 1 << 20

ProjectName = Annotated[str, Query(max_length=63)]


@dataclass(frozen=True, slots=True)
class RunFilters:
    """What the runs list is filtered by, as the page's form and links carry it."""

    state: str = ""
    owner: str = ""
    name: str = ""
    label: str = ""
    created_since: str = ""
    created_until: str = ""

    def query(self, **more: str | int) -> str:
        """The query string of these filters and ``more`` (empty values left out)."""
        given = {**asdict(self), **more}
        return "?" + urlencode({k: v for k, v in given.items() if v})

    @property
    def counted(self) -> bool:
        """Whether the counts hold this list's total (state and owner filters only)."""
        return not (self.name or self.label or self.created_since or self.created_until)


@dataclass(frozen=True, slots=True)
class RunsPage:
    project: str
    filters: RunFilters
    #: Which page this is, counted from the first (for display: the cursor says where).
    page: int
    #: The runs matching the filters, when the counts hold it; ``None`` otherwise.
    total: int | None
    runs: list[RunRecord]
    #: The cursor of the next page; ``None`` on the last.
    next: str | None
    #: When the page was read: its live stream sends what changed since.
    since: float

    @property
    def state(self) -> str:
        return self.filters.state

    @property
    def pages(self) -> int | None:
        return None if self.total is None else max(1, math.ceil(self.total / PAGE_SIZE))

    def next_query(self) -> str:
        return self.filters.query(after=self.next or "", page=self.page + 1)

    def first_query(self) -> str:
        return self.filters.query()


def _moment(field: str, value: str) -> float | None:
    """A date or time of the filter form (UTC): seconds since the epoch."""
    if not value:
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidValueError(
            field, value, "a date or a date and time (ISO 8601, UTC)", "2026-11-25T08:00"
        ) from None
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()


def filter_of(session: Session, project: str, filters: RunFilters) -> RunListing:
    """The store's listing of the page's filters, as this user may see it: a user's own
    runs; an admin's choice of owner, or everyone's."""
    owner = session.who.owner_filter()
    if owner is None and filters.owner:
        owner = filters.owner
    return RunListing(
        project=project,
        states=[RunState.named("state", filters.state).value] if filters.state else [],
        owner=owner,
        name=filters.name or None,
        labels=[filters.label] if filters.label else (),
        created_since=_moment("created_since", filters.created_since),
        created_until=_moment("created_until", filters.created_until),
    )


def runs_page(
    ui: UI, session: Session, project: str, filters: RunFilters, after: str, page: int
) -> RunsPage:
    since = time.time()
    listing = filter_of(session, project, filters)
    total = None
    if filters.counted:
        states = [filters.state] if filters.state else []
        total = ui.server.runs.count_runs(project=project, states=states, owner=listing["owner"])
    listing["after"], listing["brief"] = after or None, True
    runs, cursor = ui.server.runs.page(limit=PAGE_SIZE, **listing)
    return RunsPage(project, filters, page if after else 1, total, runs, cursor, since)


def project_record(ui: UI, project: str) -> ProjectRecord | None:
    """The project's record, shown above its jobs; ``None`` for a project without one."""
    return ui.server.projects.record(project)


def visible_run(ui: UI, session: Session, uid: str) -> RunRecord:
    """The run, if this user may see it (the API's own rule). Another user's run is answered
    as no run at all, in the words of what was typed: a page never tells that a run of
    someone else exists, nor the rest of its uid."""
    return ui.server.runs.get(uid, session.who.owner_filter())


@dataclass(frozen=True, slots=True)
class Manifests:
    yaml: str
    qos: str
    lints: list[str]
    error: str
    #: What the run got, in words (:func:`runplane.rendering.summary.summary`).
    summary: list[tuple[str, str]] = field(default_factory=list)
    #: The long texts set apart from the YAML, expanded on demand.
    apart: list[Elided] = field(default_factory=list)


def manifests_of(ui: UI, record: RunRecord) -> Manifests:
    """What the run renders to under the service's settings: the pod first."""
    try:
        fn = Function.from_dict(record.function)
        attempt = record.attempts[-1].number if record.attempts else 1
        rendered = render(fn, ui.server.settings, run=RunRef(record.uid, attempt))
    except RunplaneError as error:
        return Manifests("", "", [], str(error))
    text, apart = elided_yaml(rendered.manifests)
    return Manifests(
        text,
        rendered.qos.value,
        [str(lint) for lint in rendered.lints],
        "",
        summary(record, rendered.pod_spec, rendered.qos.value),
        apart,
    )


def run_charts(ui: UI, record: RunRecord) -> list[Chart]:
    """The run's memory and CPU over time against its request and limit."""
    return usage_charts(
        ui.server.runs.samples(record.uid), record.requests, record.limits, record.resizes
    )


def run_context(ui: UI, record: RunRecord) -> dict[str, Any]:
    chunk, next_offset = ui.server.runs.logs(record.uid, 0)
    return {
        "charts": run_charts(ui, record),
        "run": record,
        "project": record.project,
        "manifests": manifests_of(ui, record),
        "log_text": chunk.decode("utf-8", errors="replace"),
        "log_offset": next_offset,
        "log_more": len(chunk) >= LOG_CHUNK,
    }


def router(ui: UI) -> APIRouter:
    routes = APIRouter()
    LoggedIn = Annotated[Session, Depends(ui.session)]

    @routes.get("/", response_class=HTMLResponse)
    def projects(request: Request, session: LoggedIn) -> Response:
        records = {record.name: record for record in ui.server.projects.list_projects()}
        return ui.page(request, "projects.html", session, {"nav": "projects", "records": records})

    @routes.get("/projects/{project}")
    def project_home(project: str, _: LoggedIn) -> Response:
        return RedirectResponse(f"{ROOT}/projects/{project}/jobs", status_code=303)

    @routes.get("/projects/{project}/jobs", response_class=HTMLResponse)
    def jobs(
        request: Request,
        session: LoggedIn,
        project: str,
        state: Annotated[str, Query(max_length=16)] = "",
        owner: Annotated[str, Query(max_length=253)] = "",
        name: Annotated[str, Query(max_length=63)] = "",
        label: Annotated[str, Query(max_length=400)] = "",
        created_since: Annotated[str, Query(max_length=32)] = "",
        created_until: Annotated[str, Query(max_length=32)] = "",
        after: Annotated[str, Query(max_length=200)] = "",
        page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
    ) -> Response:
        filters = RunFilters(
            state, owner, name.strip(), label.strip(), created_since, created_until
        )
        listing = runs_page(ui, session, project, filters, after, page)
        context = {"listing": listing, "project": project}
        if in_page(request):  # the list alone, swapped in for the one shown
            return ui.page(request, "jobs_table.html", session, context)
        context |= {
            "nav": "jobs",
            "states": list(RunState),
            "record": project_record(ui, project),
            "admin": session.who.admin,
        }
        return ui.page(request, "jobs.html", session, context)

    @routes.get("/runs/{uid}", response_class=HTMLResponse)
    def run_page(request: Request, session: LoggedIn, uid: str) -> Response:
        record = visible_run(ui, session, uid)
        context = {**run_context(ui, record), "nav": "jobs"}
        return ui.page(request, "run.html", session, context)

    @routes.get("/runs/{uid}/logs", response_class=HTMLResponse)
    def run_logs(
        request: Request,
        session: LoggedIn,
        uid: str,
        offset: Annotated[int, Query(ge=0, le=2**53)] = 0,
    ) -> Response:
        """The run's output from ``offset``, as a page of its own (reading without
        JavaScript)."""
        record = visible_run(ui, session, uid)
        chunk, next_offset = ui.server.runs.logs(record.uid, offset)
        context = {
            "run": record,
            "project": record.project,
            "log_text": chunk.decode("utf-8", errors="replace"),
            "offset": offset,
            "log_offset": next_offset,
            "log_more": len(chunk) >= LOG_CHUNK,
        }
        return ui.page(request, "logs.html", session, context)

    @routes.post("/runs/{uid}/abort")
    async def abort(request: Request, session: LoggedIn, uid: str) -> Response:
        await ui.form(request, session)
        record = await run_in_threadpool(visible_run, ui, session, uid)
        await run_in_threadpool(ui.server.runs.abort, record.uid)
        return RedirectResponse(f"{ROOT}/runs/{record.uid}", status_code=303)

    @routes.post("/runs/{uid}/resize", response_class=HTMLResponse)
    async def resize(request: Request, session: LoggedIn, uid: str) -> Response:
        """Resize the running job in place; a refusal is said on the run's page."""
        form = await ui.form(request, session)
        record = await run_in_threadpool(visible_run, ui, session, uid)
        given = {key: str(form.get(key) or "").strip() or None for key in ("mem", "cpu")}
        try:
            await run_in_threadpool(
                ui.server.runs.resize, record.uid, given["mem"], given["cpu"], session.who.user
            )
        except RunplaneError as error:
            record = await run_in_threadpool(visible_run, ui, session, uid)
            context = {**run_context(ui, record), "nav": "jobs", "resize_error": str(error)}
            return ui.page(request, "run.html", session, context, error.http_status)
        return RedirectResponse(f"{ROOT}/runs/{record.uid}", status_code=303)

    return routes
