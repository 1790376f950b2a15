"""One replica of a serving function on this machine: the handler behind uvicorn.

Started by the deployment's supervisor (:mod:`runplane.runtimes.local.replicas`) as
``python -m runplane.runtimes.local.replica DIR``, with only the environment its function
grants. Every replica of a deployment binds the deployment's one port with ``SO_REUSEPORT``,
so the kernel spreads connections across them and a replica that dies takes no port with it.
The handler is loaded and called by the same code as in a pod (:class:`runplane.bootstrap.Server`);
at most ``workers`` calls run at once, in threads, and a request that finds none free within
``worker_timeout`` seconds gets a 503.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from runplane.bootstrap import Event, Invocation, Server, busy, serving_options

#: The file a replica writes once it accepts requests; the supervisor counts it ready then.
READY = "ready"
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


def application(server: Server, workers: int, worker_timeout: float) -> Starlette:
    """Every path and method to the handler, ``workers`` calls at a time."""
    free = anyio.Semaphore(workers)
    threads = anyio.CapacityLimiter(workers)

    async def endpoint(request: Request) -> Response:
        event = Event(
            body=await request.body(),
            path=request.url.path,
            method=request.method,
            headers=dict(request.headers),
            fields=dict(request.query_params),
        )
        with anyio.move_on_after(worker_timeout) as waiting:
            await free.acquire()
        if waiting.cancelled_caught:
            status, headers, body = busy(worker_timeout)
        else:
            try:
                status, headers, body = await anyio.to_thread.run_sync(
                    server.respond, event, limiter=threads
                )
            finally:
                free.release()
        return Response(body, status_code=status, headers=headers)

    return Starlette(routes=[Route("/{path:path}", endpoint, methods=METHODS)])


def listening_socket(host: str, port: int) -> socket.socket:
    """The deployment's port, shared with its other replicas (``SO_REUSEPORT``)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


class _Server(uvicorn.Server):
    """uvicorn, saying when it accepts requests (the replica's readiness)."""

    def __init__(self, config: uvicorn.Config, ready: Path) -> None:
        super().__init__(config)
        self._ready = ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._ready.write_text(str(os.getpid()), encoding="utf-8")


def _die_with_supervisor(expected_parent: int) -> None:
    """Exit if the supervisor is gone, and ask Linux to kill this process when it goes."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != expected_parent:
        os._exit(137)


def main(directory: Path) -> int:
    os.umask(0o077)
    spec: dict[str, Any] = json.loads((directory / "spec.json").read_text(encoding="utf-8"))
    _die_with_supervisor(spec["supervisor_pid"])
    if spec.get("cpu_ids") and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, spec["cpu_ids"])
    os.chdir(directory / "work")
    if spec.get("source_dir"):
        sys.path.insert(0, spec["source_dir"])
    workers, worker_timeout, _ = serving_options(os.environ)
    server = Server(Invocation.from_env(os.environ), workers, worker_timeout)
    sock = listening_socket(spec["host"], spec["port"])
    config = uvicorn.Config(
        application(server, workers, worker_timeout),
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=10,
    )
    _Server(config, directory / READY).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
