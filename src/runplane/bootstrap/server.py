"""A serving pod's HTTP server: the standard library's, so that any image's Python serves."""

from __future__ import annotations

import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from .invocation import Invocation
from .serving import Event, Server, serving_options

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def serve(environ: Mapping[str, str]) -> int:
    """A serving pod: the handler behind the standard library's threading HTTP server, with
    at most ``workers`` calls at once; SIGTERM stops it after the calls under way."""
    workers, timeout, port = serving_options(environ)
    server = Server(Invocation.from_env(environ), workers, timeout)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            url = urlsplit(self.path)
            event = Event(
                body=self.rfile.read(length) if length else b"",
                path=url.path,
                method=self.command,
                headers=dict(self.headers.items()),
                fields=dict(parse_qsl(url.query)),
            )
            status, headers, body = server.call(event)
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per request would drown the handler's own output

    httpd = ThreadingHTTPServer(("", port), Handler)
    httpd.daemon_threads = True
    signal.signal(
        signal.SIGTERM,
        lambda signum, frame: threading.Thread(target=httpd.shutdown, daemon=True).start(),
    )
    server.context.logger.info("serving on port %d with %d worker(s)", port, workers)
    httpd.serve_forever()
    httpd.server_close()
    return 0
