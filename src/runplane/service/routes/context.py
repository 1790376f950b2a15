"""What every route depends on: the server the app serves, and who is calling.

Authentication is a bearer token per user, checked at the boundary before a body is read
(:mod:`runplane.service.guard`); a token's role decides what it may do: ``user`` runs functions
within the policies, ``admin`` also changes service defaults and acts on everyone's runs,
schedules and functions. A token also lists the Secrets its runs may reference.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from runplane.service.access import admin_only
from runplane.service.auth import Principal
from runplane.service.guard import PRINCIPAL
from runplane.service.server import Server

#: Declares the bearer scheme in the API's description; the gate has checked the token.
_bearer = HTTPBearer(auto_error=False)


async def server_of(request: Request) -> Server:
    """The server the app was made for (kept in its state by :func:`~runplane.service.api.
    create_app`)."""
    server: Server = request.app.state.server
    return server


async def principal(
    request: Request,
    _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Who is calling: found by the gate from the bearer token, before the body was read.
    (The dependencies are coroutines only because they never block: a plain function would
    be run on a worker thread, a hop that costs more than what it does.)"""
    who = request.scope.get(PRINCIPAL)
    if not isinstance(who, Principal):  # a public path's route asked for a caller
        raise HTTPException(
            401, "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"}
        )
    return who


async def admin(who: Annotated[Principal, Depends(principal)]) -> Principal:
    if not who.admin:
        raise HTTPException(403, admin_only(who))
    return who


Service = Annotated[Server, Depends(server_of)]
User = Annotated[Principal, Depends(principal)]
Admin = Annotated[Principal, Depends(admin)]
