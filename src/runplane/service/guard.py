"""The service's boundary: what a request must pass before any route sees it, cheapest first.

Every path belongs to a :class:`Door` (the API, the API's health, the web UI's login form,
the web UI's pages, and everything else), which says who may send a body there and how large:

1. **Size**: a body whose ``Content-Length`` is over the door's limit is refused (413) from
   the header alone.
2. **Who**: a door that needs a caller finds them from the headers (a bearer token, a session
   cookie) before a byte of the body is read. The API refuses a request without one (401);
   the pages let it on with its body unread, to be sent to the login page. An anonymous
   client therefore never makes the service read, hold or parse more than the few KiB of
   the login form. An address sending wrong tokens too fast is refused (429, see
   :mod:`runplane.service.throttle`) before its token is even compared.
3. **Size, again**: a body streamed without a length is refused as soon as the bytes received
   pass the limit, so the service holds at most the limit of one request.
4. **Shape**: a JSON body is parsed once here with bounds (:func:`~runplane.spec.bounds.
   load_json`: nesting, huge integers, non-finite numbers), refused with 422 naming where, so
   no route ever meets what would break it.
5. **Lanes**: a route every run passes (``POST /runs``) may be a :data:`Lane`, taken here with
   the body as parsed and the caller as found, instead of through the framework's middleware,
   routing and dependencies: those cost more of the event loop than the rest of a
   submission's answer does (docs/benchmarks.md). A lane answers as the route would, in the
   same error shape (:func:`runplane.service.routes.errors.refusal`), or declines before it
   sends anything (a body of another shape), and the route answers.

Every refusal has the API's one error shape, ``{"error", "message", "field"}``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any, Literal

from runplane.errors import InvalidValueError
from runplane.service.proxies import client_address
from runplane.service.throttle import FailureThrottle, retry_after
from runplane.spec.bounds import load_json
from runplane.spec.numbers import whole_number

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
#: A request's headers, names in lower case.
Headers = Mapping[bytes, bytes]

#: Where the caller found at the door is left for the routes.
PRINCIPAL = "runplane.principal"
#: Methods whose body the API reads.
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
#: A route answered at the gate: called with the request's scope (the caller in it, at
#: :data:`PRINCIPAL`), its JSON body as parsed, and ``send``; ``True`` once it has answered,
#: ``False`` (having sent nothing) to leave the request to the app.
Lane = Callable[[Scope, Any, Send], Awaitable[bool]]


@dataclass(frozen=True, slots=True)
class Door:
    """The paths ``path`` names (exactly, or all below it when it ends with ``/``) and what a
    request to them must pass."""

    path: str
    #: The largest body read here; 0: none (no route here reads one).
    max_bytes: int
    #: The caller, from the request's headers, or ``None``; without ``who`` anyone may send.
    who: Callable[[Headers], object | None] | None = None
    #: Without a caller: ``refuse`` answers 401; ``unread`` lets the request on with an empty
    #: body (the connection closes after its answer), for the app to answer as it does anyone
    #: not logged in.
    anonymous: Literal["refuse", "unread"] = "refuse"
    #: Whether wrong credentials here count against the sender's address (the throttle).
    throttled: bool = False
    #: The setting ``max_bytes`` comes from, named when a body is refused.
    setting: str = ""

    def covers(self, path: str) -> bool:
        return path.startswith(self.path) if self.path.endswith("/") else path == self.path

    def too_large(self) -> str:
        if self.max_bytes == 0:
            return "this path takes no request body"
        where = f" ({self.setting})" if self.setting else ""
        return f"a request body here is at most {self.max_bytes} bytes{where}"


class Doors:
    """The service's doors: the API's are set when the app is made; a part mounted beside it
    (the web UI) adds its own. The most specific door covering a path is the one used."""

    def __init__(self, doors: Iterable[Door] = ()) -> None:
        self._doors: list[Door] = []
        for door in doors:
            self.add(door)

    def add(self, door: Door) -> None:
        self._doors.append(door)
        # Exact paths first, then the longest prefix.
        self._doors.sort(key=lambda d: (d.path.endswith("/"), -len(d.path)))

    def at(self, path: str) -> Door:
        for door in self._doors:
            if door.covers(path):
                return door
        return _NOWHERE


#: Where no door covers a path: nothing there reads a body.
_NOWHERE = Door("/", 0)


class Gate:
    """ASGI middleware: the checks above, in that order, for every HTTP request."""

    def __init__(
        self,
        app: App,
        doors: Doors,
        throttle: FailureThrottle,
        lanes: Mapping[tuple[str, str], Lane] | None = None,
    ) -> None:
        self.app = app
        self.doors = doors
        self.throttle = throttle
        #: By method and path; only for a caller found at a door, with a JSON body.
        self.lanes = dict(lanes or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        door = self.doors.at(scope["path"])
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and not _within(declared, door.max_bytes):
            await _refuse(send, 413, "RequestTooLarge", door.too_large())
            return
        if door.who is not None:
            address = client_address(scope)
            if door.throttled:
                wait = self.throttle.wait(address)
                if wait > 0:
                    await _refuse(
                        send,
                        429,
                        "TooManyRequests",
                        "too many failed authentications from this address; try again in "
                        f"{retry_after(wait)} s (service.auth_failures_per_second)",
                        extra=[(b"retry-after", retry_after(wait).encode())],
                    )
                    return
            who = door.who(headers)
            if who is None and door.anonymous == "unread":
                if _has_body(headers):
                    receive, send = _unread(receive), _closing(send)
                await self.app(scope, receive, send)
                return
            if who is None:
                if door.throttled and headers.get(b"authorization"):
                    self.throttle.failed(address)
                await _refuse(
                    send,
                    401,
                    "HTTPError",
                    "a valid bearer token is required",
                    extra=[(b"www-authenticate", b"Bearer")],
                )
                return
            scope[PRINCIPAL] = who
        body = await _body(receive, send, door)
        if body is None:
            return
        if body and scope["method"] in _WITH_BODY and _is_json(headers.get(b"content-type")):
            try:
                parsed = load_json(body)
            except InvalidValueError as error:
                await _refuse(
                    send, 422, "InvalidValueError", str(error), field=error.field, close=False
                )
                return
            lane = self.lanes.get((scope["method"], scope["path"]))
            if lane is not None and PRINCIPAL in scope and await lane(scope, parsed, send):
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # whatever comes next: a disconnect
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


async def _body(receive: Receive, send: Send, door: Door) -> bytes | None:
    """The whole body, or ``None`` when it passed the limit (refused) or the client left."""
    chunks: list[bytes] = []
    received = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away
            return None
        chunk = message.get("body", b"")
        received += len(chunk)
        if received > door.max_bytes:
            await _refuse(send, 413, "RequestTooLarge", door.too_large())
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def _has_body(headers: Headers) -> bool:
    return headers.get(b"content-length", b"0") != b"0" or b"transfer-encoding" in headers


def _unread(receive: Receive) -> Receive:
    """A request's messages with its body left unread: an empty body; after it, only the
    end of the connection (whatever of the body arrives meanwhile is dropped, never held)."""
    given = False

    async def empty() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": b"", "more_body": False}
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return message

    return empty


def _closing(send: Send) -> Send:
    """``send`` ending the connection with the answer, so the bytes of a body left unread
    are never taken for the next request."""

    async def closing(message: Message) -> None:
        if message["type"] == "http.response.start":
            kept = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
            message = {**message, "headers": [*kept, (b"connection", b"close")]}
        await send(message)

    return closing


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
