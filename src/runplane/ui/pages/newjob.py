"""**New Job** (and **Rerun**): pick a function, set its resources, then **Run now** or
**Schedule for later**.

Every check is the service's own: the form is applied with the SDK's calls
(:mod:`runplane.ui.jobform`), the run is prepared by ``build_request`` as a submission would
be (handler parameters, policies such as the priority classes a role may use), and the pod is
placed against the runtime's nodes before anything is submitted.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): FastAPI reads the
# routes' parameters, whose dependency is made inside router().

import json
import re
import time
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from runplane.errors import InvalidValueError, RunplaneError
from runplane.rendering import render
from runplane.runtimes.request import build_request
from runplane.service.access import usable_priority_classes
from runplane.service.auth import check_secret_grant
from runplane.service.preflight import Placement
from runplane.service.schedules import check_cron, next_fires
from runplane.spec.bounds import check_json
from runplane.spec.function import Function, FunctionKind
from runplane.spec.run_options import RunOptions
from runplane.ui.jobform import (
    Code,
    Errors,
    JobForm,
    code_of,
    function_from_code,
)
from runplane.ui.pages.runs import visible_run
from runplane.ui.pane import FIELDS, pane_context
from runplane.ui.sessions import Session
from runplane.ui.web import ROOT, UI
from runplane.ui.wording import worded

#: A function carried in the form, as the API bounds an inline one.
MAX_FUNCTION_BYTES = 2 << 20
#: What the form's submit buttons do: Run now, Schedule for later, Save as ML function.
ACTIONS = ("run", "schedule", "save")
_PARAM = re.compile(r"^params\['(?P<name>[^']+)'\]")


@dataclass
class Checked:
    """A form as the service sees it: the function it makes, what was refused and where, and
    (when nothing was) where the pod could run, its QoS class and its lints."""

    form: JobForm
    fn: Function | None = None
    errors: Errors = field(default_factory=dict)
    code: Code = field(default_factory=lambda: Code([], None))
    placement: Placement | None = None
    qos: str = ""
    lints: list[str] = field(default_factory=list)
    #: What the run is expected to cost, and its project's budget (``RunService.estimate``).
    estimate: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.fn is not None and not self.errors


def runtime_field(error: RunplaneError) -> str:
    """The form field a runtime's refusal belongs to: a volume's is the Volumes field's."""
    if str(error).startswith("volume ") or "local.volumes" in str(error):
        return "volumes_mode"
    return field_of(error)


def field_of(error: RunplaneError) -> str:
    """The form field a refusal from the service's checks belongs to."""
    where = str(getattr(error, "field", "") or "")
    if match := _PARAM.match(where):
        return f"param.{match['name']}"
    for prefix, target in (
        ("params", "params"),
        ("priority_class_name", "priority"),
        ("node_selector", "node_selector"),
        ("spec.node_selector", "node_selector"),
        ("handler", "handler"),
        ("kind", "function"),
        ("resources.requests.memory", "mem_request"),
        ("resources.requests.cpu", "cpu_request"),
        ("spec.resources", "mem_limit"),
        ("run(state_thresholds", "threshold.running"),
    ):
        if where.startswith(prefix):
            return target
    return "form"


def base_of_form(text: str) -> Function:
    """The function a form carries whole (an uploaded file's, a rerun's), as JSON."""
    try:
        data = json.loads(text)
    except ValueError:
        raise InvalidValueError("function", text, "a function as JSON") from None
    check_json("function", data, MAX_FUNCTION_BYTES, "fn.to_dict()")
    if not isinstance(data, dict):
        raise InvalidValueError("function", data, "a function as JSON")
    return Function.from_dict(data)


def base_function(ui: UI, project: str, form: JobForm) -> Function:
    """What the form starts from: a stored function (by name and version) or the function
    it carries (an uploaded file, a rerun)."""
    if form.function:
        stored = ui.server.catalog.get(project, form.function, form.version or None)
        fn = Function.from_dict(stored.function)
    elif form.base:
        fn = base_of_form(form.base)
    else:
        raise InvalidValueError(
            "function",
            "",
            "pick a stored function or upload a .py file",
            "a file defining def train(context, epochs: int = 1)",
        )
    if fn.kind is not FunctionKind.JOB:
        raise InvalidValueError(
            "function", fn.kind.value, "New Job runs job functions", "kind='job'"
        )
    fn.metadata.project = project
    return fn


def check(ui: UI, session: Session, project: str, form: JobForm) -> Checked:
    checked = Checked(form)
    try:
        base = base_function(ui, project, form)
    except RunplaneError as error:
        checked.errors["function"] = str(error)
        return checked
    fn, checked.errors = form.apply(base)
    checked.code = code_of(fn)
    role = session.who.role
    usable = usable_priority_classes(ui.server.settings, role)
    if form.unknown_priority(usable) and "priority" not in checked.errors:
        try:  # the policy's own words: the class is unknown, or not for this role
            render(fn, ui.server.settings, role=role)
        except RunplaneError as error:
            checked.errors["priority"] = worded("priority", None, error)
    if not checked.errors:
        try:
            request = build_request(
                fn, ui.server.settings, uid="0" * 32, params=form.run_params, role=role
            )
            rendered = render(fn, ui.server.settings, role=role)
            checked.placement = ui.server.placement(fn, role)
            checked.estimate = ui.server.runs.estimate(fn, role)
        except RunplaneError as error:
            where = field_of(error)
            checked.errors[where] = worded(where, None, error)
        else:
            checked.qos = rendered.qos.value
            checked.lints = [str(lint) for lint in rendered.lints]
            try:  # what Run now would refuse: a Secret not granted, then (only then, so
                # that nobody learns of Secrets they may not use) an unmapped volume, say
                check_secret_grant(fn, session.who)
                ui.server.runs.runtime.check(request)
            except RunplaneError as error:
                where = runtime_field(error)
                checked.errors[where] = worded(where, None, error)
    checked.fn = fn
    return checked


def prefill(ui: UI, session: Session, project: str, request: Request) -> JobForm:
    """The form a New Job page opens with: a rerun's, a stored function's, or empty."""
    rerun = request.query_params.get("rerun", "")
    name = request.query_params.get("function", "")
    if rerun:
        record = visible_run(ui, session, rerun)
        fn = Function.from_dict(record.function)
        form = JobForm.of(fn)
        form.params = {key: _as_text(value) for key, value in record.params.items()}
        return form
    if name:
        stored = ui.server.catalog.get(project, name, request.query_params.get("version"))
        version = request.query_params.get("version", "")
        return JobForm.of(Function.from_dict(stored.function), function=name, version=version)
    jobs = _job_functions(ui, project)
    if jobs:
        return JobForm.of(Function.from_dict(jobs[0].function), function=jobs[0].name)
    return JobForm()


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _job_functions(ui: UI, project: str) -> list[Any]:
    return [
        stored
        for stored in ui.server.catalog.latest(project)
        if stored.function.get("kind", "job") in ("job", "local")
    ]


def router(ui: UI) -> APIRouter:
    routes = APIRouter()
    LoggedIn = Annotated[Session, Depends(ui.session)]

    def context(session: Session, project: str, checked: Checked) -> dict[str, Any]:
        fields = [*FIELDS]
        if checked.code.signature is not None:
            fields += [f"param.{p.name}" for p in checked.code.signature.parameters]
        return {
            **pane_context(ui.server, session.who.role, checked.form),
            "project": project,
            "nav": "jobs",
            "checked": checked,
            "errors": checked.errors,
            "check_fields": fields,
            "stored": _job_functions(ui, project),
            "action": f"{ROOT}/projects/{project}/jobs/new",
        }

    @routes.get("/projects/{project}/jobs/new", response_class=HTMLResponse)
    def new_job(request: Request, session: LoggedIn, project: str) -> Response:
        form = prefill(ui, session, project, request)
        checked = check(ui, session, project, form) if (form.function or form.base) else None
        checked = checked or Checked(form)
        if not (form.function or form.base):
            checked.errors = {}
        return ui.page(request, "newjob.html", session, context(session, project, checked))

    async def posted(request: Request, session: Session, project: str) -> JobForm:
        data = await ui.form(request, session)
        form = JobForm.parse(data)
        upload = data.get("file")
        if isinstance(upload, UploadFile) and upload.filename:
            code = await upload.read(2 << 20)
            fn = await run_in_threadpool(function_from_code, project, upload.filename, code)
            form = JobForm.of(fn)
        elif request.headers.get("hx-trigger-name") == "function" and form.function:
            stored = await run_in_threadpool(ui.server.catalog.get, project, form.function)
            form = JobForm.of(Function.from_dict(stored.function), function=form.function)
        return form

    @routes.post("/projects/{project}/jobs/new/refresh", response_class=HTMLResponse)
    async def refresh(request: Request, session: LoggedIn, project: str) -> Response:
        """The form again after a change of function, file or handler (its parameters)."""
        try:
            form = await posted(request, session, project)
        except RunplaneError as error:
            form = JobForm.parse(await request.form())
            checked = Checked(form, errors={"file": str(error)})
        else:
            checked = await run_in_threadpool(check, ui, session, project, form)
        return ui.page(request, "job_form.html", session, context(session, project, checked))

    @routes.post("/projects/{project}/jobs/new/check", response_class=HTMLResponse)
    async def check_form(request: Request, session: LoggedIn, project: str) -> Response:
        """Field errors and the placement check, as the user fills the form in."""
        form = JobForm.parse(await ui.form(request, session))
        checked = await run_in_threadpool(check, ui, session, project, form)
        return ui.page(request, "job_check.html", session, context(session, project, checked))

    @routes.get("/projects/{project}/jobs/new/cron", response_class=HTMLResponse)
    def cron_preview(
        request: Request,
        session: LoggedIn,
        project: str,
        cron: Annotated[str, Query(max_length=128)] = "",
    ) -> Response:
        """The next times a cron expression fires, or why it is refused."""
        fires, error = [], ""
        if cron.strip():
            try:
                fires = next_fires(check_cron(cron), time.time(), 5)
            except RunplaneError as exc:
                error = str(exc)
        return ui.page(
            request, "cron.html", session, {"fires": fires, "cron_error": error, "cron": cron}
        )

    @routes.post("/projects/{project}/jobs/new", response_class=HTMLResponse)
    async def submit(request: Request, session: LoggedIn, project: str) -> Response:
        data = await ui.form(request, session)
        action = str(data.get("action") or "run")
        try:
            form = await posted(request, session, project)
        except RunplaneError as error:
            checked = Checked(JobForm.parse(data), errors={"file": str(error)})
            return ui.page(request, "newjob.html", session, context(session, project, checked), 422)
        checked = await run_in_threadpool(check, ui, session, project, form)
        if action == "schedule":
            try:
                check_cron(form.cron)
            except RunplaneError as error:
                checked.errors["cron"] = worded("cron", form.cron, error)
        elif (
            action == "run"
            and checked.placement is not None
            and not checked.placement.possible
            and not form.confirm_unplaceable
        ):
            checked.errors["placement"] = (
                f"This run cannot start on any node: {checked.placement.ever_message} "
                "Change its resources or node selector, or tick Run anyway to queue it."
            )
        if action not in ACTIONS or not checked.ok or checked.fn is None:
            status = 200 if action not in ACTIONS else 422
            return ui.page(
                request, "newjob.html", session, context(session, project, checked), status
            )
        who = session.who
        try:
            if action == "save":
                saved = await run_in_threadpool(
                    ui.server.catalog.store, checked.fn, who.user, who.admin
                )
                return RedirectResponse(
                    f"{ROOT}/projects/{project}/functions/{saved.name}?saved={saved.hash[:12]}",
                    status_code=303,
                )
            if action == "schedule":
                await run_in_threadpool(
                    ui.server.schedule,
                    checked.fn,
                    form.cron,
                    RunOptions(params=form.run_params),
                    who,
                )
                return RedirectResponse(
                    f"{ROOT}/projects/{project}/schedules?created=1", status_code=303
                )
            record = await run_in_threadpool(
                lambda: ui.server.submit(
                    checked.fn,  # type: ignore[arg-type]
                    who,
                    RunOptions(params=form.run_params),
                )
            )
        except RunplaneError as error:
            checked.errors[runtime_field(error)] = worded(runtime_field(error), None, error)
            return ui.page(request, "newjob.html", session, context(session, project, checked), 422)
        return RedirectResponse(f"{ROOT}/runs/{record.uid}", status_code=303)

    return routes
