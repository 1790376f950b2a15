"""JSON in, JSON out over the official client's connection, auth and TLS handling.

The generated ``CoreV1Api`` methods convert request bodies into models and responses back
again. runplane's manifests and the watch's consumers are plain dicts, and a round trip through
models can drop fields a client release does not know yet, so the runtime sends the rendered
JSON exactly as rendered and reads pods as the server wrote them. Errors stay the client's
``ApiException``, with the status code callers branch on.
"""

from __future__ import annotations

import http.client
import logging
import ssl
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypedDict, Unpack, cast

import orjson
import urllib3
from kubernetes import client
from kubernetes.client import rest
from kubernetes.client.exceptions import ApiException

from runplane import meters
from runplane.runtimes.kubernetes.api.exchange import begin, exchange, request_bytes

log = logging.getLogger(__name__)

Timeout = float | tuple[float, float] | None
#: A request's query parameters; those that are ``None`` are left out.
Query = Mapping[str, Any] | None
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
#: A delete's options that leave what the object owns to the garbage collector, in the background.
BACKGROUND: Mapping[str, str] = {"propagationPolicy": "Background"}

#: Where each namespaced kind runplane writes lives in the API (group/version path, plural).
_RESOURCES = {
    ("v1", "Pod"): ("/api/v1", "pods"),
    ("v1", "Secret"): ("/api/v1", "secrets"),
    ("v1", "ConfigMap"): ("/api/v1", "configmaps"),
    ("v1", "Service"): ("/api/v1", "services"),
    ("apps/v1", "Deployment"): ("/apis/apps/v1", "deployments"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"): (
        "/apis/autoscaling/v2",
        "horizontalpodautoscalers",
    ),
    ("kubeflow.org/v2beta1", "MPIJob"): ("/apis/kubeflow.org/v2beta1", "mpijobs"),
    ("kubeflow.org/v1", "MPIJob"): ("/apis/kubeflow.org/v1", "mpijobs"),
    ("sparkoperator.k8s.io/v1beta2", "SparkApplication"): (
        "/apis/sparkoperator.k8s.io/v1beta2",
        "sparkapplications",
    ),
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup"): (
        "/apis/scheduling.x-k8s.io/v1alpha1",
        "podgroups",
    ),
}

#: Methods whose request may be sent again when a kept connection turns out closed (RFC 9110's
#: idempotent methods, as urllib3 retries them).
_REPEATABLE = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
#: How a kept connection the server closed unseen fails its next request.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)

#: How a streamed read ends when the connection drops, times out or is closed under it.
CONNECTION_ENDED = (
    urllib3.exceptions.HTTPError,
    http.client.HTTPException,
    OSError,
    ValueError,
    AttributeError,
)


def collection_path(api_version: str, kind: str, namespace: str) -> str:
    prefix, plural = _RESOURCES[(api_version, kind)]
    return f"{prefix}/namespaces/{namespace}/{plural}"


def object_path(api_version: str, kind: str, namespace: str, name: str) -> str:
    return f"{collection_path(api_version, kind, namespace)}/{name}"


def manifest_path(manifest: Mapping[str, Any], namespace: str, named: bool = False) -> str:
    """Where ``manifest`` is created (its collection), or, ``named``, where it is read."""
    path = collection_path(manifest["apiVersion"], manifest["kind"], namespace)
    return f"{path}/{manifest['metadata']['name']}" if named else path


class Options(TypedDict, total=False):
    """What a request may add to its method, path and query."""

    body: object
    content_type: str
    timeout: Timeout


#: How an answer's body becomes JSON: all of it (orjson), or what a caller reads of it.
Decode = Callable[[bytes], dict[str, Any]]


def whole(body: bytes) -> dict[str, Any]:
    """All of an answer's JSON."""
    return cast(dict[str, Any], orjson.loads(body))


class Requests(Protocol):
    """What the watch needs of the API: JSON answers, and a GET read as it streams."""

    def json(
        self,
        method: str,
        path: str,
        query: Query = None,
        decode: Decode = whole,
        **options: Unpack[Options],
    ) -> dict[str, Any]: ...

    def stream(
        self, path: str, query: Mapping[str, Any], timeout: Timeout = None
    ) -> urllib3.BaseHTTPResponse: ...


class RestApi:
    """Requests on raw JSON, over one API client's connections."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        #: The connection pool of each server (scheme, host and port) requests went to.
        self._pools: dict[str, urllib3.HTTPConnectionPool] = {}

    def send(self, method: str, path: str, query: Query = None, **options: Unpack[Options]) -> Any:
        """The answer of a request the server took (2xx), its body not read yet."""
        return self._send(method, path, query, options, streamed=False)

    def _send(
        self, method: str, path: str, query: Query, options: Options, streamed: bool
    ) -> rest.RESTResponse:
        """The request sent over the client's pool (:meth:`_urlopen`), the answer a 2xx: read
        whole, or as it arrives when ``streamed``. A body is serialised once by orjson (the
        client would walk it to sanitise it and serialise it with the standard library's
        encoder, on the path of every pod created); text and bytes are sent as they are (a
        serialised manifest, a proxied call's body). Refusals are the client's
        ``ApiException``, a TLS failure too (status 0), as the client reports them."""
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        verb = verb_of(method, path, query)
        meters.count("kube_requests", (("method", verb), ("resource", resource_of(path))))
        headers = {"Accept": JSON}
        body = options.get("body")
        if body is not None:
            headers["Content-Type"] = options.get("content_type", JSON)
        method, url, headers, _, _ = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=params,
            header_params=headers,
            auth_settings=["BearerToken"],
        )
        if body is None or isinstance(body, bytes):
            data = body
        elif isinstance(body, str):
            data = body.encode()
        else:
            data = orjson.dumps(body)
        try:
            answer = self._urlopen(method, url, data, headers, options.get("timeout"), streamed)
        except (urllib3.exceptions.SSLError, ssl.SSLError) as error:  # as the client reports it
            raise ApiException(status=0, reason=f"{type(error).__name__}\n{error}") from None
        response = rest.RESTResponse(answer)
        if not 200 <= response.status <= 299:
            try:
                response.read()  # type: ignore[no-untyped-call]
            finally:
                if streamed:
                    answer.release_conn()
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return response

    def _urlopen(
        self,
        method: str,
        url: str,
        data: bytes | None,
        headers: dict[str, str],
        timeout: Timeout,
        streamed: bool = False,
    ) -> Any:
        """Sent on a connection of the server's pool, in one exchange of its own
        (:mod:`.exchange`): the pool manager would parse the URL, build a key of its pool from
        a dozen settings and merge headers again, and the pool would make a retry policy, a
        timeout and a response wrapper with its decoders for every request (creating a pod
        cost 235 us of CPU through urllib3's pool, 137 through ``http.client``, in
        ``bench/service_floors.py``). A connection the pool finds dropped when handed out is
        connected again, with the client's TLS settings; one whose exchange failed is closed.
        A request that may be repeated (a read, a delete) whose kept connection the server
        had closed unseen is sent once more, on a new connection, as urllib3's pool sends it.
        Through a proxy, as the client sends it."""
        manager = self.api.rest_client.pool_manager
        if isinstance(manager, urllib3.ProxyManager):
            return manager.request(
                method,
                url,
                body=data,
                headers=headers,
                timeout=_timeout(timeout),
                preload_content=False,
            )
        split = url.find("/", url.find("//") + 2)
        origin, target = (url, "/") if split < 0 else (url[:split], url[split:])
        request = request_bytes(method, target, origin[origin.find("//") + 2 :], headers, data)
        connect, read = (timeout, timeout) if not isinstance(timeout, tuple) else timeout
        again = method in _REPEATABLE
        while True:
            pool = self._pool(origin)
            try:
                taken = pool._get_conn()
            except urllib3.exceptions.ClosedPoolError:  # closed by the manager meanwhile: unsent
                self._pools.pop(origin, None)
                pool = self._pool(origin)
                taken = pool._get_conn()
            connection = cast(urllib3.connection.HTTPConnection, taken)
            kept = connection.sock is not None
            try:
                connection.timeout = connect or None
                if connection.sock is None:
                    connection.connect()
                if connection.sock is not None:
                    connection.sock.settimeout(read or None)
                if streamed:
                    return begin(connection, pool, request)  # released by its reader
                answer = exchange(connection, request)
                if answer.will_close:
                    connection.close()
            except BaseException as error:
                connection.close()  # its state is unknown: the next request connects again
                pool._put_conn(connection)
                if kept and again and isinstance(error, _STALE):
                    again = False
                    continue
                raise
            pool._put_conn(connection)
            return answer

    def _pool(self, origin: str) -> urllib3.HTTPConnectionPool:
        """The connection pool of ``origin``: the one taken before, unless the client's pool
        manager closed it since."""
        pool = self._pools.get(origin)
        if pool is None or pool.pool is None:
            manager = self.api.rest_client.pool_manager
            pool = self._pools[origin] = manager.connection_from_url(origin)
        return pool

    def json(
        self,
        method: str,
        path: str,
        query: Query = None,
        decode: Decode = whole,
        **options: Unpack[Options],
    ) -> dict[str, Any]:
        response = self.send(method, path, query, **options)
        response.read()
        return decode(response.data or b"{}")

    def unread(
        self, method: str, path: str, query: Query = None, **options: Unpack[Options]
    ) -> None:
        """A request whose answer matters only by its status: the body is read, so the
        connection is used again, but not decoded (a created pod's answer is the whole pod,
        managed fields and all)."""
        self.send(method, path, query, **options).read()

    def stream(
        self, path: str, query: Mapping[str, Any], timeout: Timeout = None
    ) -> urllib3.BaseHTTPResponse:
        """A GET whose body is read as it arrives (a watch, a log): its reader releases it."""
        response = self._send("GET", path, query, {"timeout": timeout}, streamed=True)
        return cast(urllib3.BaseHTTPResponse, response.response)


def _timeout(timeout: Timeout) -> urllib3.Timeout | None:
    """A request's timeout as urllib3 takes it: seconds in all, or (connect, read)."""
    if not timeout:  # none, or 0: as the client takes it, no timeout
        return None
    if isinstance(timeout, tuple):
        return urllib3.Timeout(connect=timeout[0], read=timeout[1])
    return urllib3.Timeout(total=timeout)


def shutdown(response: urllib3.BaseHTTPResponse) -> None:
    """Unblock a read of a streamed answer in another thread: shut the socket down, then close."""
    shutdown = getattr(response, "shutdown", None)
    try:
        if shutdown is not None:
            shutdown()
        response.close()
    except Exception as error:  # closing a half-dead connection may fail; it is going anyway
        log.debug("closing a streamed response: %s", error)


def _named(path: str) -> list[str]:
    """What a request path names past its API group and namespace: ``[kind]`` for a
    collection, ``[kind, name]`` for an object, then its subresource; ``[]`` for discovery."""
    parts = path.strip("/").split("/")
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    return rest


def resource_of(path: str) -> str:
    """The kind of object a request path names, with its subresource: ``pods``,
    ``pods/log``, ``nodes``, ``mpijobs`` (how requests are counted)."""
    rest = _named(path)
    return "/".join(rest[0:1] + rest[2:3]) or "discovery"  # /apis/<group>/<version>


def verb_of(method: str, path: str, query: Query = None) -> str:
    """The request's verb as the API server's audit names it where it differs from the
    method: ``WATCH`` for a watch, ``LIST`` for a read of a whole collection (a list of
    pods costs the server a filter over every pod of the namespace; a ``GET`` of one, a
    lookup)."""
    if (query or {}).get("watch"):
        return "WATCH"
    if method == "GET" and len(_named(path)) == 1:
        return "LIST"
    return method


def pods_path(namespace: str, name: str | None = None) -> str:
    return f"/api/v1/namespaces/{namespace}/pods" + (f"/{name}" if name else "")
