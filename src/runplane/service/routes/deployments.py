"""``/deployments``: serving functions deployed, listed, read, deleted, and invoked through
the service. A user sees what they deployed; an admin everything."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from runplane.errors import InvalidValueError
from runplane.runtimes.contract import Call
from runplane.service.routes.context import Service, User
from runplane.service.routes.fields import Name, PathName
from runplane.service.routes.submissions import RunSubmission, function_of
from runplane.service.wire import FUNCTION_STATUS, INVOKE_TIMEOUT
from runplane.spec.numbers import is_decimal

router = APIRouter()

#: The longest a deployed function's answer is awaited, in seconds.
MAX_INVOKE_TIMEOUT = 600.0


def _invoke_timeout(given: str | None) -> float:
    """The caller's timeout for an invoke (its header), 60 s when not given."""
    if given is None:
        return 60.0
    timeout = float(given) if is_decimal(given) and len(given) <= 32 else -1.0
    if not 0 < timeout <= MAX_INVOKE_TIMEOUT:
        raise InvalidValueError(
            INVOKE_TIMEOUT, given, f"seconds, more than 0 and at most {MAX_INVOKE_TIMEOUT:g}", "60"
        )
    return timeout


@router.post("/deployments", status_code=201)
def deploy(body: RunSubmission, server: Service, who: User) -> dict[str, Any]:
    fn = function_of(server, body)
    return {
        "name": fn.metadata.name,
        "namespace": server.settings.namespace,
        "applied": server.deploy(fn, who),
    }


@router.get("/deployments")
def list_deployments(
    server: Service, who: User, project: Annotated[Name | None, Query()] = None
) -> list[dict[str, Any]]:
    """Serving deployments: a user's own (those they deployed), everyone's for an admin."""
    return server.deployments(who, project)


@router.get("/deployments/{project}/{name}")
def get_deployment(project: PathName, name: PathName, server: Service, who: User) -> dict[str, Any]:
    return server.deployment(project, name, who)


@router.delete("/deployments/{project}/{name}")
def delete_deployment(
    project: PathName, name: PathName, server: Service, who: User
) -> dict[str, str]:
    return {"deleted": server.delete_deployment(project, name, who)}


async def invoke_deployment(
    project: PathName, name: PathName, path: str, request: Request, server: Service, who: User
) -> Response:
    """The request sent on to the deployment (its path, query, body and content type);
    the answer is the function's body, its status in ``X-Runplane-Function-Status``, so a
    function's 404 is not mistaken for the API's."""
    if len(path) > 2048:
        raise InvalidValueError("path", path[:64] + "...", "at most 2048 characters", "/predict")
    query = request.url.query
    headers = {
        key: value
        for key, value in request.headers.items()
        if key.lower() in ("content-type", "accept")
    }
    call = Call(
        method=request.method,
        path=path + (f"?{query}" if query else ""),
        body=await request.body(),
        headers=headers,
        timeout=_invoke_timeout(request.headers.get(INVOKE_TIMEOUT)),
    )
    answer = await asyncio.to_thread(server.invoke, project, name, call, who)
    return Response(
        answer.body,
        media_type=answer.content_type or None,
        headers={FUNCTION_STATUS: str(answer.status)},
    )


# One route per method, each with its own operation id in the OpenAPI document.
for _method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
    router.add_api_route(
        "/deployments/{project}/{name}/invoke/{path:path}",
        invoke_deployment,
        methods=[_method],
        response_class=Response,
        operation_id=f"invoke_deployment_{_method.lower()}",
    )
