"""``runplane serve`` (the shared service: API and web UI) and ``runplane ui`` (the same on
this machine, for one person, in one command)."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import socket
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import click

from runplane.cli.examples import example

if TYPE_CHECKING:
    from runplane.config import Settings

log = logging.getLogger("runplane.serve")

#: Ports ``runplane ui`` tries after a busy one, as Jupyter does.
_PORT_TRIES = 50


#: Allocations between two collections of the youngest generation (Python's default: 700).
#: Fewer collections find fewer objects of requests under way still alive, to walk and to
#: promote: 50,000 took 1-2 % off the service's CPU per run at the scale benchmark's load,
#: against 10,000 (docs/benchmarks.md, "Scale"), for at most a few MiB more held between two.
YOUNG_COLLECTION = 50_000


def collect_rarely() -> None:
    """The garbage collector tuned for a service that allocates in bursts: a pod event or a
    request makes hundreds of objects, so at Python's default the youngest generation was
    collected every event or two, and each collection walked the objects just made; that cost
    two to three times the work itself (docs/benchmarks.md, "Scale"). What exists once the
    service is up lives as long as it does, so it is frozen out of every later collection."""
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION, *gc.get_threshold()[1:])


def _serve(settings: Settings, host: str, port: int, ready: Any = None) -> None:
    """Run the service (API at ``/api/v1``, pages at ``/ui``) until SIGTERM or Ctrl-C;
    ``ready(url)`` is called once it accepts connections."""
    import uvicorn

    from runplane.service.access_log import access_logged
    from runplane.service.api import create_app, prepare_routes
    from runplane.service.server import Server
    from runplane.ui import mount

    if not log.isEnabledFor(logging.INFO):  # a service says what it is doing
        logging.getLogger("runplane").setLevel(logging.INFO)
    server = Server(settings)
    found = server.reconciliation
    if server.leadership is not None:
        log.info(
            "one replica of several, as %s: it serves clients; the replica holding the lease "
            "watches, launches and fires schedules",
            server.leadership.identity,
        )
    else:
        log.info(
            "runs execute on the %s runtime; at start %d run(s) were launched again, %d were lost, "
            "%d had ended unrecorded (recorded from their files), %d unknown run(s) had objects",
            server.runs.runtime.name,
            len(found.resubmitted),
            len(found.lost),
            len(found.ended),
            len(found.orphans),
        )
    log.info("runs are held so: %s", server.runs.runtime.isolation)
    try:
        # On SIGTERM (or Ctrl-C) uvicorn stops accepting and finishes the requests under way
        # (open pages' live streams end at once); then, as the app shuts down, runs executing
        # here get service.shutdown_grace seconds before they are aborted, and queued ones
        # wait for the next start.
        app = create_app(server, shutdown_grace=settings.service.shutdown_grace)
        # Forwarded headers are read by the app, from service.trusted_proxies only
        # (runplane.service.proxies), not by uvicorn from FORWARDED_ALLOW_IPS.
        # The access log is runplane's (runplane.service.access_log), not uvicorn's.
        config = uvicorn.Config(
            access_logged(app, settings.service.access_log),
            host=host,
            port=port,
            log_level="info",
            proxy_headers=False,
            access_log=False,
        )
        web = uvicorn.Server(config)
        mount(app, server, stopping=lambda: web.should_exit)

        def deposed() -> None:  # stop as on SIGTERM; the restart comes back as a follower
            web.should_exit = True

        server.on_deposed = deposed
        prepare_routes(app)  # before the freeze: what it builds lives as long as the app
        collect_rarely()
        if ready is not None:
            threading.Thread(
                target=_when_started, args=(web, host, port, ready), daemon=True
            ).start()
        web.run()
    finally:
        server.close()  # when uvicorn could not start; after a shutdown it is closed already
    if server.deposed:
        from runplane.errors import LeadLostError

        raise LeadLostError(
            "this replica lost the lead (its Lease was not renewed in time, or another "
            "holds it); it stopped controlling and exits, to start again as a follower"
        )


def _when_started(web: Any, host: str, port: int, ready: Any) -> None:
    while not web.started:
        if web.should_exit:
            return
        time.sleep(0.05)
    ready(f"http://{host}:{port}")


@click.command(epilog=example("runplane serve --host 0.0.0.0 --port 8470"))
@click.option("--host", help="Address to listen on (default: service.host).")
@click.option("--port", type=int, help="Port to listen on (default: service.port).")
def serve(host: str | None, port: int | None) -> None:
    """Serve the runplane API (runs, functions, schedules, defaults) and the web UI over HTTP."""
    from runplane.config import current
    from runplane.errors import ConfigError

    settings = current()
    if not settings.service.tokens:
        raise ConfigError(
            "service.tokens is empty, so nobody could use the API; set for example "
            'RUNPLANE_SERVICE__TOKENS=\'[{"token": "<secret>", "user": "me", '
            '"role": "admin"}]\''
        )
    _serve(settings, host or settings.service.host, port or settings.service.port)


def _free_port(host: str, first: int) -> int:
    for port in range(first, first + _PORT_TRIES):
        with socket.socket() as probe:
            try:
                probe.bind((host, port))
            except OSError:
                continue
            return port
    from runplane.errors import ConfigError

    raise ConfigError(
        f"ports {first} to {first + _PORT_TRIES - 1} on {host} are all in use; choose one "
        "with --port (example: runplane ui --port 9000)"
    )


def _has_browser() -> bool:
    """Whether a graphical browser can open here (never a text browser taking the terminal)."""
    if os.environ.get("BROWSER"):
        return True
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


@click.command("ui", epilog=example("runplane ui"))
@click.option(
    "--port", type=int, help="Port to listen on (default: service.port, or the next free one)."
)
@click.option("--no-browser", is_flag=True, help="Print the link only; do not open a browser.")
def ui_command(port: int | None, no_browser: bool) -> None:
    """Open the web UI: the service on 127.0.0.1 running on this machine, for you.

    A login token is made for this start only (never written anywhere) and printed in the
    link; the link's page logs you in as an admin with one press. Stop with Ctrl-C.
    """
    import getpass
    import secrets
    import webbrowser

    from runplane.config import Token, current

    settings = current()
    token = secrets.token_urlsafe(32)
    me = Token(token=token, user=getpass.getuser(), role="admin")
    host = "127.0.0.1"
    chosen = port or _free_port(host, settings.service.port)
    service = settings.service.model_copy(
        update={"tokens": [*settings.service.tokens, me], "runtime": "local", "host": host}
    )
    settings = settings.model_copy(update={"service": service})

    def ready(url: str) -> None:
        # After "#", the token never reaches the server (nor its logs); the page puts it in
        # the login form, which the user sends (a link alone never logs anyone in).
        link = f"{url}/ui/login#token={token}"
        click.echo(
            "\n    runplane is running on this machine. To use it, open:\n\n"
            f"        {link}\n\n"
            "    and press Log in. The token in the link is this start's own (also a bearer\n"
            "    token for the API at " + url + "/api/v1). Stop with Ctrl-C.\n",
            err=True,
        )
        if not no_browser and _has_browser():
            with contextlib.suppress(webbrowser.Error):
                webbrowser.open(link)

    _serve(settings, host, chosen, ready)
