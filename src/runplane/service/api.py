"""The HTTP API of ``runplane serve``: thin routes over the server (one router per resource,
:mod:`runplane.service.routes`), errors as 4xx with the same message the SDK and CLI give.

Every request passes the boundary first (:mod:`runplane.service.guard`: size, bearer token,
JSON shape); the routes find the server and the caller through
:mod:`runplane.service.routes.context`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from importlib.metadata import version

from fastapi import FastAPI

from runplane.service.guard import Gate
from runplane.service.routes import (
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
from runplane.service.wire import API

#: What answers without a token: liveness and the API's own description.
PUBLIC = (f"{API}/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc")


def create_app(server: Server, shutdown_grace: float | None = None) -> FastAPI:
    """The API of ``server``. With ``shutdown_grace``, the app closes the server when it shuts
    down (SIGTERM), giving runs under way that many seconds."""

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        if shutdown_grace is not None:
            await asyncio.to_thread(server.close, shutdown_grace)

    app = FastAPI(
        title="runplane", version=version("runplane"), responses=ERRORS, lifespan=lifespan
    )
    app.state.server = server
    app.add_middleware(
        Gate,
        max_bytes=server.base_settings.service.max_request_bytes,
        tokens=server.tokens,
        api=API,
        public=PUBLIC,
    )
    answer_errors(app)

    @app.get(f"{API}/health")
    def health() -> dict[str, str]:
        return {"status": "ok", "version": app.version}

    for resource in (projects, functions, runs, deployments, schedules, settings, cluster, metrics):
        app.include_router(resource.router, prefix=API)
    return app
