"""One request and its whole answer over a connection of urllib3's pool: the request written
in one piece, the answer parsed by httptools (llhttp, the parser uvicorn reads requests with).

Creating a pod is a request of every run. The standard library's HTTP client that urllib3's
connections are made of builds a request header by header, each checked and encoded on its
own, and reads an answer's headers with the email package's parser: 150 µs of the service's
CPU per pod created, at the scale benchmark's load (docs/benchmarks.md), against the 40 µs
that writing the request and feeding the answer to llhttp take. Connections, their TLS and
their timeouts stay the pool's.
"""

from __future__ import annotations

import http.client
import re
from typing import Any

import httptools
import urllib3

#: What a header may not hold: it would end the header, or the request, early.
_BREAK = re.compile(r"[\r\n\0]")
#: The most read from the socket at once (an answer is a pod, a few KiB).
_READ = 1 << 16


class Answer:
    """A whole answer, read: what the client's response wrapper and errors read of one."""

    __slots__ = ("data", "headers", "reason", "status", "will_close")

    def __init__(
        self,
        status: int,
        reason: str,
        data: bytes,
        headers: urllib3.HTTPHeaderDict,
        will_close: bool,
    ) -> None:
        self.status, self.reason, self.data, self.headers = status, reason, data, headers
        self.will_close = will_close

    def read(self, *_: object, **__: object) -> bytes:
        return self.data

    def getheaders(self) -> urllib3.HTTPHeaderDict:
        return self.headers


def request_bytes(
    method: str, target: str, host: str, headers: dict[str, str], body: bytes
) -> bytes:
    """The request as sent: its line, ``Host``, the headers given, the body's length and
    ``Accept-Encoding: identity`` (an answer as written, never compressed), then the body.
    A header that would break a line is refused (``ValueError``), as the standard library
    refuses it."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", "Accept-Encoding: identity"]
    for name, value in headers.items():
        if _BREAK.search(name) or _BREAK.search(value):
            raise ValueError(f"header {name!r}: a name or value may not break the line")
        lines.append(f"{name}: {value}")
    lines.append(f"Content-Length: {len(body)}")
    return "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + body


class _Reading:
    """httptools' callbacks, keeping the final answer (an interim ``1xx`` is dropped)."""

    def __init__(self) -> None:
        self.parser: Any = None
        self.complete = False
        self.started = False
        self._begin()

    def _begin(self) -> None:
        self.status = 0
        self.keep_alive = False
        self.reason = b""
        self.headers = urllib3.HTTPHeaderDict()
        self.body: list[bytes] = []

    def on_message_begin(self) -> None:
        self.started = True

    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.add(name.decode("latin-1"), value.decode("latin-1"))

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.keep_alive = self.parser.should_keep_alive()  # llhttp forgets it at the end

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        if self.status < 200:
            self._begin()  # 100 Continue and the like: the answer follows
        else:
            self.complete = True

    def delimited_by_close(self) -> bool:
        """Whether the answer's body ends where the connection does (no length given)."""
        return bool(self.status) and not (
            "content-length" in self.headers or "transfer-encoding" in self.headers
        )


def exchange(connection: urllib3.connection.HTTPConnection, request: bytes) -> Answer:
    """``request`` (:func:`request_bytes`) sent on ``connection``, connected, and the whole
    answer. An answer that is not HTTP is urllib3's ``ProtocolError``; a connection closed
    before any answer, the standard library's ``RemoteDisconnected``."""
    sock = connection.sock
    if sock is None:
        raise ValueError("exchange: the connection is not connected")
    sock.sendall(request)
    reading = _Reading()
    parser = reading.parser = httptools.HttpResponseParser(reading)
    while not reading.complete:
        data = sock.recv(_READ)
        if not data:
            if reading.delimited_by_close():
                reading.complete = True
                break
            if not reading.started:
                raise http.client.RemoteDisconnected("the server closed the connection unanswered")
            raise urllib3.exceptions.ProtocolError("the server closed the connection mid-answer")
        try:
            parser.feed_data(data)
        except httptools.HttpParserError as error:
            raise urllib3.exceptions.ProtocolError(f"not an HTTP answer: {error}") from error
    will_close = reading.delimited_by_close() or not reading.keep_alive
    return Answer(
        reading.status,
        reading.reason.decode("latin-1"),
        b"".join(reading.body),
        reading.headers,
        will_close,
    )
