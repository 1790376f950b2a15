"""A request with a body goes on the API server's own connection pool: the path under the
host's prefix, the query, the bearer token and the body arrive as sent, also after the
client's pool manager closed its pools. A real HTTP server on loopback, no cluster."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from runplane.runtimes.kubernetes.api.rest import RestApi


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
