"""**ML functions**: stored functions and their versions; a function's ⋮ menu leads to
**Edit** (the Resources pane, saved as a new version) and, for serving functions, **Deploy**.

Versions are the catalog's own (the same content is the same version); a save goes through the
catalog and a deploy through the server, exactly as ``POST /api/v1/functions`` and
``POST /api/v1/deployments`` do.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): FastAPI reads the
# routes' parameters, whose dependency is made inside router().

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from runplane.errors import RunplaneError
from runplane.rendering import render
from runplane.service.sizing import suggest, suggestion_json
from runplane.spec.function import Function, FunctionKind
from runplane.spec.numbers import whole_number
from runplane.ui.charts import Chart, peaks_chart
from runplane.ui.jobform import Errors, JobForm
from runplane.ui.pages.newjob import field_of
from runplane.ui.pane import FIELDS, pane_context
from runplane.ui.sessions import Session
from runplane.ui.web import ROOT, UI
from runplane.ui.wording import worded

Version = Annotated[str, Query(max_length=64)]


#: The most replicas, workers or seconds a deploy form takes (Kubernetes' int32).
_MAX_FORM_NUMBER = 2**31 - 1


#: The serving form's fields, by name, as their labels say them.
SERVING_LABELS = {
    "min_replicas": "Replicas min",
    "max_replicas": "Replicas max",
    "workers": "Workers",
    "worker_timeout": "Worker timeout (s)",
}


def _int_or_none(field: str, text: str) -> int | None:
    """A whole number of the deploy form, or ``None`` when left empty; refused in the words of
    the field's label."""
    if not text.strip():
        return None
    return whole_number(field, text, 0, _MAX_FORM_NUMBER, "2")


def apply_serving(fn: Function, values: dict[str, str]) -> dict[str, str]:
    """The replicas and workers typed into ``values`` set on ``fn``; what is refused, by field,
    in the words of its label. Min and max are checked together, as typed: never the one
    against the other's stored value."""
    errors: dict[str, str] = {}
    numbers: dict[str, int | None] = {}
    for key, label in SERVING_LABELS.items():
        try:
            numbers[key] = _int_or_none(label, values.get(key, ""))
        except RunplaneError as error:
            errors[key] = str(error)
    low, high = numbers.get("min_replicas"), numbers.get("max_replicas")
    if low is not None and high is not None and low > high:
        errors["min_replicas"] = (
            f"Replicas min: {low} is above Replicas max {high}; min must be at most max "
            "(example: 1 and 4)"
        )
    if errors:
        return errors
    fn.spec.max_replicas = None  # so that the pair is never checked half set
    fn.spec.min_replicas = low
    fn.spec.max_replicas = high
    fn.with_http(workers=numbers["workers"], worker_timeout=numbers["worker_timeout"])
    return errors


def _suggestion(
    ui: UI, session: Session, project: str, name: str
) -> tuple[dict[str, Any] | None, Chart | None]:
    """What the function's last runs the viewer may see suggest it ask for (``None``: no
    runs), and those runs' peaks against their limit as a picture."""
    records = ui.server.runs.list_runs(
        limit=100, project=project, name=name, owner=session.who.owner_filter(), brief=True
    )
    if not records:
        return None, None
    return suggestion_json(suggest(records, records[0].requests)), peaks_chart(records)


def router(ui: UI) -> APIRouter:
    routes = APIRouter()
    LoggedIn = Annotated[Session, Depends(ui.session)]
    catalog = ui.server.catalog

    @routes.get("/projects/{project}/functions", response_class=HTMLResponse)
    def functions(request: Request, session: LoggedIn, project: str) -> Response:
        context = {"project": project, "nav": "functions", "functions": catalog.latest(project)}
        return ui.page(request, "functions.html", session, context)

    @routes.get("/projects/{project}/functions/{name}", response_class=HTMLResponse)
    def versions(
        request: Request, session: LoggedIn, project: str, name: str, saved: Version = ""
    ) -> Response:
        suggestion, peaks = _suggestion(ui, session, project, name)
        context = {
            "project": project,
            "nav": "functions",
            "name": name,
            "versions": catalog.versions(project, name),
            "saved": saved,
            "suggestion": suggestion,
            "peaks": peaks,
        }
        return ui.page(request, "function_versions.html", session, context)

    def edit_page(
        request: Request,
        session: Session,
        project: str,
        name: str,
        form: JobForm,
        kind: str,
        errors: Errors,
        status_code: int = 200,
    ) -> Response:
        context: dict[str, Any] = {
            **pane_context(ui.server, session.who.role, form),
            "project": project,
            "nav": "functions",
            "name": name,
            "kind": kind,
            "errors": errors,
            "check_fields": FIELDS,
            "action": f"{ROOT}/projects/{project}/functions/{name}/edit",
        }
        return ui.page(request, "function_edit.html", session, context, status_code)

    @routes.get("/projects/{project}/functions/{name}/edit", response_class=HTMLResponse)
    def edit(
        request: Request, session: LoggedIn, project: str, name: str, version: Version = ""
    ) -> Response:
        stored = catalog.get(project, name, version or None)
        fn = Function.from_dict(stored.function)
        form = JobForm.of(fn, function=name, version=stored.hash[:12])
        return edit_page(request, session, project, name, form, fn.kind.value, {})

    @routes.post("/projects/{project}/functions/{name}/edit", response_class=HTMLResponse)
    async def save(request: Request, session: LoggedIn, project: str, name: str) -> Response:
        """The Resources pane saved as a new version of the function."""
        form = JobForm.parse(await ui.form(request, session))
        form.name = name
        stored = await run_in_threadpool(catalog.get, project, name, form.version or None)
        fn, errors = form.apply(Function.from_dict(stored.function))
        if not errors:
            try:  # the service's policies, as a run of it would meet them
                await run_in_threadpool(render, fn, ui.server.settings, None, session.who.role)
            except RunplaneError as error:
                where = field_of(error)
                errors[where] = worded(where, None, error)
        if errors:
            return edit_page(request, session, project, name, form, fn.kind.value, errors, 422)
        saved = await run_in_threadpool(catalog.store, fn, session.who.user, session.who.admin)
        return RedirectResponse(
            f"{ROOT}/projects/{project}/functions/{name}?saved={saved.hash[:12]}",
            status_code=303,
        )

    def deploy_page(
        request: Request,
        session: Session,
        project: str,
        name: str,
        values: dict[str, str],
        message: str = "",
        error: str = "",
        status_code: int = 200,
        errors: dict[str, str] | None = None,
    ) -> Response:
        context = {
            "project": project,
            "nav": "functions",
            "name": name,
            "values": values,
            "errors": errors or {},
            "message": message,
            "error": error,
            "deployable": ui.server.runs.runtime.capabilities.deploy,
        }
        return ui.page(request, "function_deploy.html", session, context, status_code)

    @routes.get("/projects/{project}/functions/{name}/deploy", response_class=HTMLResponse)
    def deploy_form(request: Request, session: LoggedIn, project: str, name: str) -> Response:
        fn = Function.from_dict(catalog.get(project, name).function)
        spec = fn.spec
        values = {
            "min_replicas": str(spec.min_replicas or ""),
            "max_replicas": str(spec.max_replicas or ""),
            "workers": str(spec.http.workers if spec.http else ""),
            "worker_timeout": str(spec.http.worker_timeout or "" if spec.http else ""),
        }
        return deploy_page(request, session, project, name, values)

    @routes.post("/projects/{project}/functions/{name}/deploy", response_class=HTMLResponse)
    async def deploy(request: Request, session: LoggedIn, project: str, name: str) -> Response:
        """Save the serving settings as a version, then deploy it."""
        data = await ui.form(request, session)
        values = {
            key: str(data.get(key) or "").strip()
            for key in ("min_replicas", "max_replicas", "workers", "worker_timeout")
        }
        fn = Function.from_dict((await run_in_threadpool(catalog.get, project, name)).function)
        try:
            if fn.kind is not FunctionKind.SERVING:
                raise RunplaneError(
                    f"{name} is a {fn.kind.value} function; only serving functions are deployed"
                )
            errors = apply_serving(fn, values)
            if errors:
                return deploy_page(
                    request,
                    session,
                    project,
                    name,
                    values,
                    error="; ".join(errors.values()),
                    status_code=422,
                    errors=errors,
                )
            await run_in_threadpool(catalog.store, fn, session.who.user, session.who.admin)
            applied = await run_in_threadpool(ui.server.deploy, fn, session.who)
        except RunplaneError as error:
            return deploy_page(
                request, session, project, name, values, error=str(error), status_code=422
            )
        message = "Deployed: " + ", ".join(applied)
        return deploy_page(request, session, project, name, values, message=message)

    return routes
