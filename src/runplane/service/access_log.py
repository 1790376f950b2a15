"""The service's access log: a line for each request an operator would look for.

uvicorn writes a line for every request. On a busy service every run submitted is a request
and every open page polls, and that line was the largest cost of the event loop after the
socket's write: about 90 µs of a request's CPU (a record made, its caller's frame looked up,
the record copied to be coloured, a write to the log per line), a thirtieth of what the
service spends on a run (docs/benchmarks.md, "Scale"). Who submitted which run, and when, is
recorded with the run; what an operator reads an access log for is what failed and what was
slow. So ``service.access_log``:

- ``failures`` (the default): a line for each answer of 4xx or 5xx, for each request that got
  no answer, and for each whose answer took :data:`SLOW` seconds or more to begin;
- ``all``: a line for every request, as uvicorn wrote;
- ``off``: none.

A line names the client (as :mod:`runplane.service.proxies` resolved it), the request line,
the status and how long the answer took to begin (a live stream's answer begins at once and
goes on for as long as the page is open: its length says nothing about the service).
"""

from __future__ import annotations

import logging
import time
from urllib.parse import quote

from runplane.config import AccessLogMode
from runplane.service.guard import App, Message, Receive, Scope, Send

#: Seconds before an answer begins past which its request is logged whatever its status.
SLOW = 1.0

log = logging.getLogger("runplane.access")


def access_logged(app: App, mode: AccessLogMode) -> App:
    """``app`` writing the access log ``mode`` asks for (``off``: ``app`` itself)."""
    if mode == "off":
        return app
    every = mode == "all"

    async def logged(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        started = time.monotonic()
        began: float | None = None  # when the answer began
        status = 0

        async def sending(message: Message) -> None:
            nonlocal began, status
            if message["type"] == "http.response.start":
                began, status = time.monotonic(), message["status"]
            await send(message)

        try:
            await app(scope, receive, sending)
        finally:
            took = (time.monotonic() if began is None else began) - started
            if every or status >= 400 or began is None or took >= SLOW:
                _write(scope, status, took)

    return logged


def _write(scope: Scope, status: int, took: float) -> None:
    client = scope.get("client")
    query = scope.get("query_string")
    log.info(
        '%s - "%s %s HTTP/%s" %s in %.0f ms',
        f"{client[0]}:{client[1]}" if client else "-",
        scope["method"],
        quote(scope["path"]) + ("?" + query.decode("ascii", "replace") if query else ""),
        scope.get("http_version", "1.1"),
        status or "no answer",
        took * 1000,
    )
