"""A serving function's handler, ``handler(context, event)`` as Nuclio and MLRun call it: the
request as an event, the answer from what it returns, at most ``workers`` calls at once. The
same in a pod (:mod:`.server`) and in a replica on this machine (uvicorn)."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import traceback
import types

from .handler import load_module
from .invocation import ENV_HTTP_PORT, ENV_HTTP_WORKER_TIMEOUT, ENV_HTTP_WORKERS, Invocation
from .logger import stdout_logger

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


class Event:
    """One HTTP request as a serving handler sees it (Nuclio's names). A JSON body arrives
    parsed (a dict or list); any other body as bytes."""

    def __init__(
        self,
        body: Any = b"",
        path: str = "/",
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        fields: Mapping[str, str] | None = None,
    ) -> None:
        self.headers = dict(headers or {})
        self.content_type = _header(self.headers, "content-type")
        self.body = body
        if isinstance(body, bytes) and body and self.content_type.startswith("application/json"):
            with contextlib.suppress(ValueError):  # not JSON after all: the bytes, as they came
                self.body = json.loads(body)
        self.path = path
        self.method = method
        self.fields = dict(fields or {})
        self.trigger = types.SimpleNamespace(kind="http")

    def __repr__(self) -> str:
        return f"Event({self.method} {self.path})"


class Response:
    """What a handler returns for full control of the answer: body, headers, type, status."""

    def __init__(
        self,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        content_type: str = "",
        status_code: int = 200,
    ) -> None:
        self.body = body
        self.headers = dict(headers or {})
        self.content_type = content_type
        self.status_code = status_code


class ServingContext:
    """The ``context`` of a serving handler: a logger, ``user_data`` that ``init_context``
    fills once per replica, and :class:`Response`."""

    Response = Response

    def __init__(self, function: str, worker_id: int = 0) -> None:
        self.name = function
        self.worker_id = worker_id
        self.user_data = types.SimpleNamespace()
        self.logger = stdout_logger(f"runplane.serving.{function}")


def _header(headers: Mapping[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    return ""


def _encoded(body: Any, content_type: str) -> tuple[bytes, str]:
    if body is None:
        return b"", content_type or "text/plain; charset=utf-8"
    if isinstance(body, bytes):
        return body, content_type or "application/octet-stream"
    if isinstance(body, str):
        return body.encode(), content_type or "text/plain; charset=utf-8"
    return json.dumps(body).encode(), content_type or "application/json"


def answer(returned: Any) -> tuple[int, dict[str, str], bytes]:
    """A handler's return value as (status, headers, body): a :class:`Response`, a
    ``(status, body)`` pair, bytes or text as they are, anything else as JSON."""
    status, headers, content_type, body = 200, {}, "", returned
    if isinstance(returned, Response):
        status, headers = returned.status_code, dict(returned.headers)
        content_type, body = returned.content_type, returned.body
    elif isinstance(returned, tuple) and len(returned) == 2 and isinstance(returned[0], int):
        status, body = returned
    data, content_type = _encoded(body, content_type)
    headers["Content-Type"] = content_type
    return status, headers, data


class Server:
    """A serving function's handler, loaded once, called per request by every worker.

    ``init_context(context)``, when the code defines it, runs once before the first request.
    """

    def __init__(self, invocation: Invocation, workers: int, worker_timeout: float) -> None:
        module = load_module(invocation)
        self.handler = getattr(module, invocation.handler)
        self.context = ServingContext(invocation.function)
        init = getattr(module, "init_context", None)
        if callable(init):
            init(self.context)
        self.workers = threading.BoundedSemaphore(workers)
        self.worker_timeout = worker_timeout

    def respond(self, event: Event) -> tuple[int, dict[str, str], bytes]:
        """The handler's answer to one request; its exception is that request's 500."""
        try:
            return answer(self.handler(self.context, event))
        except Exception as error:
            traceback.print_exc()
            sys.stdout.flush()
            body = json.dumps({"error": f"{type(error).__name__}: {error}"}).encode()
            return 500, {"Content-Type": "application/json"}, body

    def call(self, event: Event) -> tuple[int, dict[str, str], bytes]:
        """:meth:`respond` in one of the workers; a request waits at most ``worker_timeout``
        for a free one, then gets a 503."""
        if not self.workers.acquire(timeout=self.worker_timeout):
            return busy(self.worker_timeout)
        try:
            return self.respond(event)
        finally:
            self.workers.release()


def busy(worker_timeout: float) -> tuple[int, dict[str, str], bytes]:
    """The answer when no worker came free in time."""
    message = f"no free worker within {worker_timeout:g} s; try again later"
    return 503, {"Content-Type": "application/json"}, json.dumps({"error": message}).encode()


def serving_options(environ: Mapping[str, str]) -> tuple[int, float, int]:
    """Workers, worker timeout (seconds) and port, from the container's variables."""
    workers = max(int(environ.get(ENV_HTTP_WORKERS) or 1), 1)
    timeout = float(environ.get(ENV_HTTP_WORKER_TIMEOUT) or 3600)
    return workers, timeout, int(environ.get(ENV_HTTP_PORT) or 8080)
