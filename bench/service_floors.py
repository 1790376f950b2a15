"""What three layers of a submitted run's path cost at the least, each measured alone.

The service's CPU per run on the Kubernetes runtime (``bench/service_runs.py``) is a sum of
parts of about a millisecond each. This measures the floor of three of them beside what each
could be replaced by, on this machine, in one command:

* **the HTTP framework**: a run's submission (the body ``bench/service_runs.py`` sends) POSTed
  to FastAPI's route with the API's body model, to a plain Starlette route validating the same
  model, to a bare ASGI app, and to runplane's own API with its submission answered at once
  (:func:`service_app`: the gate, its lane for ``POST /runs``, the hand-off to a thread, the
  record's answer; :func:`service_route_app`: the same through FastAPI's route, as before the
  lane), each served by uvicorn (httptools, uvloop) in a process of its own: that process's
  CPU per request;
* **the pod's POST over TLS**: the run's rendered pod sent to a loopback TLS server (an EC
  P-256 certificate, as the testbed's API server has) answering 201 with a created pod's size,
  through urllib3's connection pool (what runplane's Kubernetes client sends it on) and through
  the standard library's ``http.client``: the client thread's CPU per request;
* **the run's record**: ``RunStore.create`` on a fresh SQLite database, one run per
  transaction (as submitted) and several sharing one (what committing concurrent submissions
  together would reach), with the WAL frames (4 KiB pages) one run's record writes.

    python bench/service_floors.py [--requests 2000] [--records 3000]
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import orjson
import psutil
import urllib3
from fastapi import FastAPI, Response
from sqlalchemy import event
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from runplane.service.routes.submissions import RunSubmission
from testbed.serve import free_port

ROOT = Path(__file__).resolve().parents[1]
CODE = "def handler(context):\n    return 1\n"
#: A created pod as the API server answers it (8.4 KB, managed fields and all).
CREATED = b'{"kind":"Pod","apiVersion":"v1","metadata":{"name":"run"}' + b" " * 8300 + b"}"


def submission(work: Path) -> bytes:
    """The body ``bench/service_runs.py`` POSTs for each run."""
    import runplane

    path = work / "steady.py"
    path.write_text(CODE)
    fn = runplane.code_to_function(
        "steady", filename=str(path), handler="handler", image="registry.example/bench:1"
    )
    fn.with_requests(cpu="10m", mem="16Mi").with_node_selection(node_selector={"pool": "bench"})
    fn.spec.annotations = {"runplane.io/test-duration": "3600s"}
    return orjson.dumps({"function": fn.to_dict()})


# -- the HTTP framework ---------------------------------------------------------------------

CREATED_ANSWER = b'{"uid":"0123456789abcdef0123456789abcdef"}'
fastapi_app = FastAPI()


@fastapi_app.post("/runs", status_code=201)
async def _fastapi_submit(body: RunSubmission) -> Response:
    return Response(CREATED_ANSWER, 201, media_type="application/json")


async def _starlette_submit(request: Request) -> Response:
    RunSubmission.model_validate_json(await request.body())
    return Response(CREATED_ANSWER, 201, media_type="application/json")


starlette_app = Starlette(routes=[Route("/runs", _starlette_submit, methods=["POST"])])


async def bare_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 201, "headers": headers})
    await send({"type": "http.response.body", "body": CREATED_ANSWER})


SERVICE_TOKEN = "floors-token-0123456789"


def service_app() -> Any:
    """runplane's own API (``create_app`` on a real server, its home and database of their
    own, from the environment :func:`framework` gives it) whose ``submit`` answers the record
    of one run made at the first call: what the service's HTTP path costs a submission beside
    the submission's own work (validating the body, the hand-off to a thread, the answer)."""
    return _service(lane=True)


def service_route_app() -> Any:
    """:func:`service_app` with ``POST /runs`` taken by its FastAPI route, not by the gate's
    lane (the app as it was before the lane)."""
    return _service(lane=False)


def _service(lane: bool) -> Any:
    from runplane.config import current
    from runplane.service.api import create_app, prepare_routes
    from runplane.service.guard import Gate
    from runplane.service.server import Server

    server = Server(current())
    made: list[Any] = []
    submit = server.submit

    def once(fn: Any, who: Any, options: Any = None, recorded: Any = None) -> Any:
        if not made:
            made.append(submit(fn, who, options, recorded))
        return made[0]

    server.submit = once  # type: ignore[method-assign]
    app = create_app(server)
    if not lane:
        (gate,) = [m for m in app.user_middleware if m.cls is Gate]
        gate.kwargs["lanes"] = {}
    prepare_routes(app)
    return app


def framework(body: bytes, requests: int, work: Path) -> dict[str, float]:
    """The server process's CPU per POST, by app (warmed up first)."""
    spent = {}
    service_env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")} | {
        "RUNPLANE_CONFIG": os.devnull,
        "RUNPLANE_LOCAL__HOME": str(work / "service"),
        "RUNPLANE_SERVICE__TOKENS": orjson.dumps(
            [{"token": SERVICE_TOKEN, "user": "bench", "role": "admin"}]
        ).decode(),
    }
    apps = ("fastapi_app", "starlette_app", "bare_app", "service_route_app", "service_app")
    for app in apps:
        port = free_port()
        ours = app.startswith("service_")
        server = subprocess.Popen(
            [
                *(sys.executable, "-m", "uvicorn", f"bench.service_floors:{app}"),
                *(["--factory"] if ours else []),
                *("--port", str(port), "--loop", "uvloop", "--http", "httptools"),
                *("--log-level", "warning", "--no-access-log"),
            ],
            cwd=ROOT,
            env=service_env if ours else None,
        )
        path = "/api/v1/runs" if ours else "/runs"
        headers = {"content-type": "application/json"}
        if ours:
            headers["authorization"] = f"Bearer {SERVICE_TOKEN}"
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
                _await_up(client, server)
                for _ in range(max(requests // 10, 20)):
                    client.post(path, content=body, headers=headers).raise_for_status()
                process = psutil.Process(server.pid)
                before = sum(process.cpu_times()[:2])
                for _ in range(requests):
                    client.post(path, content=body, headers=headers)
                spent[app] = (sum(process.cpu_times()[:2]) - before) / requests
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=30)
    return spent


def _await_up(client: httpx.Client, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            client.get("/")
            return
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start") from None
            time.sleep(0.05)


# -- the pod's POST over TLS ----------------------------------------------------------------


class _Created(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    #: The status, headers and body leave in one write, as the API server sends them (written
    #: apart, delayed acknowledgements would hold each answer ~40 ms).
    wbufsize = 1 << 16

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(CREATED)))
        self.end_headers()
        self.wfile.write(CREATED)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve_tls(directory: Path, port: int) -> None:
    """The loopback TLS server, run as a process of its own (``--serve-tls``)."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _Created)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "apiserver.crt", directory / "apiserver.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


@contextmanager
def tls_server(work: Path) -> Iterator[tuple[int, Path]]:
    from testbed import pki

    keys = work / "pki"
    pki.generate(keys)
    port = free_port()
    command = [sys.executable, __file__, "--serve-tls", str(keys), str(port)]
    server = subprocess.Popen(command, cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the TLS server did not start") from None
                time.sleep(0.05)
        yield port, keys / "ca.crt"
    finally:
        server.terminate()
        server.wait(timeout=30)


def pod_posts(work: Path, body: bytes, requests: int) -> dict[str, float]:
    """The client thread's CPU per POST of the run's pod, by client (warmed up first)."""
    from runplane.config import load_settings
    from runplane.runtimes.request import build_request
    from runplane.spec.function import Function

    fn = Function.from_dict(orjson.loads(body)["function"])
    pod = orjson.dumps(build_request(fn, load_settings(), uid=uuid.uuid4().hex).manifests[0])
    path = "/api/v1/namespaces/bench/pods"
    headers = {
        "Accept": "application/json",
        "Content-Type": "application/json",
        "Authorization": "Bearer " + "t" * 40,
        "User-Agent": "runplane",
    }
    with tls_server(work) as (port, ca):
        pool = urllib3.HTTPSConnectionPool("127.0.0.1", port, ca_certs=str(ca), maxsize=1)
        timeout = urllib3.Timeout(30)

        def via_urllib3() -> None:
            answer = pool.urlopen(
                "POST",
                path,
                body=pod,
                headers=headers,
                timeout=timeout,
                preload_content=False,
                redirect=False,
                assert_same_host=False,
            )
            answer.read()
            answer.release_conn()

        context = ssl.create_default_context(cafile=str(ca))
        connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)

        def via_http_client() -> None:
            connection.request("POST", path, body=pod, headers=headers)
            connection.getresponse().read()

        spent = {
            "urllib3": _thread_cpu(via_urllib3, requests),
            "http.client": _thread_cpu(via_http_client, requests),
        }
        connection.close()
        pool.close()
    return spent | {"pod_bytes": float(len(pod))}


def _thread_cpu(call: Callable[[], None], times: int) -> float:
    for _ in range(max(times // 10, 20)):
        call()
    began = time.thread_time()
    for _ in range(times):
        call()
    return (time.thread_time() - began) / times


# -- the run's record -----------------------------------------------------------------------


def records(work: Path, body: bytes, count: int, together: tuple[int, ...]) -> dict[str, float]:
    """CPU per ``RunStore.create`` with 1 and ``together`` runs per transaction, and the WAL
    frames one run's record writes."""
    function = orjson.loads(body)["function"]
    spent: dict[str, float] = {}
    for runs in (1, *together):
        spent[f"create_{runs}"], frames = _recorded(
            work / f"records-{runs}.db", function, runs, count
        )
        if runs == 1:
            spent["frames_per_run"] = frames
    return spent


def _recorded(path: Path, function: dict[str, Any], runs: int, count: int) -> tuple[float, float]:
    """CPU per run recorded ``runs`` to a transaction, and WAL frames per run."""
    from runplane.service import db
    from runplane.service.records import RunStore

    engine = db.connect(db.sqlite_url(path))
    store = RunStore(engine)
    shared = _SharedTransaction(engine)
    store._engine = shared  # type: ignore[assignment]  # lent the transaction open
    store._created._connection = shared  # type: ignore[assignment]  # and to the group commit

    def batch() -> None:
        with shared.open():
            for _ in range(runs):
                store.create(
                    uid=uuid.uuid4().hex,
                    project="default",
                    name="steady",
                    runtime="kubernetes",
                    function=function,
                    params={},
                    inputs={},
                    thresholds={"running": "24h"},
                    priority_class="medium",
                    requests={"cpu": "10m", "memory": "16Mi"},
                    limits={"memory": "16Mi"},
                    executor=None,
                    owner="bench",
                )

    for _ in range(max(count // 10 // runs, 10)):
        batch()
    began = time.process_time()
    for _ in range(count // runs):
        batch()
    spent = (time.process_time() - began) / (count // runs * runs)
    frames = _frames(engine, path, batch, max(100 // runs, 10)) / max(100 // runs, 10) / runs
    engine.dispose()
    return spent, frames


class _SharedTransaction:
    """An engine whose ``begin`` lends the transaction :meth:`open` began."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.connection: Any = None

    @contextmanager
    def open(self) -> Iterator[None]:
        with self.engine.begin() as self.connection:
            yield
        self.connection = None

    @contextmanager
    def begin(self) -> Iterator[Any]:
        yield self.connection


def _frames(engine: Any, path: Path, batch: Callable[[], None], times: int) -> int:
    """WAL frames ``times`` batches write: the WAL emptied first, and the store's connections
    made again not to checkpoint it meanwhile."""
    event.listen(engine, "connect", _never_checkpoint)
    engine.dispose()
    raw = sqlite3.connect(path)
    try:
        raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        for _ in range(times):
            batch()
        _, frames, _ = raw.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    finally:
        raw.close()
    return int(frames)


def _never_checkpoint(connection: Any, _record: Any) -> None:
    connection.execute("PRAGMA wal_autocheckpoint=0")


# -- the report ------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="POSTs timed per variant")
    parser.add_argument("--records", type=int, default=3000, help="runs recorded per variant")
    parser.add_argument("--serve-tls", nargs=2, metavar=("DIR", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_tls:
        serve_tls(Path(args.serve_tls[0]), int(args.serve_tls[1]))
        return
    print("# what three layers of a submitted run's path cost at the least")
    print(f"command: python bench/service_floors.py {' '.join(sys.argv[1:])}".rstrip())
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.1f} (1 min)")
    work = Path(tempfile.mkdtemp(prefix="runplane-floors-"))
    try:
        body = submission(work)
        served = framework(body, args.requests, work)
        fastapi_ms = served["fastapi_app"] * 1000
        print(f"\nthe HTTP framework: a run's submission ({len(body)} bytes), server CPU per POST")
        for app, seconds in served.items():
            ratio = seconds * 1000 / fastapi_ms
            print(f"  {app:17s} {seconds * 1000:6.3f} ms ({ratio:.2f} of FastAPI's)")
        posts = pod_posts(work, body, args.requests)
        size = int(posts.pop("pod_bytes"))
        print(
            f"\nthe pod's POST over TLS: {size} bytes sent, {len(CREATED)} answered, "
            "client thread CPU per POST"
        )
        for name, seconds in posts.items():
            ratio = seconds / posts["urllib3"]
            print(f"  {name:14s} {seconds * 1000:6.3f} ms ({ratio:.2f} of urllib3's)")
        spent = records(work, body, args.records, (4, 8))
        frames = spent.pop("frames_per_run")
        print(
            f"\nthe run's record on SQLite: CPU per run ({frames:.1f} WAL frames for a run alone)"
        )
        for key, seconds in spent.items():
            runs = int(key.rsplit("_", 1)[1])
            ratio = seconds / spent["create_1"]
            print(f"  {runs} per transaction {seconds * 1000:6.3f} ms ({ratio:.2f} of one's)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
