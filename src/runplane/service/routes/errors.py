"""The API's one error shape: every 4xx says what kind of error, the message the SDK and CLI
give, and the field, whether a route, the request's validation or FastAPI itself refused; a
storage that cannot serve now (a full disk, a database busy or unreachable) is a ``503`` with
the reason and a ``Retry-After``, never a ``500``."""

from __future__ import annotations

from collections.abc import Callable
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


def _runplane_error(error: RunplaneError) -> JSONResponse:
    return _error(
        type(error).__name__, str(error), error.http_status, getattr(error, "field", None)
    )


def _http_error(error: StarletteHTTPException) -> JSONResponse:
    response = _error("HTTPError", str(error.detail), error.status_code)
    response.headers.update(error.headers or {})
    return response


def _invalid_request(error: RequestValidationError) -> JSONResponse:
    field, message = described(error)
    return _error("InvalidValueError", message, 422, field)


def _too_deep(_: RecursionError) -> JSONResponse:
    return _error("InvalidValueError", f"the body nests deeper than {MAX_DEPTH} levels", 422)


#: What answers each kind of error; the most specific kind an error is of (its class's
#: method resolution order) decides, as for the app's exception handlers.
_ANSWERS: dict[type[Exception], Callable[[Any], JSONResponse]] = {
    RunplaneError: _runplane_error,
    StarletteHTTPException: _http_error,
    RequestValidationError: _invalid_request,
    DBAPIError: unavailable,
    OSError: unavailable,
    RecursionError: _too_deep,
}


def refusal(error: Exception) -> JSONResponse:
    """The answer to ``error`` in the one shape, as the app's exception handlers give it, for
    a route answered before the app (:mod:`runplane.service.guard`'s lanes). An error no
    answer is for is raised again: the ``500`` of an error no one expected."""
    for kind in type(error).__mro__:
        answer = _ANSWERS.get(kind)
        if answer is not None:
            return answer(error)
    raise error


def answer_errors(app: FastAPI) -> None:
    """Make ``app`` answer every refusal in the one shape."""

    async def answered(_: Request, error: Exception) -> JSONResponse:
        return refusal(error)

    for kind in _ANSWERS:
        app.add_exception_handler(kind, answered)
