"""**New serving function** (ML functions): a serving function made from a ``.py`` file, with
its Resources pane (Run on Spot nodes among them, set when it is created, as the documents
say of Nuclio functions) and its replicas and workers, stored as its first version. It is
deployed from the function's ⋮ menu, as any stored serving function is.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): FastAPI reads the
# routes' parameters, whose dependency is made inside router().

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from runplane.errors import InvalidValueError, RunplaneError
from runplane.rendering import render
from runplane.spec.function import Function, FunctionKind
from runplane.spec.kinds import check_servable
from runplane.ui.jobform import Errors, JobForm, function_from_code
from runplane.ui.pages.functions import SERVING_LABELS, apply_serving
from runplane.ui.pages.newjob import base_of_form, field_of
from runplane.ui.pane import FIELDS, pane_context
from runplane.ui.sessions import Session
from runplane.ui.web import ROOT, UI
from runplane.ui.wording import worded


def router(ui: UI) -> APIRouter:
    routes = APIRouter()
    LoggedIn = Annotated[Session, Depends(ui.session)]

    def page(
        request: Request,
        session: Session,
        project: str,
        form: JobForm,
        values: dict[str, str],
        errors: Errors,
        status_code: int = 200,
    ) -> Response:
        context: dict[str, Any] = {
            **pane_context(ui.server, session.who.role, form),
            "project": project,
            "nav": "functions",
            "values": values,
            "errors": errors,
            "check_fields": FIELDS,
            "show_thresholds": False,
            "action": f"{ROOT}/projects/{project}/serving/new",
        }
        return ui.page(request, "function_new.html", session, context, status_code)

    @routes.get("/projects/{project}/serving/new", response_class=HTMLResponse)
    def new_serving(request: Request, session: LoggedIn, project: str) -> Response:
        return page(request, session, project, JobForm(), {}, {})

    @routes.post("/projects/{project}/serving/new", response_class=HTMLResponse)
    async def create(request: Request, session: LoggedIn, project: str) -> Response:
        """Store the serving function the form describes as its first (or newest) version."""
        data = await ui.form(request, session)
        form = JobForm.parse(data)
        values = {key: str(data.get(key) or "").strip() for key in SERVING_LABELS}
        errors: Errors = {}
        upload = data.get("file")
        try:
            if isinstance(upload, UploadFile) and upload.filename:
                code = await upload.read(2 << 20)
                base = await run_in_threadpool(function_from_code, project, upload.filename, code)
            elif form.base:
                base = base_of_form(form.base)
            else:
                raise InvalidValueError(
                    "Code file (.py)",
                    "",
                    "upload the file whose handler serves requests",
                    "serve.py defining def handler(context, event)",
                )
        except RunplaneError as error:
            errors["file"] = str(error)
            return page(request, session, project, form, values, errors, 422)
        data_of = base.to_dict()
        data_of["kind"] = FunctionKind.SERVING.value
        base = Function.from_dict(data_of)
        base.metadata.project = project
        if not form.handler:
            form.handler = base.spec.handler
        form.base = json.dumps(base.to_dict())
        form.name = form.name or base.metadata.name
        fn, applied = form.apply(base)
        errors.update(applied)
        errors.update(apply_serving(fn, values))
        if not errors:
            try:
                check_servable(fn)
                await run_in_threadpool(render, fn, ui.server.settings, None, session.who.role)
            except RunplaneError as error:
                where = field_of(error)
                errors[where] = worded(where, None, error)
        if errors:
            return page(request, session, project, form, values, errors, 422)
        try:
            saved = await run_in_threadpool(
                ui.server.catalog.store, fn, session.who.user, session.who.admin
            )
        except RunplaneError as error:
            errors["name"] = str(error)
            return page(request, session, project, form, values, errors, 422)
        return RedirectResponse(
            f"{ROOT}/projects/{project}/functions/{saved.name}?saved={saved.hash[:12]}",
            status_code=303,
        )

    return routes
