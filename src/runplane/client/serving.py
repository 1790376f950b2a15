"""Calling a deployed serving function from the SDK (``fn.invoke()``): the request it sends and
the answer it returns, the same through the embedded default and through a service."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypedDict

from runplane.errors import RunplaneError
from runplane.runtimes.contract import Answer, Call


class InvokeError(RunplaneError):
    """The deployed function answered with an error status; the message has its answer."""

    http_status = 502

    def __init__(self, status: int, text: str) -> None:
        self.status = status
        super().__init__(f"the function answered {status}: {text}")


class ServingRequest(TypedDict, total=False):
    """What ``fn.invoke`` was given, passed on as one: its keyword signature is MLRun's and
    stays on the function alone (:func:`request_of` fills in what is absent)."""

    path: str
    body: Any
    method: str | None
    headers: Mapping[str, str] | None
    timeout: float


def request_of(request: ServingRequest) -> Call:
    """The request ``fn.invoke`` sends: bytes and text as they are, anything else as JSON;
    POST when there is a body, else GET, unless ``method`` says."""
    body = request.get("body")
    content = b""
    sent = dict(request.get("headers") or {})
    if isinstance(body, bytes):
        content = body
    elif isinstance(body, str):
        content = body.encode()
    elif body is not None:
        content = json.dumps(body).encode()
        sent.setdefault("Content-Type", "application/json")
    verb = request.get("method") or ("POST" if body is not None else "GET")
    path, timeout = request.get("path", ""), request.get("timeout", 60.0)
    return Call(method=verb, path=path, body=content, headers=sent, timeout=timeout)


def answer_of(answer: Answer) -> Any:
    """The function's answer parsed from JSON when it is JSON; an error status raises."""
    if answer.status >= 400:
        raise InvokeError(answer.status, answer.body.decode("utf-8", errors="replace"))
    try:
        return json.loads(answer.body)
    except ValueError:
        return answer.body
