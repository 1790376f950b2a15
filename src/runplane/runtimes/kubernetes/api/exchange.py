"""One request and its answer over a connection of urllib3's pool: the request written in
one piece, the answer parsed by httptools (llhttp, the parser uvicorn reads requests with),
read whole (:func:`exchange`) or as it arrives (:func:`begin`: a watch, a pod's log).

Creating a pod is a request of every run, and following its log another. The standard
library's HTTP client that urllib3's connections are made of builds a request header by
header, each checked and encoded on its own, and reads an answer's headers with the email
package's parser: 150 µs of the service's CPU per pod created, at the scale benchmark's load
(docs/benchmarks.md), against the 40 µs that writing the request and feeding the answer to
llhttp take; a GET through the client and urllib3's pool manager cost 660 µs, 210 this way.
Connections, their TLS and their timeouts stay the pool's.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import socket
from collections.abc import Iterator
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
    method: str, target: str, host: str, headers: dict[str, str], body: bytes | None
) -> bytes:
    """The request as sent: its line, ``Host``, the headers given, ``Accept-Encoding:
    identity`` (an answer as written, never compressed), and the body's length then the body
    if it has one. A header that would break a line is refused (``ValueError``), as the
    standard library refuses it."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", "Accept-Encoding: identity"]
    for name, value in headers.items():
        if _BREAK.search(name) or _BREAK.search(value):
            raise ValueError(f"header {name!r}: a name or value may not break the line")
        lines.append(f"{name}: {value}")
    if body is not None:
        lines.append(f"Content-Length: {len(body)}")
    return "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + (body or b"")


class _Reading:
    """httptools' callbacks, keeping the final answer (an interim ``1xx`` is dropped)."""

    def __init__(self) -> None:
        self.parser: Any = None
        self.complete = False
        self.started = False
        self.headed = False  # the final answer's headers are read
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
        self.headed = self.status >= 200

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

    def will_close(self) -> bool:
        """Whether the connection cannot carry another request after this answer."""
        return self.delimited_by_close() or not self.keep_alive


def _sent(connection: urllib3.connection.HTTPConnection, request: bytes) -> _Reading:
    """``request`` sent on ``connection``, connected; the reading of its answer begun."""
    sock = connection.sock
    if sock is None:
        raise ValueError("exchange: the connection is not connected")
    sock.sendall(request)
    reading = _Reading()
    reading.parser = httptools.HttpResponseParser(reading)
    return reading


def _read_more(sock: socket.socket, reading: _Reading) -> None:
    """One read from the socket fed to the parser. An answer that is not HTTP is urllib3's
    ``ProtocolError``; a connection closed before any answer, the standard library's
    ``RemoteDisconnected``; one closed before the answer's end, ``ProtocolError`` (unless
    the close is what ends its body)."""
    data = sock.recv(_READ)
    if not data:
        if reading.delimited_by_close():
            reading.complete = True
            return
        if not reading.started:
            raise http.client.RemoteDisconnected("the server closed the connection unanswered")
        raise urllib3.exceptions.ProtocolError("the server closed the connection mid-answer")
    try:
        reading.parser.feed_data(data)
    except httptools.HttpParserError as error:
        raise urllib3.exceptions.ProtocolError(f"not an HTTP answer: {error}") from error


def exchange(connection: urllib3.connection.HTTPConnection, request: bytes) -> Answer:
    """``request`` (:func:`request_bytes`) sent on ``connection``, connected, and the whole
    answer; errors as :func:`_read_more` raises them."""
    reading = _sent(connection, request)
    sock = connection.sock
    while not reading.complete:
        _read_more(sock, reading)
    return Answer(
        reading.status,
        reading.reason.decode("latin-1"),
        b"".join(reading.body),
        reading.headers,
        reading.will_close(),
    )


def begin(
    connection: urllib3.connection.HTTPConnection,
    pool: urllib3.HTTPConnectionPool,
    request: bytes,
) -> Streamed:
    """``request`` sent on ``connection``, connected, and its answer's status and headers
    read; the body is read as it arrives (:class:`Streamed`), and the connection goes back
    to ``pool`` when it is released."""
    reading = _sent(connection, request)
    sock = connection.sock
    while not reading.headed and not reading.complete:
        _read_more(sock, reading)
    return Streamed(connection, pool, reading)


class Streamed:
    """An answer whose body is read as it arrives, as much as one read of the socket brings
    (:meth:`read1`): a watch's events, a followed log's lines. What urllib3's streamed
    response offers its readers here: status, reason and headers, ``read1``, ``stream``,
    ``read`` and ``data`` (the rest, whole: an error's words), ``shutdown`` (from another
    thread, to end a read blocked on the socket), ``close`` and ``release_conn``. A
    connection goes back to its pool for another request only once its answer was read to
    the end; otherwise it is closed first."""

    def __init__(
        self,
        connection: urllib3.connection.HTTPConnection,
        pool: urllib3.HTTPConnectionPool,
        reading: _Reading,
    ) -> None:
        self._connection: urllib3.connection.HTTPConnection | None = connection
        self._pool = pool
        self._reading = reading
        self._sock = connection.sock
        self.status = reading.status
        self.reason = reading.reason.decode("latin-1")
        self.headers = reading.headers
        self._data: bytes | None = None

    def getheaders(self) -> urllib3.HTTPHeaderDict:
        return self.headers

    def read1(self, amt: int = _READ) -> bytes:
        """What the body has brought beyond what was read (reading the socket once if
        nothing is waiting); ``b""`` at its end."""
        reading = self._reading
        while not reading.body and not reading.complete:
            if self._sock is None:
                raise urllib3.exceptions.ProtocolError("the answer's connection is closed")
            _read_more(self._sock, reading)
        if not reading.body:
            return b""
        data = b"".join(reading.body)
        reading.body.clear()
        if len(data) > amt:
            reading.body.append(data[amt:])
            data = data[:amt]
        return data

    def stream(self, amt: int = _READ, decode_content: bool = True) -> Iterator[bytes]:
        """The body, a read at a time, to its end (never compressed: the request asked for
        the answer as written)."""
        while chunk := self.read1(amt):
            yield chunk

    def read(self, *_: object, **__: object) -> bytes:
        """The rest of the body, whole."""
        return self.data

    @property
    def data(self) -> bytes:
        if self._data is None:
            self._data = b"".join(self.stream())
        return self._data

    def shutdown(self) -> None:
        """End both directions of the socket: a read blocked on it in another thread ends."""
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):  # closed already
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._sock = None
        connection = self._connection
        if connection is not None:
            connection.close()

    def release_conn(self) -> None:
        """Give the connection back to its pool: open for the next request if the answer was
        read to its end and the server keeps it, closed otherwise (the pool then connects
        again)."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        if not self._reading.complete or self._reading.will_close() or self._sock is None:
            connection.close()
        self._sock = None
        self._pool._put_conn(connection)
