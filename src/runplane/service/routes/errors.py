"""The API's one error shape: every 4xx says what kind of error, the message the SDK and CLI
give, and the field, whether a route, the request's validation or FastAPI itself refused; a
storage that cannot serve now (a full disk, a database busy or unreachable) is a ``503`` with
the reason and a ``Retry-After``, never a ``500``."""

from __future__ import annotations

from typing import Any

import pydantic
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException as StarletteHTTPException

from runplane.errors import RunplaneError, shown
from runplane.service.outage import RETRY_AFTER, outage
from runplane.spec.bounds import MAX_DEPTH


class ErrorOut(pydantic.BaseModel):
    error: str
    message: str
    field: str | None = None


#: The refusals every operation may answer, as its description declares them.
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut} for status in (400, 401, 403, 404, 409, 422, 503)
}


def unavailable(error: Exception) -> JSONResponse:
    """``503`` with the reason when ``error`` is the storage failing for a while (see
    :mod:`runplane.service.outage`); any other error goes on, to be the ``500`` of an error no
    one expected."""
    reason = outage(error)
    if reason is None:
        raise error
    response = _error("ServiceUnavailable", f"the service cannot do this now: {reason}", 503)
    response.headers["Retry-After"] = str(RETRY_AFTER)
    return response


def _error(error: str, message: str, status: int, field: str | None = None) -> JSONResponse:
    body = ErrorOut(error=error, message=message, field=field)
    return JSONResponse(body.model_dump(), status_code=status)


def described(error: RequestValidationError) -> tuple[str | None, str]:
    """The field a request's validation refused and why, in the words of every refusal:
    ``field: value is not valid; what is allowed`` (the value cut short). The API answers it
    as JSON, the web pages as a page."""
    first = error.errors()[0]
    where = [str(part) for part in first.get("loc", ()) if part not in ("body", "query", "form")]
    field = ".".join(where) or "request"
    if first.get("type") == "json_invalid":
        detail = first.get("ctx", {}).get("error", "")
        return None, f"the body is not valid JSON ({detail})"
    value = first.get("input")
    return field, f"{field}: {shown(value)} is not valid; {first.get('msg', 'invalid')}"


def answer_errors(app: FastAPI) -> None:
    """Make ``app`` answer every refusal in the one shape."""

    @app.exception_handler(RunplaneError)
    async def runplane_error(_: Request, error: RunplaneError) -> JSONResponse:
        return _error(
            type(error).__name__, str(error), error.http_status, getattr(error, "field", None)
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, error: StarletteHTTPException) -> JSONResponse:
        response = _error("HTTPError", str(error.detail), error.status_code)
        response.headers.update(error.headers or {})
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, error: RequestValidationError) -> JSONResponse:
        field, message = described(error)
        return _error("InvalidValueError", message, 422, field)

    @app.exception_handler(DBAPIError)
    async def database_error(_: Request, error: DBAPIError) -> JSONResponse:
        return unavailable(error)

    @app.exception_handler(OSError)
    async def os_error(_: Request, error: OSError) -> JSONResponse:
        return unavailable(error)

    @app.exception_handler(RecursionError)
    async def too_deep(_: Request, error: RecursionError) -> JSONResponse:
        return _error("InvalidValueError", f"the body nests deeper than {MAX_DEPTH} levels", 422)
