"""``/projects/{project}/budget``: a project's spend budget, read by anyone, set and cleared by
admins; ``/estimates``: what a run would cost before it is submitted."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body

from runplane.errors import PolicyError
from runplane.service.auth import Principal
from runplane.service.routes.context import Service, User
from runplane.service.routes.fields import PathName
from runplane.service.routes.submissions import RunSubmission, function_of

router = APIRouter()


#: A budget as a caller sends it: ``amount`` (in the node-group prices' currency), ``period``
#: (``day``, ``week`` or ``month``, the default; UTC) and ``action`` (``warn``, the default,
#: ``hold`` or ``spot-only``). The service checks each, and names the field, the value, what
#: is allowed and an example when it refuses one (an unknown field included).
BudgetIn = Annotated[
    dict[str, Any],
    Body(examples=[{"amount": 500, "period": "month", "action": "hold"}]),
]


def _admin(who: Principal) -> None:
    if not who.admin:
        raise PolicyError(
            "budget",
            f"a project's budget holds or constrains every user's runs in it; user "
            f"{who.user!r} may read it but not set it (admins: any project's)",
        )


@router.get("/projects/{project}/budget")
def get_budget(project: PathName, server: Service, _: User) -> dict[str, Any]:
    """The project's budget and what it spent in the period now (``budget`` is ``null``
    without one)."""
    server.projects.get(project)
    return server.runs.budget(project)


@router.put("/projects/{project}/budget")
def set_budget(project: PathName, body: BudgetIn, server: Service, who: User) -> dict[str, Any]:
    """Set the project's budget (admins); runs it no longer holds are launched."""
    _admin(who)
    server.projects.get(project)
    return server.runs.set_budget(project, body, who.user)


@router.delete("/projects/{project}/budget")
def clear_budget(project: PathName, server: Service, who: User) -> dict[str, Any]:
    """Drop the project's budget (admins); the runs it held are launched."""
    _admin(who)
    server.projects.get(project)
    return server.runs.clear_budget(project)


@router.post("/estimates")
def estimate(body: RunSubmission, server: Service, who: User) -> dict[str, Any]:
    """What a run of the function would cost, before it is submitted, and its project's
    budget."""
    return server.runs.estimate(function_of(server, body), who.role)
