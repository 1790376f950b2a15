"""The API's boundary: what a request must pass before any route sees it, cheapest first.

1. **Size**: a body whose ``Content-Length`` is over the limit is refused (413) from the
   header alone.
2. **Who**: a request without a valid bearer token is refused (401) from its headers, before a
   byte of its body is read: an anonymous client cannot make the service read, hold or parse
   anything.
3. **Size, again**: a body streamed without a length is refused as soon as the bytes received
   pass the limit, so the service holds at most the limit of one request.
4. **Shape**: a JSON body is parsed once here with bounds (:func:`~runplane.spec.bounds.
   load_json`: nesting, huge integers, non-finite numbers), refused with 422 naming where, so
   no route ever meets what would break it.

Every refusal has the API's one error shape, ``{"error", "message", "field"}``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from typing import Any

from runplane.errors import InvalidValueError
from runplane.service.auth import Tokens
from runplane.spec.bounds import load_json
from runplane.spec.numbers import whole_number

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Where the caller found by the gate is left for the routes.
PRINCIPAL = "runplane.principal"
#: Methods whose body the API reads.
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


class Gate:
    """ASGI middleware: the checks above, in that order, for every HTTP request. A bearer
    token is asked of paths under ``api`` except the ``public`` ones (health, the API's
    description); the web pages beside the API have sessions of their own, checked by
    their routes, and get the size and shape checks only."""

    def __init__(
        self, app: App, max_bytes: int, tokens: Tokens, api: str, public: Collection[str]
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.tokens = tokens
        self.api = api.rstrip("/") + "/"
        self.public = frozenset(public)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and not _within(declared, self.max_bytes):
            await _refuse(
                send,
                413,
                "RequestTooLarge",
                f"a request body is at most {self.max_bytes} bytes (service.max_request_bytes)",
            )
            return
        path = scope["path"]
        if path.startswith(self.api) and path not in self.public:
            who = self.tokens.who(headers.get(b"authorization"))
            if who is None:
                await _refuse(
                    send,
                    401,
                    "HTTPError",
                    "a valid bearer token is required",
                    extra=[(b"www-authenticate", b"Bearer")],
                )
                return
            scope[PRINCIPAL] = who
        body = await self._body(receive, send)
        if body is None:
            return
        if body and scope["method"] in _WITH_BODY and _is_json(headers.get(b"content-type")):
            try:
                load_json(body)
            except InvalidValueError as error:
                await _refuse(
                    send, 422, "InvalidValueError", str(error), field=error.field, close=False
                )
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # whatever comes next: a disconnect
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _body(self, receive: Receive, send: Send) -> bytes | None:
        """The whole body, or ``None`` when it passed the limit (refused) or the client left."""
        chunks: list[bytes] = []
        received = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return None
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > self.max_bytes:
                await _refuse(
                    send,
                    413,
                    "RequestTooLarge",
                    f"a request body is at most {self.max_bytes} bytes (service.max_request_bytes)",
                )
                return None
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)


def _within(declared: bytes, limit: int) -> bool:
    """Whether a ``Content-Length`` header is a number of bytes up to ``limit``."""
    try:
        whole_number("Content-Length", declared.decode("latin-1"), 0, limit)
    except InvalidValueError:
        return False
    return True


def _is_json(content_type: bytes | None) -> bool:
    """Whether the routes would read the body as JSON: they do when no type is given."""
    if not content_type:
        return True
    main = content_type.split(b";")[0].strip().lower()
    return main == b"application/json" or main.endswith(b"+json")


async def _refuse(
    send: Send,
    status: int,
    error: str,
    message: str,
    field: str | None = None,
    extra: list[tuple[bytes, bytes]] | None = None,
    close: bool = True,
) -> None:
    """Answer in the API's error shape; with ``close`` (a body may be left unread, which must
    not be taken for the next request) the connection ends with the answer."""
    body = json.dumps({"error": error, "message": message, "field": field}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *([(b"connection", b"close")] if close else []),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
