"""Every request goes on the API server's own connection pool: the path under the host's
prefix, the query, the bearer token and the body arrive as sent, also after the client's pool
manager closed its pools; a kept connection carries the next request, one the server closed is
made again (a read sent again where the server closed it as the request arrived), over TLS with
the client's settings; a streamed answer is read as it arrives and its connection kept only
once it was read to its end; refusals and broken answers reach the callers as the client's
errors. Real HTTP servers on loopback, no cluster."""

from __future__ import annotations

import http.client
import http.server
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from runplane.runtimes.kubernetes.api.rest import CONNECTION_ENDED, RestApi, shutdown
from testbed import pki


class _Echo(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        said = {"path": self.path, "auth": self.headers.get("Authorization"), "body": body.decode()}
        out = json.dumps(said).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[http.server.ThreadingHTTPServer]:
    served = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    yield served
    served.shutdown()
    served.server_close()


def test_a_body_is_sent_on_the_servers_pool_as_the_client_would(server):
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{server.server_port}/k8s/clusters/c1"
    configuration.api_key = {"BearerToken": "Bearer secret"}
    api = client.ApiClient(configuration)
    rest = RestApi(api)
    path = "/api/v1/namespaces/ns/pods"
    first = json.loads(rest.send("POST", path, {"dryRun": "All"}, body={"a": 1}).read())
    assert first == {
        "path": f"/k8s/clusters/c1{path}?dryRun=All",
        "auth": "Bearer secret",
        "body": '{"a":1}',
    }
    api.rest_client.pool_manager.clear()  # the client closed its pools meanwhile
    again = json.loads(rest.send("POST", path, body=b"raw").read())
    assert again["path"] == f"/k8s/clusters/c1{path}"
    assert again["body"] == "raw"


def test_an_unread_answer_leaves_its_connection_to_the_next_request(server):
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{server.server_port}"
    rest = RestApi(client.ApiClient(configuration))
    path = "/api/v1/namespaces/ns/pods"
    rest.unread("POST", path, body={"a": 1})
    (pool,) = rest._pools.values()
    assert pool.num_connections == 1
    assert pool.pool is not None
    assert pool.pool.qsize() >= 1  # back in the pool, idle
    rest.unread("POST", path, body={"b": 2})
    assert pool.num_connections == 1  # the first one's connection, not a second


class _KeptAlive(_Echo):
    """HTTP/1.1: a connection carries request after request until the client closes it; a
    POST to ``/conflict`` is refused as the API server refuses a name taken."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        if self.path.endswith("/conflict"):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            out = b'{"kind":"Status","reason":"AlreadyExists","code":409}'
            self.send_response(409)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
            return
        super().do_POST()


class _Counting(http.server.ThreadingHTTPServer):
    """Counts the connections it accepted, and can drop every one it holds."""

    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.accepted = 0
        self.open: list[socket.socket] = []

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = super().get_request()
        self.accepted += 1
        self.open.append(connection)
        return connection, address

    def drop_all(self) -> None:
        for connection in self.open:
            connection.shutdown(socket.SHUT_RDWR)


def _serving(server: http.server.ThreadingHTTPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def kept_alive() -> Iterator[_Counting]:
    served = _Counting(_KeptAlive)
    _serving(served)
    yield served
    served.shutdown()
    served.server_close()


def _rest(url: str, **settings: Any) -> RestApi:
    configuration = client.Configuration()
    configuration.host = url
    for key, value in settings.items():
        setattr(configuration, key, value)
    return RestApi(client.ApiClient(configuration))


def test_a_kept_connection_carries_the_next_request_and_one_dropped_is_made_again(kept_alive):
    rest = _rest(f"http://127.0.0.1:{kept_alive.server_port}")
    for n in range(3):
        assert json.loads(rest.send("POST", "/api/v1/pods", body={"n": n}).read())["body"]
    assert kept_alive.accepted == 1
    kept_alive.drop_all()  # the server closed the idle connection (a restart, a timeout)
    answer = json.loads(rest.send("POST", "/api/v1/pods", body={"n": 3}).read())
    assert answer["body"] == '{"n":3}'
    assert kept_alive.accepted == 2


def test_a_refusal_is_the_clients_error_with_the_servers_words(kept_alive):
    rest = _rest(f"http://127.0.0.1:{kept_alive.server_port}")
    with pytest.raises(ApiException) as refused:
        rest.send("POST", "/api/v1/conflict", body={"a": 1})
    assert refused.value.status == 409
    assert json.loads(refused.value.body)["reason"] == "AlreadyExists"
    assert json.loads(rest.send("POST", "/api/v1/pods", body={}).read())["body"] == "{}"
    assert kept_alive.accepted == 1  # the refusal's connection carried the next request


def test_an_answer_that_is_not_http_is_a_protocol_error_as_the_client_raises():
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def garbage_then_echo() -> None:
        connection, _ = listener.accept()
        connection.recv(65536)
        connection.sendall(b"garbage\r\n\r\n")
        connection.close()

    thread = threading.Thread(target=garbage_then_echo, daemon=True)
    thread.start()
    rest = _rest(f"http://127.0.0.1:{port}")
    with pytest.raises(urllib3.exceptions.ProtocolError):
        rest.send("POST", "/api/v1/pods", body={"a": 1})
    thread.join(5)
    listener.close()


def _tls_server(keys: Path) -> _Counting:
    served = _Counting(_KeptAlive)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(keys / "apiserver.crt", keys / "apiserver.key")
    served.socket = context.wrap_socket(served.socket, server_side=True)
    _serving(served)
    return served


def test_tls_is_spoken_with_the_clients_certificate_authority(tmp_path):
    keys = tmp_path / "pki"
    pki.generate(keys)
    served = _tls_server(keys)
    try:
        url = f"https://127.0.0.1:{served.server_port}"
        rest = _rest(url, ssl_ca_cert=str(keys / "ca.crt"))
        assert json.loads(rest.send("POST", "/api/v1/pods", body={"a": 1}).read())["body"]
        assert json.loads(rest.send("POST", "/api/v1/pods", body={"b": 2}).read())["body"]
        assert served.accepted == 1
        other = tmp_path / "other"
        pki.generate(other)
        stranger = _rest(url, ssl_ca_cert=str(other / "ca.crt"))
        with pytest.raises(ApiException) as refused:
            stranger.send("POST", "/api/v1/pods", body={"a": 1})
        assert refused.value.status == 0
        assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value.reason)
    finally:
        served.shutdown()
        served.server_close()


def _request_of(connection: socket.socket, pending: bytes) -> tuple[bytes, bytes]:
    """One request read whole from ``connection`` (its body by its length, none without one),
    and what arrived after it."""
    while b"\r\n\r\n" not in pending:
        data = connection.recv(65536)
        if not data:
            raise ConnectionError("closed before a whole request")
        pending += data
    head, _, rest = pending.partition(b"\r\n\r\n")
    lengths = [line for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")]
    length = int(lengths[0].split(b":")[1]) if lengths else 0
    while len(rest) < length:
        rest += connection.recv(65536)
    return head + b"\r\n\r\n" + rest[:length], rest[length:]


Script = list[bytes | Callable[[socket.socket], None] | None]


def _scripted(*connections: Script) -> tuple[int, threading.Thread, list[list[bytes]]]:
    """A server that accepts one connection after another, as many as ``connections``, each
    served by a thread of its own: it reads request after request and answers each with the
    next of its script: bytes written, a callable that writes the answer itself, or ``None``:
    the connection closed unanswered (a server closing a kept connection as a request
    arrives). Its port, a thread that ends when every connection has, and the requests each
    connection read."""
    listener = socket.create_server(("127.0.0.1", 0))
    read: list[list[bytes]] = []

    def answer(connection: socket.socket, script: Script, requests: list[bytes]) -> None:
        with connection:
            pending = b""
            for answer in script:
                request, pending = _request_of(connection, pending)
                requests.append(request)
                if answer is None:
                    break
                if callable(answer):
                    answer(connection)
                else:
                    connection.sendall(answer)

    def serve() -> None:
        served = []
        with listener:
            for script in connections:
                connection, _ = listener.accept()
                read.append([])
                served.append(threading.Thread(target=answer, args=(connection, script, read[-1])))
                served[-1].start()
        for thread in served:
            thread.join(10)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener.getsockname()[1], thread, read


def test_answers_in_chunks_after_a_continue_and_ended_by_the_close_are_read_whole():
    chunked = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
        b'4\r\n{"a"\r\n3\r\n:1}\r\n0\r\n\r\n'
    )
    until_closed = b'HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{"b":2}'
    port, thread, read = _scripted([chunked, until_closed])
    rest = _rest(f"http://127.0.0.1:{port}")
    first = rest.send("POST", "/api/v1/pods", body={"n": 1})
    assert (first.status, first.read()) == (201, b'{"a":1}')
    assert first.getheader("content-type") == "application/json"
    second = rest.send("PATCH", "/api/v1/pods/p", body=b"{}", content_type="application/json")
    assert (second.status, second.read()) == (200, b'{"b":2}')
    thread.join(5)
    ((post, patch),) = read  # one connection
    assert post.startswith(b"POST /api/v1/pods HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"\r\nContent-Length: 7\r\n\r\n" + b'{"n":1}' in post
    assert patch.startswith(b"PATCH /api/v1/pods/p HTTP/1.1\r\n")
    (pool,) = rest._pools.values()
    assert pool.pool is not None
    idle = pool.pool.get_nowait()
    assert idle is None or idle.sock is None  # the closed connection is not used again


def test_an_answer_cut_short_is_a_protocol_error_and_none_at_all_is_a_disconnection():
    cut = b"HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\n{}"
    port, thread, _ = _scripted([cut])
    with pytest.raises(urllib3.exceptions.ProtocolError, match="mid-answer"):
        _rest(f"http://127.0.0.1:{port}").send("POST", "/api/v1/pods", body={})
    thread.join(5)
    port, thread, _ = _scripted([b""])
    with pytest.raises(http.client.RemoteDisconnected):
        _rest(f"http://127.0.0.1:{port}").send("POST", "/api/v1/pods", body={})
    thread.join(5)


def test_a_header_that_would_break_the_request_is_refused():
    rest = _rest("http://127.0.0.1:9")
    with pytest.raises(ValueError, match="may not break the line"):
        rest.send("POST", "/api/v1/pods", body={}, content_type="application/json\r\nX-Evil: 1")


_OK = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{"a":1}'


def test_a_request_without_a_body_goes_on_the_pool_and_says_no_length():
    port, thread, read = _scripted([_OK, _OK])
    rest = _rest(f"http://127.0.0.1:{port}/prefix")
    assert rest.json("GET", "/api/v1/namespaces/ns/pods/p", {"x": "1"}) == {"a": 1}
    rest.unread("DELETE", "/api/v1/namespaces/ns/pods/p")
    thread.join(5)
    ((get, delete),) = read  # one connection carried both
    assert get.startswith(b"GET /prefix/api/v1/namespaces/ns/pods/p?x=1 HTTP/1.1\r\n")
    assert delete.startswith(b"DELETE /prefix/api/v1/namespaces/ns/pods/p HTTP/1.1\r\n")
    assert b"content-length" not in get.lower()
    assert b"content-type" not in get.lower()


def test_a_streamed_answer_is_read_as_it_arrives_and_its_connection_carries_the_next():
    more = threading.Event()

    def in_two_parts(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nline 1\r\n")
        more.wait(5)
        connection.sendall(b"7\r\n\nline 2\r\n0\r\n\r\n")

    port, thread, read = _scripted([in_two_parts, _OK])
    rest = _rest(f"http://127.0.0.1:{port}")
    response = rest.stream("/api/v1/namespaces/ns/pods/p/log", {"follow": "true"}, timeout=5)
    assert response.status == 200
    assert response.read1(65536) == b"line 1"  # before the rest was written
    more.set()
    assert b"".join(response.stream(3)) == b"\nline 2"
    assert response.read1(65536) == b""
    response.release_conn()
    assert rest.json("GET", "/api/v1/namespaces/ns/pods/p") == {"a": 1}
    thread.join(5)
    assert [len(requests) for requests in read] == [2]  # the next on the same connection


def test_a_stream_released_before_its_end_leaves_its_connection_closed():
    done = threading.Event()

    def endless(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n")
        done.wait(10)  # the answer goes on, as a followed log's

    port, thread, read = _scripted([endless], [_OK])
    rest = _rest(f"http://127.0.0.1:{port}")
    response = rest.stream("/api/v1/namespaces/ns/pods/p/log", {}, timeout=5)
    assert response.read1(65536) == b"ab"
    response.release_conn()  # its answer goes on: the connection cannot carry another
    assert rest.json("GET", "/api/v1/namespaces/ns/pods/p", timeout=5) == {"a": 1}
    done.set()
    thread.join(5)
    assert len(read) == 2  # a second connection


def _wait_asleep(thread: threading.Thread) -> None:
    """Until ``thread`` sleeps in the kernel (Linux's task state ``S``), or 5 s have passed."""
    stat = Path(f"/proc/self/task/{thread.native_id}/stat")
    deadline = time.monotonic() + 5
    while stat.read_text().rsplit(")", 1)[1].split()[0] != "S":
        assert time.monotonic() < deadline, "the reader never blocked"
        time.sleep(0.001)


def test_a_read_blocked_on_a_stream_ends_when_another_thread_shuts_it_down():
    def quiet(connection: socket.socket) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        connection.recv(1)  # until the client goes

    port, thread, _ = _scripted([quiet])
    rest = _rest(f"http://127.0.0.1:{port}")
    response = rest.stream("/api/v1/namespaces/ns/pods?watch=true", {}, timeout=30)
    ended: list[BaseException] = []

    def reader() -> None:
        try:
            response.read1(65536)
        except CONNECTION_ENDED as error:
            ended.append(error)

    reading = threading.Thread(target=reader)
    reading.start()
    _wait_asleep(reading)  # blocked on the socket
    shutdown(response)
    reading.join(5)
    assert not reading.is_alive()
    assert len(ended) == 1
    response.release_conn()
    thread.join(5)


def test_a_refused_stream_is_the_clients_error_and_its_connection_carries_the_next():
    refusal = (
        b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
        b'Content-Length: 40\r\n\r\n{"message":"dial tcp: connect: refused"}'
    )
    port, thread, read = _scripted([refusal, _OK])
    rest = _rest(f"http://127.0.0.1:{port}")
    with pytest.raises(ApiException) as refused:
        rest.stream("/api/v1/namespaces/ns/pods/p/log", {"follow": "true"}, timeout=5)
    assert refused.value.status == 500
    assert "connect: refused" in refused.value.body
    assert rest.json("GET", "/api/v1/namespaces/ns/pods/p") == {"a": 1}
    thread.join(5)
    assert len(read) == 1


def test_a_read_whose_kept_connection_was_closed_unanswered_is_sent_again_a_create_is_not():
    port, thread, read = _scripted([_OK, None], [_OK, None], [_OK])
    rest = _rest(f"http://127.0.0.1:{port}")
    assert rest.json("GET", "/api/v1/namespaces/ns/pods/p") == {"a": 1}
    assert rest.json("GET", "/api/v1/namespaces/ns/pods/p") == {"a": 1}  # on a second one
    with pytest.raises(http.client.RemoteDisconnected):
        rest.send("POST", "/api/v1/namespaces/ns/pods", body={})  # maybe applied: not again
    assert rest.json("GET", "/api/v1/namespaces/ns/pods/p") == {"a": 1}
    thread.join(5)
    assert [len(requests) for requests in read] == [2, 2, 1]
