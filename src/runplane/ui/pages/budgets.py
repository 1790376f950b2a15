"""A project's **budget** in the UI: its spend against its budget above the project's runs and
on its settings page, where admins set or clear it, through the same call ``PUT
/api/v1/projects/NAME/budget`` makes, with its checks; a user who sends the form anyway is
refused (403) in words.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): FastAPI reads the
# routes' parameters, whose dependency is made inside router().

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from runplane.errors import RunplaneError
from runplane.ui.sessions import Session
from runplane.ui.web import ROOT, UI

FIELDS = ("amount", "period", "action")


def router(ui: UI) -> APIRouter:
    routes = APIRouter()
    LoggedIn = Annotated[Session, Depends(ui.session)]
    runs = ui.server.runs

    def budget_of(project: str) -> dict[str, Any]:
        """The project's standing, for the templates (``budget`` is ``None`` without one)."""
        try:
            return runs.budget(project)
        except RunplaneError:
            return {"project": project, "budget": None}

    ui.templates.env.globals["budget_of"] = budget_of

    @routes.post("/projects/{project}/budget", response_class=HTMLResponse)
    async def save(request: Request, session: LoggedIn, project: str) -> Response:
        data = await ui.form(request, session)
        form = {key: str(data.get(key) or "").strip() for key in FIELDS}
        errors: dict[str, str] = {}
        status = 422
        if not session.who.admin:
            errors["form"] = (
                f"A project's budget holds or constrains every user's runs in it; user "
                f"{session.who.user!r} may read it but not set it (admins: any project's)."
            )
            status = 403
        else:
            try:
                await run_in_threadpool(ui.server.projects.get, project)
                if data.get("do") == "clear":
                    await run_in_threadpool(runs.clear_budget, project)
                else:
                    await run_in_threadpool(runs.set_budget, project, form, session.who.user)
            except RunplaneError as error:
                field = str(getattr(error, "field", "") or "")
                errors[field if field in FIELDS else "form"] = str(error)
                status = error.http_status
        if errors:
            context = {
                "project": project,
                "nav": "project-settings",
                "budget_form": form,
                "budget_errors": errors,
            }
            return ui.page(request, "project_budget_page.html", session, context, status)
        return RedirectResponse(f"{ROOT}/projects/{project}/settings#budget", status_code=303)

    return routes
