"""A request whose query, form or path the routes' own declarations refuse (``?page=abc``, an
over-long filter, ``offset=-1``), answered as a page like every other refusal of the web UI:
the field, the value (cut short, escaped by the template) and what is allowed, never the
framework's JSON."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response

from runplane.service.routes.errors import described
from runplane.ui.sessions import SESSION_COOKIE
from runplane.ui.web import UI


def invalid_request_page(ui: UI) -> Callable[[Request, Exception], Awaitable[Response]]:
    """The exception handler of the UI's application for :class:`RequestValidationError`."""

    async def invalid_request(request: Request, error: Exception) -> Response:
        assert isinstance(error, RequestValidationError)
        _, message = described(error)
        session = ui.sessions.get(request.cookies.get(SESSION_COOKIE))
        return ui.page(
            request, "message.html", session, {"title": "Error", "message": message}, 422
        )

    return invalid_request
