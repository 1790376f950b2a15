"""Projects, a project's **Jobs and Workflows** (the runs list) and a run's own page.

Lists are pages of :data:`PAGE_SIZE` runs, newest first, read with one count and one list
query; users see their own runs, admins everyone's. Both pages stay current without a reload
through :mod:`runplane.ui.live`.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): FastAPI reads the
# routes' parameters, whose dependency is made inside router().

import math
import time
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from runplane.errors import NotFoundError, RunplaneError
from runplane.rendering import RunRef, render
from runplane.rendering.text import manifests_yaml
from runplane.runs import RunRecord, RunState
from runplane.service.access import check_owner
from runplane.service.projects import ProjectRecord
from runplane.spec.function import Function
from runplane.ui.sessions import Session
from runplane.ui.web import ROOT, UI

PAGE_SIZE = 50
#: The most of a run's output a page shows before its live stream continues.
LOG_CHUNK = 1 << 20

ProjectName = Annotated[str, Query(max_length=63)]


@dataclass(frozen=True, slots=True)
class RunsPage:
    project: str
    state: str
    page: int
    pages: int
    total: int
    runs: list[RunRecord]
    #: When the page was read: its live stream sends what changed since.
    since: float

    def query(self, page: int | None = None) -> str:
        parts = [f"page={page or self.page}"]
        if self.state:
            parts.insert(0, f"state={self.state}")
        return "?" + "&".join(parts)


def runs_page(ui: UI, session: Session, project: str, state: str, page: int) -> RunsPage:
    since = time.time()
    states = [RunState.named("state", state).value] if state else []
    owner = session.who.owner_filter()
    total = ui.server.runs.count_runs(project=project, states=states, owner=owner)
    pages = max(1, math.ceil(total / PAGE_SIZE))
    page = min(max(page, 1), pages)
    runs = ui.server.runs.list_runs(
        project=project,
        states=states,
        owner=owner,
        limit=PAGE_SIZE,
        offset=(page - 1) * PAGE_SIZE,
        brief=True,
    )
    return RunsPage(project, state, page, pages, total, runs, since)


def project_record(ui: UI, project: str) -> ProjectRecord | None:
    """The project's record, shown above its jobs; ``None`` for a project without one."""
    try:
        record = ui.server.projects.get(project)
    except NotFoundError:
        return None
    return record if record.recorded else None


def visible_run(ui: UI, session: Session, uid: str) -> RunRecord:
    """The run, if this user may see it (the API's own rule)."""
    record = ui.server.runs.get(uid)
    check_owner(session.who, record.owner, f"run {record.uid}")
    return record


@dataclass(frozen=True, slots=True)
class Manifests:
    yaml: str
    qos: str
    lints: list[str]
    error: str


def manifests_of(ui: UI, record: RunRecord) -> Manifests:
    """What the run renders to under the service's settings: the pod first."""
    try:
        fn = Function.from_dict(record.function)
        attempt = record.attempts[-1].number if record.attempts else 1
        rendered = render(fn, ui.server.settings, run=RunRef(record.uid, attempt))
    except RunplaneError as error:
        return Manifests("", "", [], str(error))
    return Manifests(
        manifests_yaml(rendered.manifests),
        rendered.qos.value,
        [str(lint) for lint in rendered.lints],
        "",
    )


def run_context(ui: UI, record: RunRecord) -> dict[str, Any]:
    chunk, next_offset = ui.server.runs.logs(record.uid, 0)
    return {
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
        page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
    ) -> Response:
        listing = runs_page(ui, session, project, state, page)
        context = {
            "listing": listing,
            "project": project,
            "nav": "jobs",
            "states": list(RunState),
            "record": project_record(ui, project),
        }
        template = "jobs_table.html" if "hx-request" in request.headers else "jobs.html"
        return ui.page(request, template, session, context)

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

    return routes
