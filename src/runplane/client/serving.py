"""Serving functions on this machine, from the SDK: ``fn.deploy()`` and ``fn.invoke()``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from runplane.client.remote import ApiBackend
from runplane.config import Settings
from runplane.errors import InvalidValueError, RunplaneError
from runplane.spec.function import Function, FunctionKind, check_servable


class InvokeError(RunplaneError):
    """The deployed function answered with an error status; the message has its answer."""

    http_status = 502

    def __init__(self, status: int, text: str) -> None:
        self.status = status
        super().__init__(f"the function answered {status}: {text}")


def _serving(fn: Function, what: str) -> None:
    if fn.kind is not FunctionKind.SERVING:
        raise InvalidValueError(
            "kind",
            fn.kind.value,
            f"only serving functions are {what}; jobs are run",
            "code_to_function('serve', filename='serve.py', kind='serving', handler='handler')",
        )


def deploy_here(fn: Function, settings: Settings) -> dict[str, Any]:
    """Start ``fn``'s replicas on this machine and wait until they answer."""
    from runplane.rendering import render
    from runplane.runtimes.local.serving import address
    from runplane.service.embedded import embedded

    _serving(fn, "deployed")
    check_servable(fn)
    manifests = render(fn, settings).manifests
    applied = embedded(settings).runtime.deploy(manifests)
    url = address(settings, fn.metadata.project, fn.metadata.name)
    return {"namespace": "local", "applied": applied, "url": url}


def encode(
    body: Any, method: str | None, headers: Mapping[str, str] | None
) -> tuple[str, bytes | None, dict[str, str]]:
    """The request ``fn.invoke`` sends: bytes and text as they are, anything else as JSON;
    POST when there is a body, else GET, unless ``method`` says."""
    content: bytes | None = None
    sent = dict(headers or {})
    if isinstance(body, bytes):
        content = body
    elif isinstance(body, str):
        content = body.encode()
    elif body is not None:
        content = json.dumps(body).encode()
        sent.setdefault("Content-Type", "application/json")
    return method or ("POST" if body is not None else "GET"), content, sent


def answer_of(status: int, content: bytes, text: str) -> Any:
    """The function's answer parsed from JSON when it is JSON; an error status raises."""
    if status >= 400:
        raise InvokeError(status, text)
    try:
        return json.loads(content)
    except ValueError:
        return content


def invoke_here(
    fn: Function,
    settings: Settings,
    path: str,
    body: Any,
    method: str | None,
    headers: Mapping[str, str] | None,
    timeout: float,
) -> Any:
    from runplane.runtimes.local.serving import address

    _serving(fn, "invoked")
    url = address(settings, fn.metadata.project, fn.metadata.name) + "/" + path.lstrip("/")
    verb, content, sent = encode(body, method, headers)
    try:
        answer = httpx.request(verb, url, content=content, headers=sent, timeout=timeout)
    except httpx.HTTPError as error:
        raise InvokeError(0, f"no answer from {url}: {error}") from None
    return answer_of(answer.status_code, answer.content, answer.text)


def invoke_through(
    service: ApiBackend,
    fn: Function,
    path: str,
    body: Any,
    method: str | None,
    headers: Mapping[str, str] | None,
    timeout: float,
) -> Any:
    """``fn.invoke`` with ``RUNPLANE_API``: the service sends the request on to the
    deployment (its replicas here, or its Kubernetes Service) and returns its answer."""
    _serving(fn, "invoked")
    verb, content, sent = encode(body, method, headers)
    status, answer = service.invoke(
        fn.metadata.project, fn.metadata.name, path, verb, content, sent, timeout
    )
    return answer_of(status, answer, answer.decode("utf-8", errors="replace"))
