"""The HTTP API of ``runplane serve``: thin routes over the server (one router per resource,
:mod:`runplane.service.routes`), errors as 4xx with the same message the SDK and CLI give.

Every request passes the boundary first (:mod:`runplane.service.guard`: size, bearer token,
JSON shape); the routes find the server and the caller through
:mod:`runplane.service.routes.context`. The interactive API pages (``/docs``, ``/redoc``) exist
only with ``service.api_docs`` (:mod:`runplane.service.docs`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from importlib.metadata import version

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.routing import BaseRoute, Mount
from starlette.types import Scope

from runplane.service.docs import serve_docs
from runplane.service.guard import Door, Doors, Gate
from runplane.service.proxies import trust_proxies
from runplane.service.routes import (
    budgets,
    cluster,
    deployments,
    functions,
    metrics,
    projects,
    runs,
    schedules,
    settings,
)
from runplane.service.routes.errors import ERRORS, answer_errors
from runplane.service.server import Server
from runplane.service.throttle import FailureThrottle
from runplane.service.wire import API


def create_app(server: Server, shutdown_grace: float | None = None) -> FastAPI:
    """The API of ``server``. With ``shutdown_grace``, the app closes the server when it shuts
    down (SIGTERM), giving runs under way that many seconds."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        if shutdown_grace is not None:
            await asyncio.to_thread(server.close, shutdown_grace)

    app = FastAPI(
        title="runplane",
        version=version("runplane"),
        responses=ERRORS,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.server = server
    configured = server.base_settings.service
    # Liveness and readiness answer anyone and read no body; paths outside the API and the
    # pages (the API's description, its docs, "/") read none either.
    app.state.doors = Doors(
        [
            Door(f"{API}/health", 0),
            Door(f"{API}/ready", 0),
            Door(
                f"{API}/",
                configured.max_request_bytes,
                who=lambda headers: server.tokens.who(headers.get(b"authorization")),
                throttled=True,
                setting="service.max_request_bytes",
            ),
        ]
    )
    app.state.throttle = FailureThrottle(
        configured.auth_failures_per_second, configured.auth_failure_burst
    )
    app.add_middleware(
        Gate,
        doors=app.state.doors,
        throttle=app.state.throttle,
        lanes={("POST", f"{API}/runs"): runs.submission_lane(server)},
    )
    trust_proxies(app, configured.trusted_proxies)  # outermost: the gate sees the caller
    answer_errors(app)
    if configured.api_docs:
        serve_docs(app)

    @app.get(f"{API}/health")
    def health() -> dict[str, str]:
        answer = {"status": "ok", "version": app.version}
        if server.leadership is not None:  # one of several replicas: which one this is
            answer["role"] = server.role
        return answer

    @app.get(f"{API}/ready", responses={503: {"description": "not ready, and why"}})
    def ready() -> JSONResponse:
        """Whether this service may take traffic: its database answers and it sees its runs
        change (a load balancer's readiness probe); 503 with the reasons when not."""
        problems = server.readiness()
        if problems:
            return JSONResponse({"status": "not ready", "problems": problems}, status_code=503)
        return JSONResponse({"status": "ready", "problems": []})

    for resource in (
        projects,
        budgets,
        functions,
        runs,
        deployments,
        schedules,
        settings,
        cluster,
        metrics,
    ):
        app.include_router(resource.router, prefix=API)
    return app


def prepare_routes(app: FastAPI) -> None:
    """Build now what FastAPI builds of each included router's routes on the first request
    that reaches them: about 0.2 s of CPU for this API and its pages (their signatures and
    fields inspected again), which the first runs submitted to a started service paid, inside
    their requests. A path no route takes is matched against every route."""
    scope: Scope = {
        "type": "http",
        "method": "GET",
        "path": f"{API}/",
        "root_path": "",
        "headers": [],
        "query_string": b"",
    }
    _match_each(app.router.routes, scope)


def _match_each(routes: Sequence[BaseRoute], scope: Scope) -> None:
    for route in routes:
        route.matches(scope)
        if isinstance(route, Mount):  # a mounted app (the pages) builds its own on demand
            _match_each(route.routes, scope)
