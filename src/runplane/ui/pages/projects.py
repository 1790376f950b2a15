"""**Projects** in the UI: a new one created, each one's settings (description, default image,
parameters, labels) changed by its owner or an admin, and a switch from one to another.

The records are the service's own (:class:`~runplane.service.projects.ProjectStore`), created
and changed through the same calls ``POST`` and ``PATCH /api/v1/projects`` make, with their
rules: a record is its creator's (and admins') to change. The service keeps no other members:
every user sees every project and runs in it; the page says so.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): FastAPI reads the
# routes' parameters, whose dependency is made inside router().

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from runplane.errors import InvalidValueError, RunplaneError
from runplane.service.projects import ProjectRecord
from runplane.ui.sessions import Session
from runplane.ui.web import ROOT, UI

#: The form's fields and their labels.
LABELS = {
    "name": "Name",
    "description": "Description",
    "default_image": "Default image",
    "params": "Parameters (JSON)",
    "labels": "Labels",
}
Target = Annotated[str, Query(max_length=63)]


def _values(form: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The record's fields from the form's text, and what is refused, by field."""
    values: dict[str, Any] = {
        "description": form["description"],
        "default_image": form["default_image"],
    }
    errors: dict[str, str] = {}
    text = form["params"]
    try:
        params = json.loads(text) if text else {}
    except json.JSONDecodeError as error:
        params = None
        errors["params"] = (
            f"Parameters (JSON): not JSON ({error.msg} at character {error.pos}); "
            'write an object, as {"label_column": "label", "test_size": 0.2}'
        )
    if params is not None and not isinstance(params, dict):
        errors["params"] = (
            'Parameters (JSON): an object of names and values, as {"label_column": "label"}'
        )
    elif params is not None:
        values["params"] = params
    labels: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in form["labels"].split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            errors["labels"] = f"Labels: {item!r} is not key=value; write team=growth, tier=gold"
            break
        labels[key.strip()] = value.strip()
    values["labels"] = labels
    return values, errors


def _form_of(record: ProjectRecord | None) -> dict[str, str]:
    if record is None:
        return dict.fromkeys(LABELS, "")
    return {
        "name": record.name,
        "description": record.description,
        "default_image": record.default_image,
        "params": json.dumps(record.params, indent=1) if record.params else "",
        "labels": ", ".join(f"{k}={v}" for k, v in record.labels.items()),
    }


def _field_of(error: RunplaneError) -> str:
    field = str(getattr(error, "field", "") or "")
    return field.split(".")[0].split("[")[0] if field.split(".")[0] in LABELS else "form"


def _worded(error: RunplaneError) -> str:
    """The store's refusal behind the label of the field it names."""
    where = _field_of(error)
    message = str(error)
    field = str(getattr(error, "field", "") or "")
    if field and message.startswith(f"{field}: "):
        message = message[len(field) + 2 :]
    return f"{LABELS[where]}: {message}" if where != "form" else message


def router(ui: UI) -> APIRouter:
    routes = APIRouter()
    LoggedIn = Annotated[Session, Depends(ui.session)]
    store = ui.server.projects

    def settings_page(
        request: Request,
        session: Session,
        project: str,
        form: dict[str, str],
        errors: dict[str, str],
        message: str = "",
        status_code: int = 200,
    ) -> Response:
        record = store.record(project)
        editable = record is None or session.who.admin or record.owner == session.who.user
        context = {
            "project": project,
            "nav": "project-settings",
            "record": record,
            "form": form,
            "errors": errors,
            "message": message,
            "editable": editable,
        }
        return ui.page(request, "project_settings.html", session, context, status_code)

    @routes.get("/new-project", response_class=HTMLResponse)
    def new_project(request: Request, session: LoggedIn) -> Response:
        context = {"nav": "new-project", "form": _form_of(None), "errors": {}}
        return ui.page(request, "project_new.html", session, context)

    @routes.post("/new-project", response_class=HTMLResponse)
    async def create(request: Request, session: LoggedIn) -> Response:
        data = await ui.form(request, session)
        form = {key: str(data.get(key) or "").strip() for key in LABELS}
        values, errors = _values(form)
        if not errors:
            try:
                record, created = await run_in_threadpool(
                    store.create, form["name"], session.who.user, values, session.who.admin
                )
                if not created:
                    raise InvalidValueError(
                        "name",
                        form["name"],
                        "a project of that name exists already; open it, or choose another name",
                        f"{form['name'][:50]}-2",
                    )
            except RunplaneError as error:
                errors[_field_of(error)] = _worded(error)
        if errors:
            context = {"nav": "new-project", "form": form, "errors": errors}
            return ui.page(request, "project_new.html", session, context, 422)
        return RedirectResponse(f"{ROOT}/projects/{record.name}/jobs", status_code=303)

    @routes.get("/switch-project")
    def switch(_: LoggedIn, to: Target = "") -> Response:
        """The project picked in the switcher (a form that works without JavaScript)."""
        if to not in ui.projects():
            return RedirectResponse(f"{ROOT}/", status_code=303)
        return RedirectResponse(f"{ROOT}/projects/{to}/jobs", status_code=303)

    @routes.get("/projects/{project}/settings", response_class=HTMLResponse)
    def project_settings(request: Request, session: LoggedIn, project: str) -> Response:
        return settings_page(request, session, project, _form_of(store.record(project)), {})

    @routes.post("/projects/{project}/settings", response_class=HTMLResponse)
    async def save(request: Request, session: LoggedIn, project: str) -> Response:
        data = await ui.form(request, session)
        form = {key: str(data.get(key) or "").strip() for key in LABELS}
        form["name"] = project
        values, errors = _values(form)
        if not errors:
            try:
                if store.record(project) is None:  # known from its runs: recorded now, as yours
                    await run_in_threadpool(
                        store.create, project, session.who.user, values, session.who.admin
                    )
                else:
                    await run_in_threadpool(
                        store.update, project, values, session.who.user, session.who.admin
                    )
            except RunplaneError as error:
                errors[_field_of(error)] = _worded(error)
        if errors:
            return settings_page(
                request,
                session,
                project,
                form,
                errors,
                status_code=(403 if "form" in errors and "may" in errors["form"] else 422),
            )
        record = store.record(project)
        return settings_page(request, session, project, _form_of(record), {}, "Saved.")

    return routes
