"""**Common Parameters** (User jobs defaults and the policies), **Cluster** (with node
labelling) and **Schedules**.

Defaults are read by everyone and changed by admins only, through
:meth:`~runplane.service.server.Server.update_defaults`, the validation ``PATCH
/api/v1/defaults`` uses; a user who sends the form anyway gets the API's 403 and its message.
"""

# Annotations stay evaluated (no `from __future__ import annotations`): FastAPI reads the
# routes' parameters, whose dependency is made inside router().

import dataclasses
import time
from collections import defaultdict
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from runplane import names
from runplane.errors import RunplaneError
from runplane.runs import RunState
from runplane.service.access import admin_only, check_owner
from runplane.service.schedules import next_fires
from runplane.ui import policyform
from runplane.ui.charts import is_spot, node_bars
from runplane.ui.sessions import Session
from runplane.ui.web import ROOT, UI

#: The User jobs defaults form: field -> (its place in the defaults, its label).
DEFAULT_FIELDS = {
    "mem_request": (("resources", "requests", "memory"), "Memory request"),
    "mem_limit": (("resources", "limits", "memory"), "Memory limit"),
    "cpu_request": (("resources", "requests", "cpu"), "CPU request"),
    "cpu_limit": (("resources", "limits", "cpu"), "CPU limit"),
    "gpu_limit": (("resources", "limits", names.GPU), "GPU limit"),
}


def defaults_values(defaults: dict[str, Any]) -> dict[str, str]:
    values = {}
    for name, (path, _) in DEFAULT_FIELDS.items():
        node: Any = defaults
        for part in path:
            node = node.get(part, {}) if isinstance(node, dict) else {}
        values[name] = "" if node in ({}, None) else str(node)
    values["priority_class"] = str(defaults.get("priority_class", ""))
    values["preemption_mode"] = str(defaults.get("preemption_mode", ""))
    return values


def defaults_patch(values: dict[str, str]) -> dict[str, Any]:
    """The form as a merge patch: an empty field goes back to the configured value."""
    resources: dict[str, dict[str, Any]] = {"requests": {}, "limits": {}}
    for name, (path, _) in DEFAULT_FIELDS.items():
        resources[path[1]][path[2]] = values.get(name) or None
    patch: dict[str, Any] = {"resources": resources}
    for key in ("priority_class", "preemption_mode"):
        patch[key] = values.get(key) or None
    return patch


def router(ui: UI) -> APIRouter:
    routes = APIRouter()
    LoggedIn = Annotated[Session, Depends(ui.session)]

    def configured_classes() -> list[str]:
        """The classes the service is configured with: the policies choose among them."""
        return list(ui.server.base_settings.priority_classes.valid)

    def settings_page(
        request: Request,
        session: Session,
        values: dict[str, str] | None = None,
        message: str = "",
        error: str = "",
        status_code: int = 200,
        policies: policyform.PolicyForm | None = None,
    ) -> Response:
        settings = ui.server.settings
        defaults = settings.function_defaults.model_dump(mode="json")
        configured = configured_classes()
        context = {
            "nav": "settings",
            "values": values or defaults_values(defaults),
            "fields": {name: label for name, (_, label) in DEFAULT_FIELDS.items()},
            "classes": settings.priority_classes,
            "configured_classes": configured,
            "policy": policies or policyform.current(settings, configured),
            "role_choices": policyform.ROLE_CHOICES,
            "modes": ["prevent", "allow", "constrain", "none"],
            "reserved": settings.reserved_node_groups,
            "thresholds": defaults.get("state_thresholds", {}),
            "message": message,
            "error": error,
            "editable": session.who.admin,
            "readonly_reason": "" if session.who.admin else admin_only(session.who),
        }
        return ui.page(request, "settings.html", session, context, status_code)

    @routes.get("/settings", response_class=HTMLResponse)
    def common_parameters(request: Request, session: LoggedIn, saved: str = "") -> Response:
        return settings_page(request, session, message="Saved." if saved else "")

    @routes.post("/settings", response_class=HTMLResponse)
    async def save_defaults(request: Request, session: LoggedIn) -> Response:
        data = await ui.form(request, session)
        values = {
            key: str(data.get(key) or "").strip()
            for key in [*DEFAULT_FIELDS, "priority_class", "preemption_mode"]
        }
        policies = policyform.submitted(data, data.getlist, configured_classes())
        if not session.who.admin:
            return settings_page(
                request,
                session,
                values,
                error=admin_only(session.who),
                status_code=403,
                policies=policies,
            )
        try:
            patch = defaults_patch(values)
            change = policyform.patch(policies, ui.server.settings, configured_classes())
            if change:
                patch["policies"] = change
            await run_in_threadpool(ui.server.update_defaults, patch, session.who.user)
        except RunplaneError as error:
            return settings_page(
                request,
                session,
                values,
                error=str(error),
                status_code=error.http_status,
                policies=policies,
            )
        return RedirectResponse(f"{ROOT}/settings?saved=1", status_code=303)

    @routes.get("/cluster", response_class=HTMLResponse)
    def cluster(
        request: Request,
        session: LoggedIn,
        labelled: Annotated[str, Query(max_length=320)] = "",
    ) -> Response:
        saved = f"Labels of {labelled} saved." if labelled else ""
        return cluster_page(request, session, message=saved)

    @routes.post("/cluster/nodes/{name}/labels", response_class=HTMLResponse)
    async def label_node(request: Request, session: LoggedIn, name: str) -> Response:
        """Set one label (Key, Value) or remove one (``remove``), as ``PATCH
        /api/v1/cluster/nodes/{name}`` does: admins only, the same checks and messages."""
        data = await ui.form(request, session)
        remove = str(data.get("remove") or "")
        key = remove or str(data.get("key") or "").strip()
        value = None if remove else str(data.get("value") or "").strip()
        form = {"node": name, "key": "" if remove else key, "value": value or ""}
        if not session.who.admin:
            refusal = f"user {session.who.user!r} may not label nodes; only admins may"
            return cluster_page(request, session, form, error=refusal, status_code=403)
        try:
            await run_in_threadpool(ui.server.label_node, name, {key: value})
        except RunplaneError as error:
            return cluster_page(
                request, session, form, error=str(error), status_code=error.http_status
            )
        return RedirectResponse(f"{ROOT}/cluster?{urlencode({'labelled': name})}", status_code=303)

    def cluster_page(
        request: Request,
        session: Session,
        form: dict[str, str] | None = None,
        message: str = "",
        error: str = "",
        status_code: int = 200,
    ) -> Response:
        runtime = ui.server.runs.runtime
        nodes = ui.server.nodes()
        running = ui.server.runs.list_runs(
            states=[RunState.RUNNING.value],
            owner=session.who.owner_filter(),
            limit=1000,
            brief=True,
        )
        where: dict[str, list[Any]] = defaultdict(list)
        for run in running:
            if run.attempts:
                where[run.attempts[-1].node].append(run)
        selector = ui.server.settings.spot.node_selector
        bars = {
            node.name: node_bars(node.name, node.allocatable, node.free, f"node-bars-{i}")
            for i, node in enumerate(nodes, 1)
        }
        spot = [node for node in nodes if is_spot(node.labels, selector)]
        context = {
            "nav": "cluster",
            "bars": bars,
            "kinds": [
                ("Spot", spot),
                ("On-demand", [node for node in nodes if node not in spot]),
            ],
            "runtime": runtime.name,
            "capabilities": dataclasses.asdict(runtime.capabilities).items(),
            "nodes": nodes,
            "running": where,
            "ready": sum(1 for node in nodes if node.ready),
            "can_label": session.who.admin and runtime.capabilities.node_labels,
            "form": form or {},
            "message": message,
            "error": error,
        }
        return ui.page(request, "cluster.html", session, context, status_code)

    @routes.get("/projects/{project}/schedules", response_class=HTMLResponse)
    def schedules(
        request: Request,
        session: LoggedIn,
        project: str,
        created: Annotated[str, Query(max_length=8)] = "",
        deleted: Annotated[str, Query(max_length=40)] = "",
    ) -> Response:
        now = time.time()
        listed = []
        for schedule in ui.server.schedules.list_schedules(
            project, owner=session.who.owner_filter()
        ):
            try:
                upcoming = next_fires(schedule.cron, now, 1)[0]
            except Exception:  # a stored cron the scheduler cannot read: show it, flagged
                upcoming = None
            listed.append((schedule, upcoming))
        context = {
            "project": project,
            "nav": "schedules",
            "schedules": listed,
            "created": bool(created),
            "deleted": deleted,
        }
        return ui.page(request, "schedules.html", session, context)

    @routes.post("/projects/{project}/schedules/{schedule_id}/delete")
    async def delete_schedule(
        request: Request, session: LoggedIn, project: str, schedule_id: str
    ) -> Response:
        await ui.form(request, session)
        schedule = await run_in_threadpool(ui.server.schedules.get, schedule_id)
        check_owner(session.who, schedule.created_by, f"schedule {schedule_id}")
        await run_in_threadpool(ui.server.schedules.delete, schedule_id)
        return RedirectResponse(
            f"{ROOT}/projects/{project}/schedules?deleted={schedule_id[:12]}", status_code=303
        )

    return routes
