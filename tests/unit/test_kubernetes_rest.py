"""A request with a body goes on the API server's own connection pool: the path under the
host's prefix, the query, the bearer token and the body arrive as sent, also after the
client's pool manager closed its pools; a kept connection carries the next request, one the
server closed is made again, over TLS with the client's settings; refusals and broken answers
reach the callers as the client's errors. Real HTTP servers on loopback, no cluster."""

from __future__ import annotations

import http.server
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from runplane.runtimes.kubernetes.api.rest import RestApi
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
