"""A project's **Quotas** page: what its runs hold against its quota on each flavor, for
everyone, and a form that sets or clears a flavor's quota, for admins.

The page calls the same store as ``PUT`` and ``DELETE /api/v1/projects/NAME/quotas/FLAVOR``,
with its checks: a refused quantity is shown at its field, in the store's words.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): FastAPI reads the
# routes' parameters, whose dependency is made inside router().

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from runplane.errors import RunplaneError
from runplane.placement.quotas import FLAVORS, ON_DEMAND, RESOURCES
from runplane.service.quotas import project_usage
from runplane.ui.sessions import Session
from runplane.ui.web import UI

FIELDS = ("flavor", *RESOURCES)


def _rows(view: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"flavor": flavor, "resource": resource, **terms}
        for flavor, resources in view["flavors"].items()
        for resource, terms in resources.items()
    ]


def _field_of(error: RunplaneError) -> str:
    """The form's field a refusal names (``quotas.on-demand.cpu.nominal``: ``cpu``)."""
    parts = str(getattr(error, "field", "") or "").split(".")
    for part in parts:
        if part in FIELDS:
            return part
    return "form"


def _form_of(view: dict[str, Any], flavor: str) -> dict[str, Any]:
    quotas = view["flavors"].get(flavor, {})
    form: dict[str, Any] = {"flavor": flavor}
    for resource in RESOURCES:
        terms = quotas.get(resource) or {}
        form[resource] = terms.get("nominal") or ""
    form["borrowing"] = not any(
        (terms or {}).get("borrowing_limit") == "0" for terms in quotas.values()
    )
    return form


def router(ui: UI) -> APIRouter:
    routes = APIRouter()
    LoggedIn = Annotated[Session, Depends(ui.session)]
    quotas = ui.server.runs.quotas

    def quotas_page(
        request: Request,
        session: Session,
        project: str,
        form: dict[str, Any] | None = None,
        errors: dict[str, str] | None = None,
        message: str = "",
        status_code: int = 200,
    ) -> Response:
        view = project_usage(quotas, ui.server.runs.store, project)
        context = {
            "project": project,
            "nav": "project-quotas",
            "rows": _rows(view),
            "form": form or _form_of(view, ON_DEMAND),
            "errors": errors or {},
            "message": message,
            "admin": session.who.admin,
        }
        return ui.page(request, "project_quotas.html", session, context, status_code)

    @routes.get("/projects/{project}/quotas", response_class=HTMLResponse)
    def show(request: Request, session: LoggedIn, project: str) -> Response:
        return quotas_page(request, session, project)

    @routes.post("/projects/{project}/quotas", response_class=HTMLResponse)
    async def save(request: Request, session: LoggedIn, project: str) -> Response:
        data = await ui.form(request, session)
        form: dict[str, Any] = {key: str(data.get(key) or "").strip() for key in FIELDS}
        form["borrowing"] = bool(data.get("borrowing"))
        flavor = form["flavor"] if form["flavor"] in FLAVORS else ON_DEMAND
        who = session.who
        try:
            if data.get("action") == "clear":
                await run_in_threadpool(quotas.clear, project, form["flavor"], who.user, who.admin)
                message = f"Cleared the quota on {flavor}."
                form = None  # type: ignore[assignment]
            else:
                values: dict[str, Any] = {}
                for resource in RESOURCES:
                    if form[resource]:
                        values[resource] = {"nominal": form[resource]}
                        if not form["borrowing"]:
                            values[resource]["borrowing_limit"] = "0"
                names = ui.server.projects.names
                await run_in_threadpool(
                    quotas.set_flavor, project, form["flavor"], values, who.user, who.admin, names
                )
                message = "Saved."
        except RunplaneError as error:
            field = _field_of(error)
            status = getattr(error, "http_status", 422)
            return quotas_page(request, session, project, form, {field: str(error)}, "", status)
        return quotas_page(request, session, project, form, {}, message)

    return routes
